// The AMX micro-kernel's body, written once over a `Tiles` type that issues the tile
// instructions: the hardware's (qgemm_ukernel_amx.cc, compiled for AMX) or the scalar model's
// (qgemm_ukernel_amx_model.cc, AmxTileModel, for tests on CPUs without tiles). Both files include
// this inside their own namespace and instantiate AmxKernel<Tiles>; nothing else may include it.
//
// Tiles provides, as static functions (tile numbers are template arguments because the hardware
// encodes them in the instruction): LoadConfig(const TileConfig&), Release(),
// Load<t>(base, stride), Store<t>(base, stride), Zero<t>(), DotBusd<c, a, b>() (u8 A) and
// DotBssd<c, a, b>() (s8 A).
//
// Layout (see qgemm_ukernel.h): the operands are already what TDPBUSD multiplies, with no copy.
//   - A tile is 16 rows of A' with 64 bytes (16 quads) each: A's packed rows, or A itself, read
//     with the row stride lda. TILELOADD's stride is exactly what the packed layout has. An INT8
//     A is read as is by the kSignedA instantiation (TDPBSSD, s8 x s8: QGemmUkernel::signed_a),
//     so that it too is used in place; B' is int8 either way.
//   - B tile: 16 quads of one 16-column strip. The strip layout stores quad q as 64 bytes (16
//     columns x 4 depth values), and TDPBUSD wants B's row k to be quad k's 16 dwords: a strip's
//     16 quads are one tile, contiguous (stride 64). Packing B for the vector kernels packs it for
//     the tiles too.
//   - C tile: 16 rows x 16 int32 of the task's result block, stride ldc * 4 bytes.
//
// Blocking: 2 x 2 accumulator tiles (32 rows x 32 columns) with 2 A and 2 B tiles, all 8 tiles.
// Each 16-quad step loads 4 tiles (4 KiB) and issues 4 TDPBUSD (64 Ki multiply-adds): each A tile
// feeds 2 products and each B tile 2: 1 KiB loaded per TDPBUSD (16 cycles each on Sapphire
// Rapids). One accumulator per A tile would load twice the bytes per product. The accumulators stay
// in tiles across the whole depth block the driver gives a call (up to kDepthBlock, 512 quads: 32
// steps), and C is read and written once per call. On an Emerald Rapids Xeon products reached
// 21-32% of the tile limit (docs/benchmarks.md, "AMX on a lent Xeon"); the kPrefetchSteps
// candidates ask for each step's lines ahead of it.
//
// Edges:
//   - Rows: the configuration is made for the block's row count (1..32): the upper A and C
//     tiles get min(rows, 16) rows, the lower ones rows - 16, or are unused. A tile load reads
//     only its configured rows, so a short block never reads past A or writes past C.
//     Reconfiguring costs an LDTILECFG (which zeroes the tiles), so the thread's configuration
//     is kept across calls and only changed when the row count changes (the last block of a
//     product); QGemmUkernel::release ends it when the driver's task is done.
//   - Columns: one or two strips (B and C tiles of the second unused with one); the packed strips
//     are zero past N.
//   - Depth: whole steps straight from A and B; the last 1..15 quads (K not a multiple of 64)
//     are copied into zero-padded 64-byte rows on the stack (at most 2 KiB of A and 2 KiB of B
//     per call), and multiplied as one more step: zeros add nothing, and nothing past the
//     operands is read.

inline constexpr int kAmxMr = 32;
inline constexpr int kAmxMaxStrips = 2;
// Quads per step: one A tile row, one B tile.
inline constexpr size_t kAmxStepQuads = kAmxMaxRowBytes / 4;
// The prefetching candidates (kPrefetchSteps below) ask for the lines of the step this many
// steps ahead: 2 steps are 8 TDPBUSD, about 128 cycles at the tile unit's rate, more than a
// line takes to come from L2; 8 steps (about 500 cycles, 200 ns) more than one takes from L3,
// from which a core loads only 26 GB/s when the tile loads wait for each line
// (BM_AmxFeed/both_l3).
inline constexpr int kAmxPrefetchSteps = 2;
inline constexpr int kAmxFarPrefetchSteps = 8;

// Tile numbers: accumulators C<row tile><strip>, then A per row tile, B per strip.
enum AmxTile : int { kC00 = 0, kC01 = 1, kC10 = 2, kC11 = 3, kA0 = 4, kA1 = 5, kB0 = 6, kB1 = 7 };

// The configuration for a block of `rows` (1..32) rows.
inline TileConfig AmxConfigForRows(int rows) {
  TileConfig config;
  const uint8_t upper = static_cast<uint8_t>(rows < kAmxMaxRows ? rows : kAmxMaxRows);
  const uint8_t lower = static_cast<uint8_t>(rows - upper);
  auto use = [&](int tile, uint8_t tile_rows) {
    config.rows[tile] = tile_rows;
    config.colsb[tile] = tile_rows != 0 ? kAmxMaxRowBytes : 0;
  };
  use(kC00, upper);
  use(kC01, upper);
  use(kA0, upper);
  use(kC10, lower);
  use(kC11, lower);
  use(kA1, lower);
  use(kB0, kAmxMaxRows);
  use(kB1, kAmxMaxRows);
  return config;
}

// The row count the calling thread's tiles are configured for (0: none), per Tiles type.
template <typename Tiles>
int& AmxConfiguredRows() {
  thread_local int rows = 0;
  return rows;
}

template <typename Tiles>
void AmxConfigure(int rows) {
  int& configured = AmxConfiguredRows<Tiles>();
  if (configured == rows) return;
  Tiles::LoadConfig(AmxConfigForRows(rows));
  configured = rows;
}

template <typename Tiles>
void AmxRelease() {
  int& configured = AmxConfiguredRows<Tiles>();
  if (configured == 0) return;
  Tiles::Release();
  configured = 0;
}

// One step: kStepQuads quads of A (rows from a, a_stride apart; the lower tile 16 rows down) and
// of B (strip 1 b_strip_stride bytes after strip 0), multiplied into the accumulators.
// C += A x B for one accumulator: u8 or s8 A.
template <typename Tiles, bool kSignedA, int kC, int kA, int kB>
DMLSERVE_ALWAYS_INLINE void AmxDot() {
  if constexpr (kSignedA) {
    Tiles::template DotBssd<kC, kA, kB>();
  } else {
    Tiles::template DotBusd<kC, kA, kB>();
  }
}

template <typename Tiles, bool kSignedA, int kRowTiles, int kStrips>
DMLSERVE_ALWAYS_INLINE void AmxStep(const uint8_t* a, size_t a_stride, const int8_t* b,
                                    size_t b_strip_stride) {
  Tiles::template Load<kA0>(a, a_stride);
  Tiles::template Load<kB0>(b, kAmxMaxRowBytes);
  AmxDot<Tiles, kSignedA, kC00, kA0, kB0>();
  if constexpr (kStrips == 2) {
    Tiles::template Load<kB1>(b + b_strip_stride, kAmxMaxRowBytes);
    AmxDot<Tiles, kSignedA, kC01, kA0, kB1>();
  }
  if constexpr (kRowTiles == 2) {
    Tiles::template Load<kA1>(a + kAmxMaxRows * a_stride, a_stride);
    AmxDot<Tiles, kSignedA, kC10, kA1, kB0>();
    if constexpr (kStrips == 2) AmxDot<Tiles, kSignedA, kC11, kA1, kB1>();
  }
}

// Asks the caches for one step's lines: `rows` rows of 64 bytes of A, lda apart, and kStrips
// B tiles of 16 lines each. Hints only: they read nothing and fault on nothing.
template <int kStrips>
DMLSERVE_ALWAYS_INLINE void AmxPrefetchStep(const uint8_t* a, size_t lda, int rows, const int8_t* b,
                                            size_t b_strip_stride) {
  for (int i = 0; i < rows; ++i) DMLSERVE_PREFETCH_READ(a + i * lda);
  for (int s = 0; s < kStrips; ++s) {
    for (size_t line = 0; line < kAmxMaxRows; ++line) {
      DMLSERVE_PREFETCH_READ(b + s * b_strip_stride + line * kAmxMaxRowBytes);
    }
  }
}

template <typename Tiles, bool kSignedA, int kPrefetchSteps, int kRowTiles, int kStrips>
void AmxBlock(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* b,
              size_t b_strip_stride, int32_t* c, size_t ldc, bool accumulate) {
  const size_t c_stride = ldc * sizeof(int32_t);
  int32_t* const c_lower = c + kAmxMaxRows * ldc;
  if (accumulate) {
    Tiles::template Load<kC00>(c, c_stride);
    if constexpr (kStrips == 2) Tiles::template Load<kC01>(c + kQGemmStripColumns, c_stride);
    if constexpr (kRowTiles == 2) {
      Tiles::template Load<kC10>(c_lower, c_stride);
      if constexpr (kStrips == 2) {
        Tiles::template Load<kC11>(c_lower + kQGemmStripColumns, c_stride);
      }
    }
  } else {
    Tiles::template Zero<kC00>();
    if constexpr (kStrips == 2) Tiles::template Zero<kC01>();
    if constexpr (kRowTiles == 2) {
      Tiles::template Zero<kC10>();
      if constexpr (kStrips == 2) Tiles::template Zero<kC11>();
    }
  }
  const size_t steps = quads / kAmxStepQuads;
  for (size_t s = 0; s < steps; ++s) {
    if constexpr (kPrefetchSteps > 0) {
      if (s + kPrefetchSteps < steps) {
        AmxPrefetchStep<kStrips>(a + (s + kPrefetchSteps) * kAmxMaxRowBytes, lda, rows,
                                 b + (s + kPrefetchSteps) * kAmxStepQuads * kQGemmQuadBytes,
                                 b_strip_stride);
      }
    }
    AmxStep<Tiles, kSignedA, kRowTiles, kStrips>(
        a + s * kAmxMaxRowBytes, lda, b + s * kAmxStepQuads * kQGemmQuadBytes, b_strip_stride);
  }
  if (const size_t tail = quads - steps * kAmxStepQuads; tail != 0) {
    alignas(64) uint8_t a_tail[kAmxMr][kAmxMaxRowBytes] = {};
    alignas(64) int8_t b_tail[kAmxMaxStrips][kAmxMaxRows * kAmxMaxRowBytes] = {};
    for (int i = 0; i < rows; ++i) {
      std::memcpy(a_tail[i], a + i * lda + steps * kAmxMaxRowBytes, tail * 4);
    }
    for (int s = 0; s < kStrips; ++s) {
      std::memcpy(b_tail[s], b + s * b_strip_stride + steps * kAmxStepQuads * kQGemmQuadBytes,
                  tail * kQGemmQuadBytes);
    }
    AmxStep<Tiles, kSignedA, kRowTiles, kStrips>(&a_tail[0][0], kAmxMaxRowBytes, b_tail[0],
                                                 sizeof(b_tail[0]));
  }
  Tiles::template Store<kC00>(c, c_stride);
  if constexpr (kStrips == 2) Tiles::template Store<kC01>(c + kQGemmStripColumns, c_stride);
  if constexpr (kRowTiles == 2) {
    Tiles::template Store<kC10>(c_lower, c_stride);
    if constexpr (kStrips == 2) Tiles::template Store<kC11>(c_lower + kQGemmStripColumns, c_stride);
  }
}

// QGemmUkernelFn over Tiles: rows 1..32, strips 1..2; A read as u8 (A'), or as s8 (kSignedA);
// kPrefetchSteps > 0: the candidates that prefetch each step's lines that many steps ahead.
template <typename Tiles, bool kSignedA, int kPrefetchSteps>
void AmxKernel(size_t quads, const uint8_t* a, size_t lda, int rows, const int8_t* b,
               size_t b_strip_stride, int strips, int32_t* c, size_t ldc, bool accumulate) {
  DMLSERVE_DCHECK(1 <= rows && rows <= kAmxMr);
  DMLSERVE_DCHECK(1 <= strips && strips <= kAmxMaxStrips);
  AmxConfigure<Tiles>(rows);
  const bool two_row_tiles = rows > kAmxMaxRows;
  if (two_row_tiles) {
    if (strips == 2) {
      AmxBlock<Tiles, kSignedA, kPrefetchSteps, 2, 2>(quads, a, lda, rows, b, b_strip_stride, c,
                                                      ldc, accumulate);
    } else {
      AmxBlock<Tiles, kSignedA, kPrefetchSteps, 2, 1>(quads, a, lda, rows, b, b_strip_stride, c,
                                                      ldc, accumulate);
    }
  } else if (strips == 2) {
    AmxBlock<Tiles, kSignedA, kPrefetchSteps, 1, 2>(quads, a, lda, rows, b, b_strip_stride, c, ldc,
                                                    accumulate);
  } else {
    AmxBlock<Tiles, kSignedA, kPrefetchSteps, 1, 1>(quads, a, lda, rows, b, b_strip_stride, c, ldc,
                                                    accumulate);
  }
}

// The kernel over Tiles, as a table holds it, with its signed_a variant, which kernel.signed_a
// points to inside the same object: made once, never copied, never destroyed (kernels may run
// while the process exits, as the tables' comment in cpu_kernels.cc says).
template <typename Tiles, int kPrefetchSteps = 0>
struct AmxKernels {
  AmxKernels(const char* name, const char* signed_a_name, CpuIsa isa) {
    kernel = {name, isa, kAmxMr, kAmxMaxStrips, &AmxKernel<Tiles, false, kPrefetchSteps>};
    signed_a = {signed_a_name, isa, kAmxMr, kAmxMaxStrips, &AmxKernel<Tiles, true, kPrefetchSteps>};
    kernel.release = signed_a.release = &AmxRelease<Tiles>;
    kernel.signed_a = &signed_a;
  }
  AmxKernels(const AmxKernels&) = delete;
  AmxKernels& operator=(const AmxKernels&) = delete;

  QGemmUkernel kernel;
  QGemmUkernel signed_a;
};

#ifndef DMLSERVE_KERNELS_CPU_QGEMM_UKERNEL_H_
#define DMLSERVE_KERNELS_CPU_QGEMM_UKERNEL_H_

// The innermost loop of the quantized matrix multiply: an int8 micro-kernel
// that multiplies a few rows of packed A with a few 16-column strips of
// packed B, exactly, into int32. One micro-kernel per ISA level, each in its
// own file (qgemm_ukernel_<isa>.cc); each level's table of CPU kernels
// (CpuKernels::qgemm, cpu_kernels.h) holds its kernel, and the table for the
// CPU at hand is picked once, at run time.
//
// Operands (see packed_b.h for how they are made):
//  - Both are rewritten so the products are u8 x s8, the form vpdpbusd
//    multiplies: A' = A (uint8) or A + 128 (int8), B' = B (int8) or B - 128
//    (uint8). The zero points absorb the shift, so every one of the eight
//    type combinations runs this one kernel (see qgemm_task.cc, RequantizeTile,
//    for the exact int32 corrections).
//  - K is processed in "quads" of 4 consecutive depth values (what one
//    vpdpbusd lane sums), zero-padded to a multiple of 4.
//  - Packed A: rows of A', zero-padded to whole quads: a[i * lda + 4q + r] =
//    A'[i][4q + r]. A UINT8 A whose K is a multiple of 4 is read in place.
//    A "wide A" micro-kernel (AVX2's exact one, which multiplies int16 pairs)
//    reads A' widened to int16 instead: the same layout with 2-byte values
//    (8 bytes per quad, lda still in bytes), always a copy.
//  - Packed B: strips of 16 columns; within a strip, for each quad q, 16
//    columns x 4 depth values (64 bytes, one zmm):
//    strip[q * 64 + j * 4 + r] = B'[4q + r][16s + j]. Columns past N are zeros.

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cpu/cpu_features.h"

namespace dmlserve {

// Bytes of one quad of one 16-column strip of packed B.
inline constexpr size_t kQGemmStripColumns = 16;
inline constexpr size_t kQGemmQuadBytes = 4 * kQGemmStripColumns;

// For i < rows and j < 16 * strips:
//   c[i * ldc + j] (+)= sum over q < quads, r < 4 of
//                       a[i * lda + 4q + r] * b[(j / 16) * b_strip_stride + q * 64 + (j % 16) * 4 +
//                       r]
// with u8 a and s8 b, accumulated in int32 (wrapping: the caller's K limit
// keeps true results in range). With `accumulate` false c is overwritten,
// otherwise added to. `rows` is 1..mr, `strips` is 1..max_strips (each
// kernel checks both on entry with DMLSERVE_DCHECK, kernels/core/check.h);
// nothing else of c is touched. That is for byte A and strip-layout B; a
// wide-A kernel reads A'[i][4q + r] as the int16 at byte
// i * lda + 2 * (4q + r), and a repack_b kernel reads B as repack_b left it
// (see QGemmUkernel).
using QGemmUkernelFn = void (*)(size_t quads, const uint8_t* a, size_t lda, int rows,
                                const int8_t* b, size_t b_strip_stride, int strips, int32_t* c,
                                size_t ldc, bool accumulate);

// The narrow path, for products with one strip (N <= 16), where the strip
// layout needs a broadcast of A per multiply. B is first rearranged into
// "quad groups": for each group of 4 quads, 4 vectors v of 16 int32 lanes,
// lane 4g + t of vector v holding the 4 depth values of quad 4G + t for
// column 4g + v (zeros past `quads`). One 16-byte broadcast of A (4 quads of
// a row) then feeds 4 multiplies, and lane sums over t give the columns.
//
// QGemmNarrowPackFn rearranges `quads` quads of one strip (strip layout,
// kQGemmQuadBytes per quad) into out[QGemmNarrowPanelBytes(quads)].
// QGemmNarrowFn computes what QGemmUkernelFn computes for one strip and
// `rows` (2..mr, checked like QGemmUkernelFn's) rows, from a panel so
// rearranged.
using QGemmNarrowPackFn = void (*)(const int8_t* strip, size_t quads, int8_t* out);
using QGemmNarrowFn = void (*)(size_t quads, const uint8_t* a, size_t lda, int rows,
                               const int8_t* panel, int32_t* c, size_t ldc, bool accumulate);

// Rearranges `quads` quads of one strip (strip layout) into a kernel's own
// layout of B (QGemmUkernel::repack_b), repacked_quad_bytes per quad.
using QGemmStripRepackFn = void (*)(const int8_t* strip, size_t quads, int8_t* out);

// Packs B straight into a kernel's repacked layout (QGemmUkernel::
// pack_repacked_b), skipping the strip layout: `quads` quads (4 * quads rows
// of B from `b`, each `ldb` bytes after the last) of `strips` strips (16 *
// strips columns from `b`), all inside B, each byte XORed with `flip` (B'
// as the strip layout holds it); strip s at out + s * out_strip_stride, quad
// q of it at q * repacked_quad_bytes, written with streaming stores when
// `stream` (then `out` and out_strip_stride are multiples of 32 bytes).
// Adds each column's sum of the written B' values to column_sums[16 s + j].
// `strips` is even. Writes what packing the strips and then repack_b would
// write, and the same sums.
using QGemmPackRepackedFn = void (*)(const uint8_t* b, size_t ldb, uint8_t flip, size_t quads,
                                     size_t strips, int8_t* out, size_t out_strip_stride,
                                     int32_t* column_sums, bool stream);

inline size_t QGemmNarrowPanelBytes(size_t quads) { return (quads + 3) / 4 * 4 * kQGemmQuadBytes; }

// Rows the matrix multiply driver gives a task at most (its row block,
// qgemm_driver.cc): tasks start at multiples of it, and a block
// of mr rows must not straddle two tasks, so every kernel's mr divides it
// (including the kernels a level substitutes: seven_bit_b, one_strip,
// many_rows). Checked (DMLSERVE_DCHECK) when the tables of cpu_kernels.h are
// built.
inline constexpr size_t kQGemmRowBlock = 96;

// How the matrix multiply driver (qgemm_driver.cc) blocks a
// product for one kernel. Zero and false mean the driver's defaults, which
// every table kernel uses today; the tile kernel's candidate blockings (its
// operands are 1 KiB tiles: see qgemm_ukernel_amx-inl.h) set other values,
// in tests and benchmarks, until one measures better.
struct QGemmBlocking {
  // Depth values per call (a multiple of 64): the A rows and the B
  // micro-panel of one call, which this bounds, are what stays in L1.
  size_t depth_block = 0;
  // Rows per task (a multiple of kQGemmRowBlock): how many row blocks share
  // each B micro-panel while it is in L1 or L2.
  size_t task_rows = 0;
  // Columns per task (a multiple of 64) when B was packed whole: how many
  // strip groups share each row block of A while it is in L2. A task reads
  // task_rows x K bytes of A and columns x K of B from beyond L2 for
  // task_rows x columns x K multiply-adds.
  size_t column_block = 0;
  // Row blocks outside, strip groups inside (else the reverse): a call's A
  // block stays in L1 while every strip group of the task passes over it.
  bool row_blocks_outer = false;
  // A is always copied (never used in place), into rows whose stride is a
  // multiple of 64 bytes plus one line, so that a call's rows fall into
  // different L1 sets: rows of 4 KiB multiples all fall into the same ones.
  bool copy_a = false;
  // A B sent with a request and multiplied by at most task_rows rows is
  // packed a panel at a time inside the tasks (as it always is for at most
  // kQGemmRowBlock rows), and such tasks keep all the rows, so each panel is
  // packed exactly once: packing (bound by memory) overlaps the other
  // threads' multiplies (bound by the tiles) instead of preceding them all.
  bool stream_b = false;
  // A B sent with a request and multiplied by more rows than a task's is
  // packed inside tasks of many rows (StreamedBTaskRows, qgemm_driver.h)
  // from this many bytes of B (K x N); 0 is the driver's 8 MiB. The tests
  // lower it, so that the scalar kernels and the tile model run that path on
  // products small enough for the reference.
  uint64_t streamed_b_min_bytes = 0;
};

struct QGemmUkernel {
  // "generic", "avx2" (with "avx2_one_strip", "avx2_wide_b", "avx2_b7"),
  // "avxvnni", "avx512vnni", "amx" ("amx_model" for tests).
  const char* name;
  CpuIsa isa;      // the level it needs (CpuRunsIsa, cpu_features.h)
  int mr;          // rows per call; divides kQGemmRowBlock
  int max_strips;  // 16-column strips per call
  QGemmUkernelFn fn;
  // Both or neither: null where the ISA has no narrow path.
  QGemmNarrowPackFn narrow_pack = nullptr;
  QGemmNarrowFn narrow = nullptr;
  // Reads A' as int16 (see above) rather than uint8.
  bool wide_a = false;
  // A faster kernel that is exact only when every value of B' lies in
  // [-64, 63] (7-bit weights), used instead of this one for such a B; null
  // where the ISA needs none. Not exact on other B: never selected alone.
  const QGemmUkernel* seven_bit_b = nullptr;
  // The kernel for products of one strip (N <= 16), where this one's A
  // layout costs more than it saves (see qgemm_ukernel_avx2.cc); null: this
  // one. Exact on every input.
  const QGemmUkernel* one_strip = nullptr;
  // The kernel for products of many rows, where repacking B per task (below)
  // pays for itself; null: this one. Exact on every input.
  const QGemmUkernel* many_rows = nullptr;
  // Non-null: fn reads B not in the strip layout but as repack_b leaves it,
  // one strip (max_strips is 1) of repacked_quad_bytes per quad, and ignores
  // b_strip_stride and strips. The driver uses PackedB::repacked when PackB
  // made it, else repacks each strip of a depth block once per task.
  QGemmStripRepackFn repack_b = nullptr;
  size_t repacked_quad_bytes = 0;
  // Optional with repack_b: PackB packs whole chunks of a B that only this
  // kernel will read straight into the repacked layout with it, in one pass
  // instead of three (pack, repack, copy out).
  QGemmPackRepackedFn pack_repacked_b = nullptr;
  // A product of fewer than min_rows rows is handed whole to few_rows, a
  // kernel of a lower level (its narrow path and substitutes included), as if
  // that level had been selected: for the tiles, whose 16-row operands a GEMV
  // or a few rows would mostly waste, and which such products, bound by
  // reading B, would not run faster (QGemmLevelKernel). Null: none.
  const QGemmUkernel* few_rows = nullptr;
  uint64_t min_rows = 0;
  // Non-null for a kernel that keeps state in the thread between calls (the
  // AMX tile configuration): the driver calls it on the same thread when a
  // task's calls are done, which releases that state. fn may be called again
  // afterwards (it sets the state up again).
  void (*release)() = nullptr;
  // Non-null: the same kernel reading A as INT8 values as they are (A' = A,
  // signed: the tiles' TDPBSSD), so that PackA uses an INT8 A in place rather
  // than copying it shifted (PackedA::raw_signed). Same mr, max_strips and
  // release.
  const QGemmUkernel* signed_a = nullptr;
  QGemmBlocking blocking = {};
};

// Bytes of one quad of one row of packed A for `kernel` (4, or 8 when wide).
inline size_t QGemmAQuadBytes(const QGemmUkernel& kernel) { return kernel.wide_a ? 8 : 4; }

// Calls body(std::integral_constant<int, r>()) with r = rows, for rows in
// 1..kMaxRows (more counts as kMaxRows): micro-kernels are templates on their
// row count, so that their accumulator arrays are indexed by constants and
// live in registers.
template <int kMaxRows, typename Body>
inline void ForRowCount(int rows, Body&& body) {
  if constexpr (kMaxRows > 1) {
    if (rows < kMaxRows) return ForRowCount<kMaxRows - 1>(rows, body);
  }
  body(std::integral_constant<int, kMaxRows>());
}

// The micro-kernel of each ISA level, in its own file, or nullptr where the
// compiler's target has no such ISA (not x86-64). They do not look at the
// CPU: a kernel may run only where CpuRunsIsa(kernel->isa) (cpu_features.h),
// and the tables of cpu_kernels.h, which the driver takes its kernels from,
// hold only such kernels. Tests and benchmarks that call one directly check
// first.
const QGemmUkernel* GenericQGemmUkernel();
const QGemmUkernel* Avx2QGemmUkernel();
// Avx2QGemmUkernel()->seven_bit_b and ->many_rows (for tests and
// benchmarks).
const QGemmUkernel* Avx2SevenBitQGemmUkernel();
const QGemmUkernel* Avx2WideBQGemmUkernel();
const QGemmUkernel* AvxVnniQGemmUkernel();
const QGemmUkernel* Avx512VnniQGemmUkernel();
// Intel AMX tiles (qgemm_ukernel_amx-inl.h), and the same kernel on a scalar
// model of the tile instructions (amx_tiles.h), which runs on any CPU: for
// tests, never in a level's table. The model kernel's few_rows is null (the
// test table, AmxModelCpuKernels in cpu_kernels.h, sets one).
const QGemmUkernel* AmxQGemmUkernel();
const QGemmUkernel* AmxModelQGemmUkernel();
// A candidate for the amx level, in no table until an AMX machine measures it
// against AmxQGemmUkernel (bench: BM_AmxCandidate and BM_CpuQGemmUkernel;
// docs/benchmarks.md, "AMX on a lent Xeon"): the same kernel, prefetching each
// step's A and B lines kAmxPrefetchSteps steps ahead. Same results (prefetches
// are hints); null where AmxQGemmUkernel is. And the same on the model, for the
// exactness suites.
const QGemmUkernel* AmxPrefetchQGemmUkernel();
const QGemmUkernel* AmxModelPrefetchQGemmUkernel();
// The same asking kAmxFarPrefetchSteps (8) steps ahead, far enough for lines
// from L3 (qgemm_ukernel_amx-inl.h): in no table either; null where
// AmxQGemmUkernel is.
const QGemmUkernel* AmxFarPrefetchQGemmUkernel();

// A copy of `kernel` named `name` (and of its signed_a variant, named
// `name` + "_signed_a") with the driver's blocking replaced by `blocking`:
// the candidates the benchmarks compare and the exactness suites check
// (same results: blocking only reorders exact integer sums). Made anew by
// each call, never destroyed.
const QGemmUkernel* QGemmUkernelWithBlocking(const QGemmUkernel& kernel,
                                             const QGemmBlocking& blocking,
                                             const std::string& name);

// Rows from which a kernel's many_rows kernel (which reads B repacked) runs
// when B is repacked for the product (a B per request, packed by PackB for
// that many rows, or B streamed and repacked per task). From fewer rows the
// repacking, twice B's bytes written, costs more than it saves (AVX2, 16 x
// 4096 x 4096 with B per request: 193 against 212 GOP/s).
inline constexpr uint64_t kQGemmManyRows = 24;
// The same when B was already repacked, once, for any product (a registered
// B: PackB with kPackBAnyRows): then only the extra bytes read count, and the
// many_rows kernel runs from fewer rows (AVX2, registered 12 / 16 / 20 x 4096
// x 4096: 328 / 332 / 328 against 323 / 321 / 319 GOP/s on the half-strip
// kernel).
inline constexpr uint64_t kQGemmManyRowsRepackedB = 12;

// From this many rows a product runs on the AMX tiles; below, on the
// AVX-512 VNNI kernel (QGemmUkernel::few_rows). Below 8 rows a product
// against a 4096 x 4096 B reads 16 MiB of B for at most 128 Mi
// multiply-adds: VNNI's limit (0.35-0.7 T multiply-adds/s on 2 cores of an
// Emerald Rapids) keeps up with the bytes, so the tiles, which would multiply
// 16-row tiles mostly of padding, cannot gain. Measured on a Sapphire-class
// Xeon (BM_U8S8RowSweep, 2 threads, x 4096 x 4096 registered): 4 rows 340
// GOP/s on the tiles against 363 on VNNI, 8 rows 634 against 531
// (docs/benchmarks.md, "AMX on a lent Xeon").
inline constexpr uint64_t kQGemmAmxMinRows = 8;

// The kernel that runs a product of `rows` rows (kPackBAnyRows: any) at the
// level whose kernel is `level`: its few_rows kernel below its min_rows,
// else itself. The product then proceeds as if that kernel's level had been
// selected (ChooseQGemmUkernel, below, picks among its substitutes).
const QGemmUkernel& QGemmLevelKernel(const QGemmUkernel& level, uint64_t rows);

// The micro-kernel for one product of `rows` rows and `n` columns, from the
// selected ISA level's: its seven_bit_b kernel when B was packed whole and
// its values fit 7 bits (PackedB::seven_bit; a streamed B is not scanned
// ahead: it is multiplied by few rows, where B's bytes, not the multiplies,
// bound the time, or by a level that has no seven_bit_b kernel, see
// StreamedBTaskRows), else its one_strip kernel for N <= 16, else its many_rows
// kernel for many rows (kQGemmManyRows, or kQGemmManyRowsRepackedB when
// `b_repacked`: B's repacked copy already exists), else itself.
const QGemmUkernel& ChooseQGemmUkernel(const QGemmUkernel& selected, bool b_fits_seven_bits,
                                       size_t n, uint64_t rows, bool b_repacked);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_QGEMM_UKERNEL_H_

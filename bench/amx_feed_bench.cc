// What feeding the AMX tiles costs, from each level of the memory hierarchy:
// the tile micro-kernel's step (qgemm_ukernel_amx-inl.h: load A0, B0, C00 +=
// A0 B0, load B1, C01 += A0 B1, load A1, C10 += A1 B0, C11 += A1 B1) repeated
// over operands whose footprints put A and B in L1, L2 or L3 independently,
// with and without the multiplies, with `tileloaddt1` (a load hinting that
// the data will not be reused) for either operand, and asking for each
// step's lines 2 or 8 steps ahead (the prefetching kernels' hint). Read against
// BM_CpuMachineLimit_TdpbusdPeak (1 thread): where the kernel's rate falls
// below the limit, these say which operand's loads, from which level, hold
// it (docs/benchmarks.md, "The tile path's blockings"). One thread, the
// calling one; skipped without the tiles.
//
// A step's operands are laid out as the kernel reads them: A is 32 rows
// `lda` bytes apart, each step reading the next 64 bytes of every row
// (wrapping after a_row_bytes); B is 2 strips of b_strip_bytes, each step
// reading the next 1 KiB (one tile) of each. GOP/s counts the step's 4
// tdpbusd (64 Ki multiply-adds) even when they are left out, so that the
// loads-only rate reads as the rate the loads alone would allow.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/isa_portability.h"

namespace dmlserve::bench {
namespace {

#if DMLSERVE_X86 && defined(__GNUC__)

// Tile numbers as in the kernel: C 0-3, A 4-5, B 6-7.
template <int kTile, bool kT1>
DMLSERVE_ALWAYS_INLINE void LoadTile(const void* base, size_t stride) {
  if constexpr (kT1) {
    __asm__ volatile("tileloaddt1 (%0,%1,1), %%tmm%c2"
                     :
                     : "r"(base), "r"(static_cast<uint64_t>(stride)), "i"(kTile)
                     : "memory");
  } else {
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2"
                     :
                     : "r"(base), "r"(static_cast<uint64_t>(stride)), "i"(kTile)
                     : "memory");
  }
}

template <int kC, int kA, int kB, bool kMultiply>
DMLSERVE_ALWAYS_INLINE void Dot() {
  if constexpr (kMultiply) {
    __asm__ volatile("tdpbusd %%tmm%c2, %%tmm%c1, %%tmm%c0" : : "i"(kC), "i"(kA), "i"(kB));
  }
}

struct FeedShape {
  size_t a_row_bytes;    // per row, a power of two >= 64
  size_t lda;            // >= a_row_bytes
  size_t b_strip_bytes;  // per strip, a power of two >= 1024
  // A packed tile by tile instead: each step's two A tiles are 2 KiB in a
  // row (16 rows x 64 bytes each, stride 64), as B's are; lda is ignored and
  // the 32 x a_row_bytes bytes are read in order.
  bool a_tiles = false;
};

template <bool kMultiply, bool kAT1, bool kBT1, int kPrefetchSteps = 0>
__attribute__((noinline)) void FeedSteps(const uint8_t* a, const int8_t* b, const FeedShape& shape,
                                         int64_t steps) {
  constexpr size_t kTileBytes = kAmxMaxRows * kAmxMaxRowBytes;
  const size_t a_mask = (shape.a_tiles ? 2 * kAmxMaxRows : 1) * shape.a_row_bytes - 1;
  const size_t a_step = shape.a_tiles ? 2 * kTileBytes : kAmxMaxRowBytes;
  const size_t b_mask = shape.b_strip_bytes - 1;
  const size_t lda = shape.a_tiles ? kAmxMaxRowBytes : shape.lda;
  const uint8_t* a_lower = a + (shape.a_tiles ? kTileBytes : kAmxMaxRows * lda);
  const int8_t* b1 = b + shape.b_strip_bytes;
  for (int64_t s = 0; s < steps; ++s) {
    const size_t a_offset = (static_cast<size_t>(s) * a_step) & a_mask;
    const size_t b_offset = (static_cast<size_t>(s) * kAmxMaxRows * kAmxMaxRowBytes) & b_mask;
    if constexpr (kPrefetchSteps > 0) {
      // The lines of the step kPrefetchSteps ahead, as the prefetching
      // kernels ask for them (qgemm_ukernel_amx-inl.h).
      const size_t ahead = static_cast<size_t>(s + kPrefetchSteps);
      const size_t a_ahead = (ahead * a_step) & a_mask;
      const size_t b_ahead = (ahead * kTileBytes) & b_mask;
      for (int r = 0; r < kAmxMaxRows; ++r) {
        DMLSERVE_PREFETCH_READ(a + a_ahead + r * lda);
        DMLSERVE_PREFETCH_READ(a_lower + a_ahead + r * lda);
        DMLSERVE_PREFETCH_READ(b + b_ahead + r * kAmxMaxRowBytes);
        DMLSERVE_PREFETCH_READ(b1 + b_ahead + r * kAmxMaxRowBytes);
      }
    }
    LoadTile<4, kAT1>(a + a_offset, lda);
    LoadTile<6, kBT1>(b + b_offset, kAmxMaxRowBytes);
    Dot<0, 4, 6, kMultiply>();
    LoadTile<7, kBT1>(b1 + b_offset, kAmxMaxRowBytes);
    Dot<1, 4, 7, kMultiply>();
    LoadTile<5, kAT1>(a_lower + a_offset, lda);
    Dot<2, 5, 6, kMultiply>();
    Dot<3, 5, 7, kMultiply>();
  }
}

constexpr int64_t kSteps = int64_t{1} << 16;

// What a step does besides its 4 tile loads.
enum class Feed {
  kMultiply,           // the kernel's step
  kLoadsOnly,          // the loads alone
  kMultiplyAT1,        // the kernel's step, A loaded with tileloaddt1
  kMultiplyBT1,        // the kernel's step, B loaded with tileloaddt1
  kMultiplyPrefetch2,  // the kernel's step, asking for the lines 2 steps ahead
  kMultiplyPrefetch8,  // ... 8 steps ahead
};

using FeedFn = void (*)(const uint8_t*, const int8_t*, const FeedShape&, int64_t);

FeedFn FeedFor(Feed feed) {
  switch (feed) {
    case Feed::kMultiply:
      return &FeedSteps<true, false, false>;
    case Feed::kLoadsOnly:
      return &FeedSteps<false, false, false>;
    case Feed::kMultiplyAT1:
      return &FeedSteps<true, true, false>;
    case Feed::kMultiplyBT1:
      return &FeedSteps<true, false, true>;
    case Feed::kMultiplyPrefetch2:
      return &FeedSteps<true, false, false, 2>;
    case Feed::kMultiplyPrefetch8:
      return &FeedSteps<true, false, false, 8>;
  }
  return nullptr;
}

void BM_AmxFeed(benchmark::State& state, FeedShape shape, Feed feed) {
  if (!CpuRunsIsa(CpuIsa::kAmx)) {
    state.SkipWithError("no AMX tiles on this CPU (or the OS refused them)");
    return;
  }
  const FeedFn steps_fn = FeedFor(feed);
  // Values do not change the unit's rate; zeros keep every sum in range.
  std::vector<uint8_t> a(2 * kAmxMaxRows * (shape.a_tiles ? shape.a_row_bytes : shape.lda) + 64, 0);
  std::vector<int8_t> b(2 * shape.b_strip_bytes + 64, 0);
  const uint8_t* a_aligned = reinterpret_cast<const uint8_t*>(
      (reinterpret_cast<uintptr_t>(a.data()) + 63) & ~uintptr_t{63});
  const int8_t* b_aligned = reinterpret_cast<const int8_t*>(
      (reinterpret_cast<uintptr_t>(b.data()) + 63) & ~uintptr_t{63});
  const TileConfig config = FullTileConfig();
  __asm__ volatile("ldtilecfg %0" : : "m"(config) : "memory");
  __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::);
  steps_fn(a_aligned, b_aligned, shape, kSteps);  // warms the caches
  for (auto _ : state) steps_fn(a_aligned, b_aligned, shape, kSteps);
  __asm__ volatile("tilerelease" ::: "memory");
  const double steps = static_cast<double>(kSteps) * static_cast<double>(state.iterations());
  state.counters["GOP/s"] =
      benchmark::Counter(steps * 2.0 * 4 * kAmxMaxRows * kAmxMaxRows * kAmxMaxRowBytes * 1e-9,
                         benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(steps * 4 * kAmxMaxRows * kAmxMaxRowBytes * 1e-9,
                                              benchmark::Counter::kIsRate);
}

// Footprints: A 32 rows x a_row_bytes, B 2 strips x b_strip_bytes. L1 is
// 48 KiB and L2 2 MiB on the Xeons measured; A's rows one line past a
// multiple of 4 KiB unless the name says lda4096.
constexpr size_t kLine = 64;
const FeedShape kBothL1 = {256, 256, 4096};                         // 8 KiB + 8 KiB
const FeedShape kAL1BL2 = {256, 256, 65536};                        // 8 KiB + 128 KiB
const FeedShape kAL2BL1 = {4096, 4096 + kLine, 4096};               // 130 KiB + 8 KiB
const FeedShape kBothL2 = {4096, 4096 + kLine, 65536};              // 130 KiB + 128 KiB
const FeedShape kBothL2Lda4096 = {4096, 4096, 65536};               // the same, rows 4 KiB apart
const FeedShape kBothL3 = {65536, 65536 + kLine, size_t{1} << 20};  // 2 MiB + 2 MiB
const FeedShape kATilesL2BL2 = {4096, 0, 65536, true};              // 128 KiB + 128 KiB
const FeedShape kATilesL2BL1 = {4096, 0, 4096, true};               // 128 KiB + 8 KiB

#define DMLSERVE_AMX_FEED(name, shape, feed) \
  BENCHMARK_CAPTURE(BM_AmxFeed, name, shape, feed)->UseRealTime()->Unit(benchmark::kMicrosecond)

DMLSERVE_AMX_FEED(both_l1, kBothL1, Feed::kMultiply);
DMLSERVE_AMX_FEED(a_l1_b_l2, kAL1BL2, Feed::kMultiply);
DMLSERVE_AMX_FEED(a_l2_b_l1, kAL2BL1, Feed::kMultiply);
DMLSERVE_AMX_FEED(both_l2, kBothL2, Feed::kMultiply);
DMLSERVE_AMX_FEED(both_l2_lda4096, kBothL2Lda4096, Feed::kMultiply);
DMLSERVE_AMX_FEED(both_l3, kBothL3, Feed::kMultiply);
DMLSERVE_AMX_FEED(both_l3_prefetch2, kBothL3, Feed::kMultiplyPrefetch2);
DMLSERVE_AMX_FEED(both_l3_prefetch8, kBothL3, Feed::kMultiplyPrefetch8);
DMLSERVE_AMX_FEED(both_l2_prefetch2, kBothL2, Feed::kMultiplyPrefetch2);
DMLSERVE_AMX_FEED(both_l2_prefetch8, kBothL2, Feed::kMultiplyPrefetch8);
DMLSERVE_AMX_FEED(a_tiles_l2_b_l2, kATilesL2BL2, Feed::kMultiply);
DMLSERVE_AMX_FEED(a_tiles_l2_b_l1, kATilesL2BL1, Feed::kMultiply);
DMLSERVE_AMX_FEED(both_l2_a_t1, kBothL2, Feed::kMultiplyAT1);
DMLSERVE_AMX_FEED(both_l2_b_t1, kBothL2, Feed::kMultiplyBT1);
DMLSERVE_AMX_FEED(loads_only_both_l1, kBothL1, Feed::kLoadsOnly);
DMLSERVE_AMX_FEED(loads_only_a_l1_b_l2, kAL1BL2, Feed::kLoadsOnly);
DMLSERVE_AMX_FEED(loads_only_a_l2_b_l1, kAL2BL1, Feed::kLoadsOnly);
DMLSERVE_AMX_FEED(loads_only_both_l2, kBothL2, Feed::kLoadsOnly);
DMLSERVE_AMX_FEED(loads_only_both_l3, kBothL3, Feed::kLoadsOnly);
DMLSERVE_AMX_FEED(loads_only_a_tiles_l2_b_l2, kATilesL2BL2, Feed::kLoadsOnly);

#endif  // DMLSERVE_X86 && defined(__GNUC__)

}  // namespace
}  // namespace dmlserve::bench

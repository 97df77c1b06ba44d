#ifndef DMLSERVE_KERNELS_CPU_SCAN_SIMD_H_
#define DMLSERVE_KERNELS_CPU_SCAN_SIMD_H_

// Internal to the scan kernels: the per-ISA inner loops behind ComputeScan.
//
// Each instruction-set path (generic C++, AVX2, AVX-512) provides one table of
// four loops per element kind and exclusivity, which each ISA level's
// CpuKernels::scan points to (cpu_kernels.h). ComputeScan (scan_kernels.cc)
// plans the work (which loop, which ranges, which thread, carries between
// pieces) and is the same for every path; the loops only differ in vector
// width. Pointers are type-erased: `in`/`out` point to elements of the kind's
// storage type, `carry`/`acc`/`total` to values of its accumulator type.
//
//   line:        scans `n` contiguous elements starting at in/out, in
//                increasing addresses or, when `reverse`, decreasing ones,
//                starting from *carry and leaving the running value there.
//   rows:        scans `rows` rows of `lanes` contiguous elements (row r at
//                in + r * stride, stride negative for DECREASING) lane by
//                lane, starting from acc[0..lanes) and leaving the running
//                values there.
//   reduce_line: combines n contiguous elements into *total.
//   reduce_rows: combines rows into acc[0..lanes) like rows, writing nothing.
//   stream:      scans `n` contiguous elements as `stride` interleaved lines
//                (1 <= stride <= lanes; element i follows i - stride), in
//                increasing addresses or, when `reverse`, decreasing ones;
//                with `segment` (a multiple of stride dividing n; 0 for
//                none) the lines restart every `segment` elements in scan
//                order. `n` is a multiple of stride; acc[i % stride] holds
//                the running value of the line of element i, in and out.
//                Narrow rows (inner <= lanes) are stride = inner; short
//                contiguous lines are stride 1, segment = their length.
//                With out == nullptr it only combines into acc (a reduction).
//   fence:       orders the non-temporal stores issued so far by this thread
//                before its later stores (a thread calls it once when done,
//                before it signals completion; once per line would drain
//                the write-combining buffers every line).
// With `nt`, outputs are written with non-temporal stores (for outputs too
// big to stay in cache).
//
// Float loops may reassociate (in-register prefix trees, partial sums), as
// the spec allows; integer loops wrap and are exact in any order. FLOAT16
// accumulates in float32 and rounds each written value to nearest even.

#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa_portability.h"

namespace dmlserve::scan_internal {

struct Add {
  template <typename T>
  static T Apply(T x, T y) {
    return x + y;
  }
  template <typename T>
  static T Identity() {
    return T(0);
  }
};

struct Multiply {
  template <typename T>
  static T Apply(T x, T y) {
    return x * y;
  }
  template <typename T>
  static T Identity() {
    return T(1);
  }
};

// Element kinds: storage type, accumulator type and operator. Signed and
// unsigned integer sums of one width share a kind: wrapping addition is the
// same on the bits.
enum ScanKind : int {
  kF32Sum,      // float, float
  kF16Sum,      // uint16_t (binary16), float
  kB32Sum,      // int32_t/uint32_t, uint32_t
  kB64Sum,      // int64_t/uint64_t, uint64_t
  kF32Product,  // float, float
  kF16Product,  // uint16_t (binary16), float
  kU32Product,  // uint32_t, uint32_t
  kU16Product,  // uint16_t, uint32_t (the low 16 bits of a product depend
                // only on the low 16 bits of its factors)
  kScanKindCount,
};

struct ScanFns {
  void (*line)(const void* in, void* out, int64_t n, bool reverse, void* carry, bool nt);
  void (*rows)(const void* in, void* out, ptrdiff_t stride, int64_t rows, int64_t lanes, void* acc,
               bool nt);
  void (*reduce_line)(const void* in, int64_t n, void* total);
  void (*reduce_rows)(const void* in, ptrdiff_t stride, int64_t rows, int64_t lanes, void* acc);
  void (*stream)(const void* in, void* out, int64_t n, int64_t stride, int64_t segment,
                 bool reverse, void* acc, bool nt);
  void (*fence)();
  int lanes;  // accumulator lanes per vector
};

// [kind][exclusive]
using ScanTable = std::array<std::array<ScanFns, 2>, kScanKindCount>;

const ScanTable& GenericScanTable();
#if DMLSERVE_X86
// Only on CPUs with the ISA: each is built by code compiled for it.
const ScanTable& Avx2ScanTable();
const ScanTable& Avx512ScanTable();
#endif

}  // namespace dmlserve::scan_internal

#endif  // DMLSERVE_KERNELS_CPU_SCAN_SIMD_H_

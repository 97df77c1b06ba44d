#ifndef DMLSERVE_KERNELS_CPU_PACKED_A_H_
#define DMLSERVE_KERNELS_CPU_PACKED_A_H_

// The A operand of a quantized matrix multiply as the micro-kernels read it
// (see qgemm_ukernel.h): rows of A' = A (UINT8) or A + 128 (INT8), each
// zero-padded to whole quads, and each row's sum, which the int32
// corrections need.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve {

// One row of A as it arrived: K elements.
struct ARowSource {
  const uint8_t* data;
  bool is_signed;  // INT8 (else UINT8)
};

struct PackedA {
  size_t k = 0;
  size_t stride = 0;              // bytes between rows: K rounded up to a quad
  const uint8_t* data = nullptr;  // row i at data + i * stride
  std::vector<int32_t> row_sums;  // sum over k of A'[i][k]
  AlignedBytes storage;           // what `data` points into, unless in place

  const uint8_t* row(size_t i) const { return data + i * stride; }
};

// Packs `rows` (K elements each). When they are UINT8, K is a multiple of 4
// and they lie one after another in memory (one request's A slice), `data`
// points at them in place and only the sums are computed; otherwise they are
// copied (and shifted) into `storage`. Runs on the ParallelFor pool. `isa`
// picks the implementation (AVX-512 at kAvx512Vnni, else portable); the
// result is the same.
void PackA(absl::Span<const ARowSource> rows, size_t k, CpuIsa isa, PackedA& packed);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_PACKED_A_H_

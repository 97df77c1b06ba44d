#ifndef DMLSERVE_KERNELS_CPU_QUANTIZED_MATMUL_KERNELS_H_
#define DMLSERVE_KERNELS_CPU_QUANTIZED_MATMUL_KERNELS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/backend/device.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_b.h"

namespace dmlserve {

// Computes validated quantized matrix multiplies; outputs[i] is allocated with
// ops[i]->output_data_type and output_sizes.
//
// Operations whose B is 2-D (b_batch == b_channel == 1) and identical (same
// bytes, scales and zero points) run as one product with all their A rows
// stacked, so B is packed once and streamed once for the whole batch; the
// others run one by one. Either way the result is exactly that of computing
// each operation alone.
//
// Every A/B type combination runs as one u8 x s8 product (see
// qgemm_ukernel.h): INT8 A is shifted by +128 and UINT8 B by -128, and the
// zero points, row sums of A and column sums of B turn the result back into
// sum (A - za)(B - zb), exactly in (wrapping) int32 arithmetic; K is bounded
// by MakeQuantizedMatMulOperation so the true sum fits. Requantization
// computes acc * (a_scale * b_scale / output_scale) in float64, rounds half to
// even, adds the zero point and saturates: the same bytes as the reference.
//
// With a `cache`, registered B tensors are packed once and reused; other B
// tensors are packed per call (panel by panel inside each task when few rows
// use them, so no packed copy of the whole B is ever held). `kernels` picks
// the ISA level whose micro-kernel, packers and epilogue run (tests), one of
// AvailableCpuKernels() (cpu_kernels.h); null means SelectedCpuKernels().
// ChooseQGemmUkernel may still substitute one of the level's kernels for a
// product (a 7-bit, one-strip or many-rows kernel).
//
// Rows are made and packed a chunk at a time, so memory beyond the operands,
// the outputs and a packed B stays bounded (a few MiB) whatever M is. Between
// chunks and between slices of a batched B, the work of an operation whose
// `stops[i]` (optional: empty, or one per operation, entries may be null)
// turned non-OK is abandoned when nothing else shares it; the returned
// status of such an operation is that of its stop check (its output is then
// incomplete), every other status is OK.
std::vector<absl::Status> ComputeQuantizedMatMuls(
    absl::Span<const QuantizedMatMulOperation* const> ops, absl::Span<Tensor* const> outputs,
    PackedBCache* cache = nullptr, const CpuKernels* kernels = nullptr,
    absl::Span<const WorkStopCheck* const> stops = {});

inline void ComputeQuantizedMatMul(const QuantizedMatMulOperation& op, Tensor& output) {
  const QuantizedMatMulOperation* ops[] = {&op};
  Tensor* outputs[] = {&output};
  ComputeQuantizedMatMuls(ops, outputs);
}

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_QUANTIZED_MATMUL_KERNELS_H_

#ifndef DMLSERVE_KERNELS_CPU_QGEMM_DRIVER_H_
#define DMLSERVE_KERNELS_CPU_QGEMM_DRIVER_H_

// The int8 GEMM driver: one product (every row of `rows` times one B slice)
// planned and run. It decides how B is held (packed whole, from the cache
// when registered, or packed a panel at a time inside each task), which of
// the level's micro-kernels runs (qgemm_ukernel.h), the depth and column
// blocks, and how the rows are cut into panels of packed A and tasks
// (qgemm_task.h) for the thread pool. The blocking is explained where its
// constants are defined (qgemm_driver.cc).

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "kernels/core/operation.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_rows.h"
#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve {

// out = requantize((A - za) x (B - zb)) for every row of `list`, with B slice
// `slice` of `op` (packed whole, from `cache` when it is registered). Rows
// are made a chunk at a time; before each chunk `stop` may abandon the rest
// (its non-OK status is returned).
absl::Status RunQGemm(const CpuKernels& cpu, const QuantizedMatMulOperation& op, uint64_t slice,
                      PackedBCache* cache, const QGemmRowList& list,
                      absl::FunctionRef<absl::Status()> stop);

// How RunQGemm holds a B sent with the request for a product of `rows` x k x
// n whose level kernel (QGemmLevelKernel) is `level_kernel`: the rows per
// task when B is packed a panel at a time inside tasks that keep their rows
// (a large B and more rows than one task's, see qgemm_driver.cc); 0 when it
// packs B whole, or streams it for few rows. A multiple of level_kernel.mr.
size_t StreamedBTaskRows(const QGemmUkernel& level_kernel, uint64_t rows, size_t k, size_t n);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_QGEMM_DRIVER_H_

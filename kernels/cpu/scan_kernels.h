#ifndef DMLSERVE_KERNELS_CPU_SCAN_KERNELS_H_
#define DMLSERVE_KERNELS_CPU_SCAN_KERNELS_H_

#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve {

// Computes a validated cumulative summation or product into `output`, which
// has the input's data type and sizes and does not overlap the input. Large
// tensors are split across the ParallelFor pool.
void ComputeScan(const ScanOperation& op, Tensor& output);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_SCAN_KERNELS_H_

#ifndef DMLSERVE_KERNELS_CPU_SCAN_KERNELS_H_
#define DMLSERVE_KERNELS_CPU_SCAN_KERNELS_H_

#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve {

// Computes a validated cumulative summation or product into `output`, which
// has the input's data type and sizes and either does not overlap the input
// or is the input itself (in place: every path reads an element before it
// writes that element's result and never reads an input element after it
// was overwritten; the tests run every path both ways). Large tensors are
// split across the ParallelFor pool.
void ComputeScan(const ScanOperation& op, Tensor& output);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_SCAN_KERNELS_H_

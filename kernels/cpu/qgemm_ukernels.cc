// Which micro-kernel runs: the fastest the selected ISA level allows.

#include <vector>

#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve {

std::vector<const QGemmUkernel*> AvailableQGemmUkernels() {
  std::vector<const QGemmUkernel*> kernels;
  for (const QGemmUkernel* kernel : {GenericQGemmUkernel(), Avx2QGemmUkernel(),
                                     AvxVnniQGemmUkernel(), Avx512VnniQGemmUkernel()}) {
    if (kernel != nullptr) kernels.push_back(kernel);
  }
  return kernels;
}

const QGemmUkernel& SelectedQGemmUkernel() {
  const CpuIsa level = SelectedCpuIsa();
  const QGemmUkernel* best = GenericQGemmUkernel();
  for (const QGemmUkernel* kernel : AvailableQGemmUkernels()) {
    if (kernel->isa <= level) best = kernel;
  }
  return *best;
}

}  // namespace dmlserve

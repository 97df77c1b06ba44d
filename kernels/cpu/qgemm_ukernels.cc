// Which micro-kernel runs: the fastest the CPU supports, capped by
// DMLSERVE_CPU_ISA.

#include <cstdlib>
#include <cstring>
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
  static const QGemmUkernel* const selected = [] {
    const char* cap = std::getenv("DMLSERVE_CPU_ISA");
    const QGemmUkernel* best = nullptr;
    for (const QGemmUkernel* kernel : AvailableQGemmUkernels()) {
      best = kernel;
      if (cap != nullptr && std::strcmp(cap, kernel->name) == 0) break;
    }
    return best;
  }();
  return *selected;
}

}  // namespace dmlserve

// Which micro-kernel runs: the fastest the selected ISA level allows.

#include <vector>

#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve {

namespace {

// Found once: the CPU does not change, and every matrix multiply asks.
const std::vector<const QGemmUkernel*>& Kernels() {
  static const auto* kernels = [] {
    auto* found = new std::vector<const QGemmUkernel*>;
    for (const QGemmUkernel* kernel : {GenericQGemmUkernel(), Avx2QGemmUkernel(),
                                       AvxVnniQGemmUkernel(), Avx512VnniQGemmUkernel()}) {
      if (kernel != nullptr) found->push_back(kernel);
    }
    return found;
  }();
  return *kernels;
}

}  // namespace

std::vector<const QGemmUkernel*> AvailableQGemmUkernels() { return Kernels(); }

const QGemmUkernel& ChooseQGemmUkernel(const QGemmUkernel& selected, bool b_fits_seven_bits,
                                       size_t n, uint64_t rows) {
  if (b_fits_seven_bits && selected.seven_bit_b != nullptr) return *selected.seven_bit_b;
  if (n <= kQGemmStripColumns && selected.one_strip != nullptr) return *selected.one_strip;
  if (rows >= kQGemmManyRows && selected.many_rows != nullptr) return *selected.many_rows;
  return selected;
}

const QGemmUkernel& SelectedQGemmUkernel() {
  // The level may change (DMLSERVE_CPU_ISA, tests), the kernels do not.
  const CpuIsa level = SelectedCpuIsa();
  const QGemmUkernel* best = GenericQGemmUkernel();
  for (const QGemmUkernel* kernel : Kernels()) {
    if (kernel->isa <= level) best = kernel;
  }
  return *best;
}

}  // namespace dmlserve

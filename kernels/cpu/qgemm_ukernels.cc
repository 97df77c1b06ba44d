// How a level's micro-kernel hands a product to one of the kernels it
// substitutes (which level runs is the business of cpu_kernels.h).

#include <cstring>
#include <string>

#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve {

const QGemmUkernel& QGemmLevelKernel(const QGemmUkernel& level, uint64_t rows) {
  if (level.few_rows != nullptr && rows < level.min_rows) return *level.few_rows;
  return level;
}

const QGemmUkernel& ChooseQGemmUkernel(const QGemmUkernel& selected, bool b_fits_seven_bits,
                                       size_t n, uint64_t rows, bool b_repacked) {
  if (b_fits_seven_bits && selected.seven_bit_b != nullptr) return *selected.seven_bit_b;
  if (n <= kQGemmStripColumns && selected.one_strip != nullptr) return *selected.one_strip;
  const uint64_t many_rows = b_repacked ? kQGemmManyRowsRepackedB : kQGemmManyRows;
  if (rows >= many_rows && selected.many_rows != nullptr) return *selected.many_rows;
  return selected;
}

namespace {

// A copy of `name` that lives as long as the process (the kernel's name
// points to its first byte).
const char* LastingName(const std::string& name) {
  char* copy = new char[name.size() + 1];
  std::memcpy(copy, name.c_str(), name.size() + 1);
  return copy;
}

}  // namespace

const QGemmUkernel* QGemmUkernelWithBlocking(const QGemmUkernel& kernel,
                                             const QGemmBlocking& blocking,
                                             const std::string& name) {
  auto* copy = new QGemmUkernel(kernel);
  copy->blocking = blocking;
  copy->name = LastingName(name);
  if (kernel.signed_a != nullptr) {
    auto* signed_a = new QGemmUkernel(*kernel.signed_a);
    signed_a->blocking = blocking;
    signed_a->name = LastingName(name + "_signed_a");
    copy->signed_a = signed_a;
  }
  return copy;
}

}  // namespace dmlserve

#include <cstdint>
#include <vector>

#include "kernels/d3d12/shaders/kernel_assembler.h"
#include "kernels/d3d12/shaders/quantized_matmul_epilogue.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

// qmm.reduce (quantized_matmul_kernels.h): split-K's second pass.

namespace dmlserve::d3d12 {
namespace {

using dxbc::Operand;

Operand C(int i) { return KernelAssembler::Constant(i); }

// qmm.reduce: thread t of the dispatch handles output word t (row t / N4,
// word t % N4): the sum of the splits' partials, requantized.
void BuildReduce(KernelAssembler& a, const QuantizedMatMulReduceSpec& spec) {
  using A = KernelAssembler;
  a.DeclareBindings(/*srvs=*/4, /*uavs=*/1);
  a.dcl_input(A::vThreadGroupID().xy());
  a.dcl_input(A::vThreadIDInGroupFlattened());
  a.dcl_thread_group(QuantizedMatMulReduceSpec::kThreads, 1, 1);
  const Operand group = a.Scalar(), index = a.Scalar(), words = a.Scalar();
  a.LinearGroupIndex(group);
  a.imad(index, group, A::l(QuantizedMatMulReduceSpec::kThreads),
         A::vThreadIDInGroupFlattened().x());
  a.imul(words, C(kQmmConstRows), C(kQmmConstOutputWords));
  a.IfUnsignedLess(index, words);
  const Operand row = a.Scalar(), word = a.Scalar();
  a.udiv(row, word, index, C(kQmmConstOutputWords));
  const Operand sum = A::r(a.NewTemp()), part = A::r(a.NewTemp());
  const Operand address = a.Scalar(), stride = a.Scalar(), split = a.Scalar();
  a.mov(sum, A::l(0, 0, 0, 0));
  a.ishl(address, index, A::l(4));
  a.ishl(stride, words, A::l(4));
  a.mov(split, A::l(0));
  a.LoopWhileUnsignedLess(split, C(kQmmConstSplits));
  a.ld_raw(part, address, A::t(0));
  a.iadd(sum, sum, part);
  a.iadd(address, address, stride);
  a.iadd(split, split, A::l(1));
  a.endloop();
  const Operand b_scale = A::r(a.NewTemp()), column0 = a.Scalar(), params = A::r(a.NewTemp());
  a.ishl(column0, word, A::l(2));
  EmitColumnScales(a, column0, b_scale);
  a.imul(address, row, C(kQmmConstRowParamBytes));
  a.ld_raw(params, address, A::t(2));
  a.ishl(address, index, A::l(2));
  EmitRequantizeWord(a, sum, params, b_scale, spec.output_signed, address);
  a.endif();
  a.ret();
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulReduceKernel(
    const QuantizedMatMulReduceSpec& spec) {
  KernelAssembler a;
  BuildReduce(a, spec);
  return FinishKernel(a, spec.Key());
}

}  // namespace dmlserve::d3d12

#include "kernels/d3d12/shaders/scan_codegen.h"

namespace dmlserve::d3d12 {

using dxbc::Operand;

LineGeometry EmitLineGeometry(KernelAssembler& a, const Operand& line, bool reverse) {
  using A = KernelAssembler;
  const Operand outer = a.Scalar(), inner_index = a.Scalar();
  a.udiv(outer, inner_index, line, A::Constant(kScanConstInner));
  const Operand t = a.Scalar();
  a.imul(t, outer, A::Constant(kScanConstAxis));
  const Operand base = a.Scalar();
  a.imad(base, t, A::Constant(kScanConstInner), inner_index);
  if (!reverse) return {base, A::Constant(kScanConstInner)};
  const Operand last = a.Scalar(), step = a.Scalar();
  a.iadd(t, A::Constant(kScanConstAxis), A::l(-1));
  a.imad(last, t, A::Constant(kScanConstInner), base);
  a.ineg(step, A::Constant(kScanConstInner));
  return {last, step};
}

}  // namespace dmlserve::d3d12

#include "kernels/d3d12/shaders/quantized_matmul_epilogue.h"

#include <string>

#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

namespace dmlserve::d3d12 {

using dxbc::Operand;

namespace {
Operand C(int i) { return KernelAssembler::Constant(i); }
}  // namespace

void EmitRequantizeWord(KernelAssembler& a, const Operand& acc, const Operand& row_params,
                        const Operand& b_scale, bool output_signed, const Operand& address) {
  using A = KernelAssembler;
  const Operand t = A::r(a.NewTemp()), value = A::r(a.NewTemp()), scale = A::r(a.NewTemp());
  const Operand down = A::r(a.NewTemp()), up = A::r(a.NewTemp());
  const Operand factor = A::r(a.NewTemp()), unscale = A::r(a.NewTemp());
  // Scales are any finite floats, so a_scale * b_scale may leave float32's
  // range while the ratio does not: then a_scale is pre-scaled by 2^-64 (or
  // 2^64) and the ratio scaled back, which is exact and leaves the in-range
  // arithmetic unchanged.
  a.mul(scale, row_params.x(), b_scale);
  a.ge(down, scale.abs(), A::lf(0x1p100f));
  a.lt(up, scale.abs(), A::lf(0x1p-100f));
  a.lt(t.x(), row_params.x().abs(), A::lf(0x1p64f));
  a.and_(up, up, t.sel("xxxx"));  // else b_scale is 0 (2^64 * a_scale could be inf)
  a.movc(factor, down, A::lf(0x1p-64f), A::lf(1.0f));
  a.movc(factor, up, A::lf(0x1p64f), factor);
  a.movc(unscale, down, A::lf(0x1p64f), A::lf(1.0f));
  a.movc(unscale, up, A::lf(0x1p-64f), unscale);
  a.mul(scale, row_params.x(), factor);
  a.mul(scale, scale, b_scale);
  // GPUs divide as x * rcp(y), and rcp(y) of an output scale of 2^126 or
  // more is subnormal, which they flush to zero (an H100 through vkd3d
  // answered 0 for 3 * 4 * 1e38 / 1e38). Both sides are scaled by 2^-64 when
  // the output scale is that large: exact, and a numerator made subnormal by
  // it only means a ratio below 2^-126, whose product with any int32
  // accumulator rounds to 0 anyway.
  a.ge(t, row_params.y().abs(), A::lf(0x1p64f));
  a.movc(t, t, A::lf(0x1p-64f), A::lf(1.0f));
  a.mul(scale, scale, t);
  a.mul(t, row_params.y(), t);
  a.div(scale, scale, t);
  a.mul(scale, scale, unscale);
  a.itof(value, acc);
  a.mul(value, value, scale);
  // 0 * inf (a ratio beyond float32) is NaN; the result is 0.
  a.movc(value, acc, value, A::l(0, 0, 0, 0));
  a.round_ne(value, value);
  // ftoi of out-of-range values is undefined in SPIR-V: clamp first.
  a.max(value, value, A::lf(-1073741824.0f));
  a.min(value, value, A::lf(1073741824.0f));
  a.ftoi(value, value);
  a.iadd(value, value, row_params.w());
  a.imax(value, value, A::l(output_signed ? -128 : 0));
  a.imin(value, value, A::l(output_signed ? 127 : 255));
  a.and_(value, value, A::l(255, 255, 255, 255));
  a.ishl(value, value, A::l(0, 8, 16, 24));
  a.or_(value.xy(), value.xy(), value.zw());
  a.or_(value.x(), value.x(), value.y());
  a.store_raw(A::u(0).x(), address, value.x());
}

void EmitColumnScales(KernelAssembler& a, const Operand& column0, const Operand& scale) {
  using A = KernelAssembler;
  a.mov(scale, A::l(0, 0, 0, 0));
  const Operand column = a.Scalar(), address = a.Scalar(), params = A::r(a.NewTemp());
  for (uint32_t j = 0; j < 4; ++j) {
    a.iadd(column, column0, A::l(j));
    a.IfUnsignedLess(column, C(kQmmConstColumns));
    a.imul(address, column, C(kQmmConstColumnParamBytes));
    a.ld_raw(params.x(), address, A::t(3));
    a.mov(scale.sel(std::string(1, "xyzw"[j])), params.x());
    a.endif();
  }
}

}  // namespace dmlserve::d3d12

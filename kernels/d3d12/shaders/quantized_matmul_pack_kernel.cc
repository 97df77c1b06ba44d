#include <cstdint>
#include <vector>

#include "kernels/d3d12/shaders/kernel_assembler.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

// qmm.packb (quantized_matmul_kernels.h): a request's own B, packed on the
// device into the octs layout qmm.gemm and qmm.rows read.

namespace dmlserve::d3d12 {
namespace {

using dxbc::Operand;

Operand C(int i) { return KernelAssembler::Constant(i); }

// Thread t writes oct t = (slice * KO + o) * N + n (an outer product's:
// (o * slices + slice) * N + n): bytes k = 8o .. 8o + 7 of column n,
// B[slice][k][n] (a dword load and a byte extract each), or the column's
// zero point past K. The 64 threads of a group read 64 consecutive bytes of
// one row at a time where N >= 64; with fewer columns, neighbouring threads
// move on to the next oct of the slice, or in an outer product to the next
// slice, K * N bytes further on.
void BuildPackB(KernelAssembler& a) {
  using A = KernelAssembler;
  a.DeclareBindings(/*srvs=*/2, /*uavs=*/1);
  a.dcl_input(A::vThreadGroupID().xy());
  a.dcl_input(A::vThreadIDInGroupFlattened());
  a.dcl_thread_group(QuantizedMatMulPackSpec::kThreads, 1, 1);
  const Operand group = a.Scalar(), index = a.Scalar(), octs = a.Scalar();
  a.LinearGroupIndex(group);
  a.imad(index, group, A::l(QuantizedMatMulPackSpec::kThreads), A::vThreadIDInGroupFlattened().x());
  a.imul(octs, C(kQmmConstDepthOcts), C(kQmmConstColumns));
  a.imul(octs, octs, C(kQmmConstChannels));  // slices
  a.IfUnsignedLess(index, octs);
  const Operand rest = a.Scalar(), n = a.Scalar(), slice = a.Scalar(), o = a.Scalar();
  const Operand inner = a.Scalar(), quotient = a.Scalar(), remainder = a.Scalar();
  a.udiv(rest, n, index, C(kQmmConstColumns));
  // rest = outer-major pair: (slice, o) per slice, (o, slice) for an outer
  // product.
  a.movc(inner, C(kQmmConstPackOuter), C(kQmmConstChannels), C(kQmmConstDepthOcts));
  a.udiv(quotient, remainder, rest, inner);
  a.movc(slice, C(kQmmConstPackOuter), remainder, quotient);
  a.movc(o, C(kQmmConstPackOuter), quotient, remainder);
  // Source byte of (k = 8o, n): (slice * K + 8o) * N + n.
  const Operand k = a.Scalar(), source = a.Scalar(), zp = a.Scalar(), address = a.Scalar();
  a.ishl(k, o, A::l(3));
  a.imad(source, slice, C(kQmmConstDepth), k);
  a.imad(source, source, C(kQmmConstColumns), n);
  a.imad(address, n, C(kQmmConstColumnParamBytes), A::l(4));
  a.ld_raw(zp, address, A::t(1));  // the column's zero point (low byte)
  a.and_(zp, zp, A::l(0xff));
  const Operand packed = A::r(a.NewTemp()), word = a.Scalar(), shift = a.Scalar(),
                value = a.Scalar(), inside = a.Scalar();
  a.mov(packed, A::l(0, 0, 0, 0));
  for (uint32_t j = 0; j < 8; ++j) {
    a.ult(inside, k, C(kQmmConstDepth));
    a.mov(value, zp);
    a.if_nz(inside);
    a.and_(address, source, A::l(~3));
    a.ld_raw(word, address, A::t(0));
    a.and_(shift, source, A::l(3));
    a.ishl(shift, shift, A::l(3));
    a.ubfe(value, A::l(8), shift, word);
    a.endif();
    const Operand lane = packed.sel(j < 4 ? "x" : "y");
    a.bfi(lane, A::l(8), A::l(8 * (j % 4)), value, lane);
    a.iadd(source, source, C(kQmmConstColumns));
    a.iadd(k, k, A::l(1));
  }
  a.ishl(address, index, A::l(3));
  a.store_raw(A::u(0).xy(), address, packed.xy());
  a.endif();
  a.ret();
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulPackKernel() {
  KernelAssembler a;
  BuildPackB(a);
  return FinishKernel(a, QuantizedMatMulPackSpec::kKey);
}

}  // namespace dmlserve::d3d12

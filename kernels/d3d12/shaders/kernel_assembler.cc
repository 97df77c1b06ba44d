#include "kernels/d3d12/shaders/kernel_assembler.h"

#include "absl/strings/str_cat.h"

namespace dmlserve::d3d12 {

void KernelAssembler::DeclareBindings(int srvs, int uavs) {
  dcl_globalFlags(dxbc::kGlobalFlagRefactoringAllowed);
  dcl_constantbuffer(0, (kRootConstantCount + 3) / 4);
  for (int i = 0; i < srvs; ++i) dcl_resource_raw(i);
  for (int i = 0; i < uavs; ++i) dcl_uav_raw(i);
}

dxbc::Operand KernelAssembler::Constant(int i) {
  return cb(0, i / 4).sel(std::string(1, "xyzw"[i % 4]));
}

void KernelAssembler::LinearGroupIndex(const Operand& dst) {
  imad(dst, vThreadGroupID().y(), Constant(kConstGroupsX), vThreadGroupID().x());
}

void KernelAssembler::IfUnsignedLess(const Operand& a, const Operand& b) {
  const Operand c = Scalar();
  ult(c, a, b);
  if_nz(c);
}

void KernelAssembler::IfUnsignedGreaterEqual(const Operand& a, const Operand& b) {
  const Operand c = Scalar();
  uge(c, a, b);
  if_nz(c);
}

void KernelAssembler::LoopWhileUnsignedLess(const Operand& counter, const Operand& limit) {
  loop();
  const Operand done = Scalar();
  uge(done, counter, limit);
  breakc_nz(done);
}

absl::StatusOr<std::vector<uint8_t>> FinishKernel(KernelAssembler& a, const std::string& key) {
  absl::StatusOr<std::vector<uint8_t>> blob = a.Finish();
  if (!blob.ok()) return absl::InternalError(absl::StrCat(key, ": ", blob.status().message()));
  return blob;
}

}  // namespace dmlserve::d3d12

#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_KERNEL_ASSEMBLER_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_KERNEL_ASSEMBLER_H_

// dxbc::Assembler plus what every dmlserve kernel shares: the binding model of
// kernel_abi.h (root constants as cb0, raw SRVs t#, raw UAVs u#), the 2-D
// group grid that lifts D3D12's 65535-groups-per-dimension limit, scalar temp
// allocation and a few multi-instruction idioms.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/d3d12/shaders/kernel_abi.h"
#include "kernels/dxbc/assembler.h"

namespace dmlserve::d3d12 {

class KernelAssembler : public dxbc::Assembler {
 public:
  using Operand = dxbc::Operand;

  // cb0 with all root constants, t0..t(srvs-1), u0..u(uavs-1).
  void DeclareBindings(int srvs, int uavs);

  // Root constant i (select-1 operand of cb0).
  static Operand Constant(int i);

  // A fresh temp's .x (one scalar per register keeps kernels readable; the
  // Vulkan driver's compiler packs them).
  Operand Scalar() { return r(NewTemp()).x(); }

  // Writes the linear group index; needs dcl_input vThreadGroupID.xy.
  void LinearGroupIndex(const Operand& dst);

  // Open `if (a < b)` / `if (a >= b)` (unsigned) blocks; close with endif().
  void IfUnsignedLess(const Operand& a, const Operand& b);
  void IfUnsignedGreaterEqual(const Operand& a, const Operand& b);
  // loop { if (counter >= limit) break; ... : the head of a counted loop.
  void LoopWhileUnsignedLess(const Operand& counter, const Operand& limit);
};

// a.Finish(), with a failure reported as INTERNAL naming the kernel `key`.
absl::StatusOr<std::vector<uint8_t>> FinishKernel(KernelAssembler& a, const std::string& key);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_KERNEL_ASSEMBLER_H_

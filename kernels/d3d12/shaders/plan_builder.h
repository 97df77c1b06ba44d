#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_PLAN_BUILDER_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_PLAN_BUILDER_H_

// Assembles a DispatchPlan from the jobs of a batch.
//
// Each job contributes a short sequence of passes; pass k of every job goes
// into stage k. Stages run in order with one UAV barrier between them, so the
// jobs of a stage run back to back without barriers (they touch disjoint
// buffers) and a pass always sees everything the previous stage wrote.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/d3d12/shaders/dispatch_plan.h"

namespace dmlserve::d3d12 {

// The largest byte offset raw-buffer kernels can address (32-bit addresses).
inline constexpr uint64_t kMaxKernelBufferBytes = (uint64_t{1} << 32) - 4;
// D3D12's limit on thread groups per dispatch dimension.
inline constexpr uint32_t kMaxGroupsPerDimension = 65535;

uint64_t RoundUpTo4(uint64_t bytes);
uint64_t CeilDiv(uint64_t a, uint64_t b);

// Spreads `group_count` groups over a 2-D grid and records the grid in the
// kConstGroupsX / kConstGroupCount root constants the kernels read.
void SetGroupCount(Dispatch& dispatch, uint64_t group_count);

class PlanBuilder {
 public:
  // `bytes` [offset, offset + size) is uploaded; when `size` is not a
  // multiple of 4 the bytes are copied into a zero-padded buffer.
  BufferId AddUpload(std::shared_ptr<const Buffer> bytes, uint64_t offset, uint64_t size);
  // A device-resident derived form of a registered tensor, `size_bytes` (a
  // multiple of 4) long, made by `make` only when it must be uploaded (see
  // kResident).
  BufferId AddResident(uint64_t size_bytes, std::string resident_key,
                       std::function<std::shared_ptr<const Buffer>()> make);
  BufferId AddDeviceBuffer(BufferKind kind, uint64_t size_bytes);

  // `dispatch`'s grid must be set by SetGroupCount (checked: the grid's root
  // constants agree with it). Kernel constants never use the grid's slots
  // (IsKernelConstant, static_asserted beside each kernel's constants).
  void AddDispatch(int stage, Dispatch dispatch);
  void AddFinisher(std::function<absl::Status(ReadBackBuffers& outputs)> finisher);

  DispatchPlan Build() &&;

 private:
  std::vector<BufferSpec> buffers_;
  std::vector<std::vector<Dispatch>> stages_;
  std::vector<std::function<absl::Status(ReadBackBuffers&)>> finishers_;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_PLAN_BUILDER_H_

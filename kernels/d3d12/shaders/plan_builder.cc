#include "kernels/d3d12/shaders/plan_builder.h"

#include <algorithm>
#include <utility>

#include "kernels/core/check.h"
#include "kernels/d3d12/shaders/kernel_assembler.h"

namespace dmlserve::d3d12 {

uint64_t RoundUpTo4(uint64_t bytes) { return (bytes + 3) & ~uint64_t{3}; }

uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

void SetGroupCount(Dispatch& dispatch, uint64_t group_count) {
  const uint64_t x = std::max<uint64_t>(1, std::min<uint64_t>(group_count, kMaxGroupsPerDimension));
  dispatch.groups_x = static_cast<uint32_t>(x);
  dispatch.groups_y = static_cast<uint32_t>(std::max<uint64_t>(1, CeilDiv(group_count, x)));
  dispatch.groups_z = 1;
  dispatch.constants[kConstGroupsX] = dispatch.groups_x;
  dispatch.constants[kConstGroupCount] = static_cast<uint32_t>(group_count);
}

BufferId PlanBuilder::AddUpload(std::shared_ptr<const Buffer> bytes, uint64_t offset,
                                uint64_t size) {
  BufferSpec spec;
  spec.kind = BufferKind::kUpload;
  spec.size_bytes = RoundUpTo4(size);
  if (spec.size_bytes != size || offset + spec.size_bytes > bytes->size()) {
    std::shared_ptr<Buffer> padded = Buffer::Zeroed(spec.size_bytes);
    std::copy_n(bytes->data() + offset, size, padded->data());
    spec.host_bytes = std::move(padded);
    spec.host_offset = 0;
  } else {
    spec.host_bytes = std::move(bytes);
    spec.host_offset = offset;
  }
  buffers_.push_back(std::move(spec));
  return static_cast<BufferId>(buffers_.size() - 1);
}

BufferId PlanBuilder::AddResident(uint64_t size_bytes, std::string resident_key,
                                  std::function<std::shared_ptr<const Buffer>()> make) {
  DMLSERVE_DCHECK(size_bytes > 0 && size_bytes % 4 == 0);
  BufferSpec spec;
  spec.kind = BufferKind::kResident;
  spec.size_bytes = size_bytes;
  spec.resident_key = std::move(resident_key);
  spec.make_resident_bytes = std::move(make);
  buffers_.push_back(std::move(spec));
  return static_cast<BufferId>(buffers_.size() - 1);
}

BufferId PlanBuilder::AddDeviceBuffer(BufferKind kind, uint64_t size_bytes) {
  BufferSpec spec;
  spec.kind = kind;
  spec.size_bytes = std::max<uint64_t>(4, RoundUpTo4(size_bytes));
  buffers_.push_back(std::move(spec));
  return static_cast<BufferId>(buffers_.size() - 1);
}

void PlanBuilder::AddDispatch(int stage, Dispatch dispatch) {
  DMLSERVE_DCHECK(dispatch.constants[kConstGroupsX] == dispatch.groups_x);
  DMLSERVE_DCHECK(dispatch.constants[kConstGroupCount] >
                  (dispatch.groups_y - 1) * dispatch.groups_x);
  if (stages_.size() <= static_cast<size_t>(stage)) stages_.resize(stage + 1);
  stages_[stage].push_back(std::move(dispatch));
}

void PlanBuilder::AddFinisher(std::function<absl::Status(ReadBackBuffers& outputs)> finisher) {
  finishers_.push_back(std::move(finisher));
}

DispatchPlan PlanBuilder::Build() && {
  DispatchPlan plan;
  plan.buffers = std::move(buffers_);
  for (size_t s = 0; s < stages_.size(); ++s) {
    for (Dispatch& d : stages_[s]) {
      d.barrier_after = false;
      plan.dispatches.push_back(std::move(d));
    }
    // A UAV barrier covers all earlier writes, so one per stage suffices.
    if (s + 1 < stages_.size() && !plan.dispatches.empty()) {
      plan.dispatches.back().barrier_after = true;
    }
  }
  plan.finish = [finishers = std::move(finishers_)](ReadBackBuffers& outputs) {
    for (const auto& finisher : finishers) {
      absl::Status status = finisher(outputs);
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  };
  return plan;
}

}  // namespace dmlserve::d3d12

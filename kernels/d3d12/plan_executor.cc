#include "kernels/d3d12/plan_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "kernels/core/parallel_for.h"
#include "kernels/d3d12/hresult.h"
#include "kernels/d3d12/root_signature.h"

namespace dmlserve::d3d12 {
namespace {

// D3D12_CS_DISPATCH_MAX_THREAD_GROUPS_PER_DIMENSION (missing from vkd3d's headers).
constexpr uint32_t kMaxGroupsPerDimension = 65535;

uint64_t AlignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// Outputs this large are lent from readback memory rather than copied out
// (see ReadOutputs).
constexpr uint64_t kLentOutputBytes = uint64_t{1} << 20;

bool NeedsUpload(BufferKind kind) {
  return kind == BufferKind::kUpload || kind == BufferKind::kZeroed;
}

// The buffers one batch holds; everything goes back to the pool (and
// unfinished resident uploads are abandoned) when the batch ends, however it
// ends.
class BatchBuffers {
 public:
  BatchBuffers(GpuBufferPool* pool, ResidentTensors* residents, size_t count)
      : pooled_(count),
        views_(count),
        in_arena_(count, false),
        resident_(count),
        pool_(pool),
        residents_(residents) {}
  ~BatchBuffers() {
    for (PooledBuffer& buffer : pooled_) pool_->Release(std::move(buffer));
    pool_->Release(std::move(upload_arena_));
    pool_->Release(std::move(output_arena_));
    for (const std::string& key : uploading_) residents_->Abandoned(key);
  }

  const PooledBuffer& buffer(BufferId id) const {
    if (resident_[id]) return *resident_[id];
    return in_arena_[id] ? views_[id] : pooled_[id];
  }

  // Pooled buffers this batch holds: per BufferId, plus the two arenas.
  std::vector<PooledBuffer> pooled_;
  PooledBuffer upload_arena_, output_arena_;
  // Buffers that are ranges of an arena: the arena's resource, their address.
  std::vector<PooledBuffer> views_;
  std::vector<bool> in_arena_;
  std::vector<std::shared_ptr<const PooledBuffer>> resident_;
  std::vector<std::string> uploading_;  // resident keys this batch uploads

 private:
  GpuBufferPool* pool_;
  ResidentTensors* residents_;
};

// A readback buffer lent with a batch's outputs: the outputs borrow its
// mapped memory, and it goes back to its pool when the last of them is
// dropped (or when the batch fails before handing any out).
class ReadbackLease {
 public:
  ReadbackLease(std::shared_ptr<GpuBufferPool> pool, PooledBuffer buffer)
      : pool_(std::move(pool)), buffer_(std::move(buffer)) {}
  ~ReadbackLease() { pool_->Release(std::move(buffer_)); }
  ReadbackLease(const ReadbackLease&) = delete;
  ReadbackLease& operator=(const ReadbackLease&) = delete;

  ID3D12Resource* resource() const { return buffer_.resource.get(); }
  char* data() const { return reinterpret_cast<char*>(buffer_.mapped); }

 private:
  std::shared_ptr<GpuBufferPool> pool_;
  PooledBuffer buffer_;
};

// Resource states within one command list. Buffers decay to COMMON at the
// end of every ExecuteCommandLists, so each list starts from COMMON.
class StateTracker {
 public:
  void Require(ID3D12Resource* resource, D3D12_RESOURCE_STATES state) {
    auto [it, inserted] = states_.emplace(resource, D3D12_RESOURCE_STATE_COMMON);
    if (it->second == state) return;
    D3D12_RESOURCE_BARRIER barrier = {};
    barrier.Type = D3D12_RESOURCE_BARRIER_TYPE_TRANSITION;
    barrier.Flags = D3D12_RESOURCE_BARRIER_FLAG_NONE;
    barrier.Transition.pResource = resource;
    barrier.Transition.Subresource = D3D12_RESOURCE_BARRIER_ALL_SUBRESOURCES;
    barrier.Transition.StateBefore = it->second;
    barrier.Transition.StateAfter = state;
    pending_.push_back(barrier);
    it->second = state;
  }
  // Orders every UAV write recorded so far before what follows (a stage
  // boundary). Issued with the next flush's transitions, so that a stage
  // boundary costs one ResourceBarrier call, not two; it goes first in that
  // call.
  void RequireUavBarrier() {
    D3D12_RESOURCE_BARRIER barrier = {};
    barrier.Type = D3D12_RESOURCE_BARRIER_TYPE_UAV;
    barrier.UAV.pResource = nullptr;  // every UAV write so far
    pending_.push_back(barrier);
  }
  void Flush(ID3D12GraphicsCommandList* list) {
    if (pending_.empty()) return;
    list->ResourceBarrier(static_cast<UINT>(pending_.size()), pending_.data());
    pending_.clear();
  }

 private:
  std::unordered_map<ID3D12Resource*, D3D12_RESOURCE_STATES> states_;
  std::vector<D3D12_RESOURCE_BARRIER> pending_;
};

absl::Status CheckBinding(const DispatchPlan& plan, size_t dispatch, const char* slot_kind,
                          int slot, const BufferBinding& binding) {
  if (binding.buffer == BufferBinding::kUnbound) return absl::OkStatus();
  if (binding.buffer >= plan.buffers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("dispatch ", dispatch, " binds buffer ",
                                                   binding.buffer, " to ", slot_kind, slot,
                                                   "; the plan has ", plan.buffers.size()));
  }
  const BufferSpec& spec = plan.buffers[binding.buffer];
  if (binding.offset_bytes % 4 != 0 || binding.offset_bytes >= spec.size_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dispatch ", dispatch, " binds ", slot_kind, slot, " at offset ",
                     binding.offset_bytes, " of buffer ", binding.buffer, " (", spec.size_bytes,
                     " bytes); offsets are multiples of 4 inside the buffer"));
  }
  return absl::OkStatus();
}

uint64_t NanosecondsBetween(std::chrono::steady_clock::time_point start,
                            std::chrono::steady_clock::time_point end) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
}

uint64_t ElapsedNs(std::chrono::steady_clock::time_point start) {
  return NanosecondsBetween(start, std::chrono::steady_clock::now());
}

// Where a batch's buffers are staged. Its kUpload buffers are ranges of one
// upload arena, laid out as in the upload ring, and its kOutput buffers
// ranges of one output arena, laid out as in the readback buffer: one copy
// in and one copy out per batch, and one state transition each (ValidatePlan
// guarantees uploads are only read and outputs only written by dispatches).
// Resident uploads and zeroed buffers stay separate resources with their own
// copies, staged after the upload arena's bytes.
struct BatchLayout {
  explicit BatchLayout(size_t count) : staging_offset(count, 0), upload_here(count, false) {}

  // Per buffer: its offset in the batch's upload ring reservation (uploads)
  // or in the readback buffer (outputs).
  std::vector<uint64_t> staging_offset;
  // Per buffer: copied in from a staging range of its own.
  std::vector<bool> upload_here;
  uint64_t upload_arena_bytes = 0, output_arena_bytes = 0;
  uint64_t upload_bytes = 0;  // upload ring space: the arena, then separate uploads
};

// Takes the plan's resident buffers, in key order: a batch may wait for
// another batch's upload of one key while uploading another itself, and one
// order for everybody rules out two batches waiting for each other. A key
// listed twice in one plan is one buffer (and one upload): asking the store
// twice would wait for our own upload. Marks those this batch uploads.
absl::Status AcquireResidents(const DispatchPlan& plan, ResidentTensors& residents,
                              BatchBuffers& buffers, BatchLayout& layout) {
  std::vector<BufferId> resident_order;
  for (BufferId id = 0; id < plan.buffers.size(); ++id) {
    if (plan.buffers[id].kind == BufferKind::kResident) resident_order.push_back(id);
  }
  std::stable_sort(resident_order.begin(), resident_order.end(), [&](BufferId a, BufferId b) {
    return plan.buffers[a].resident_key < plan.buffers[b].resident_key;
  });
  for (size_t i = 0; i < resident_order.size(); ++i) {
    const BufferId id = resident_order[i];
    const BufferSpec& spec = plan.buffers[id];
    if (i > 0 && plan.buffers[resident_order[i - 1]].resident_key == spec.resident_key) {
      buffers.resident_[id] = buffers.resident_[resident_order[i - 1]];
      continue;
    }
    absl::StatusOr<ResidentTensors::Use> use =
        residents.Acquire(spec.resident_key, spec.size_bytes);
    if (!use.ok()) return use.status();
    buffers.resident_[id] = std::move(use->buffer);
    if (use->must_upload) {
      buffers.uploading_.push_back(spec.resident_key);
      layout.upload_here[id] = true;
    }
  }
  return absl::OkStatus();
}

// Lays out the two arenas (see BatchLayout) and takes them and every other
// buffer that is not resident from the pool, then places the separate
// uploads after the upload arena's bytes.
absl::Status AcquireBuffers(const DispatchPlan& plan, GpuBufferPool& pool, BatchBuffers& buffers,
                            BatchLayout& layout) {
  const size_t count = plan.buffers.size();
  for (BufferId id = 0; id < count; ++id) {
    const BufferSpec& spec = plan.buffers[id];
    if (spec.kind == BufferKind::kUpload) {
      layout.staging_offset[id] = layout.upload_arena_bytes;
      layout.upload_arena_bytes += AlignUp(spec.size_bytes, UploadRing::kAlignment);
      buffers.in_arena_[id] = true;
    } else if (spec.kind == BufferKind::kOutput) {
      layout.staging_offset[id] = layout.output_arena_bytes;
      layout.output_arena_bytes += AlignUp(spec.size_bytes, UploadRing::kAlignment);
      buffers.in_arena_[id] = true;
    }
  }
  for (auto [arena, bytes] : {std::make_pair(&buffers.upload_arena_, layout.upload_arena_bytes),
                              std::make_pair(&buffers.output_arena_, layout.output_arena_bytes)}) {
    if (bytes == 0) continue;
    absl::StatusOr<PooledBuffer> buffer = pool.Acquire(bytes);
    if (!buffer.ok()) return buffer.status();
    *arena = std::move(*buffer);
  }
  for (BufferId id = 0; id < count; ++id) {
    const BufferSpec& spec = plan.buffers[id];
    if (spec.kind == BufferKind::kResident) continue;
    if (buffers.in_arena_[id]) {
      const PooledBuffer& arena =
          spec.kind == BufferKind::kUpload ? buffers.upload_arena_ : buffers.output_arena_;
      buffers.views_[id] = {arena.resource, spec.size_bytes,
                            arena.address + layout.staging_offset[id]};
      layout.upload_here[id] = false;  // the arena's single copy brings it
      continue;
    }
    absl::StatusOr<PooledBuffer> buffer = pool.Acquire(spec.size_bytes);
    if (!buffer.ok()) return buffer.status();
    buffers.pooled_[id] = std::move(*buffer);
    layout.upload_here[id] = NeedsUpload(spec.kind);
  }
  layout.upload_bytes = layout.upload_arena_bytes;
  for (BufferId id = 0; id < count; ++id) {
    if (!layout.upload_here[id]) continue;
    layout.staging_offset[id] = layout.upload_bytes;
    layout.upload_bytes += AlignUp(plan.buffers[id].size_bytes, UploadRing::kAlignment);
  }
  return absl::OkStatus();
}

// The bytes of the resident buffers this batch uploads (kResident forms are
// made when first uploaded, and only then), by BufferId; null elsewhere.
absl::StatusOr<std::vector<std::shared_ptr<const Buffer>>> MakeResidentForms(
    const DispatchPlan& plan, const BatchLayout& layout) {
  std::vector<std::shared_ptr<const Buffer>> made(plan.buffers.size());
  for (BufferId id = 0; id < plan.buffers.size(); ++id) {
    const BufferSpec& spec = plan.buffers[id];
    if (!layout.upload_here[id] || spec.kind != BufferKind::kResident) continue;
    made[id] = spec.make_resident_bytes();
    if (made[id] == nullptr || made[id]->size() < spec.size_bytes) {
      return absl::InternalError(absl::StrCat("the resident form ", spec.resident_key, " is ",
                                              made[id] ? made[id]->size() : 0,
                                              " bytes; the plan needs ", spec.size_bytes));
    }
  }
  return made;
}

// Writes every upload's bytes (host bytes, a resident form, or zeros) into
// the batch's staging reservation at its layout offset.
void StageUploadBytes(const DispatchPlan& plan, const BatchLayout& layout,
                      const std::vector<std::shared_ptr<const Buffer>>& made, uint8_t* staging) {
  for (BufferId id = 0; id < plan.buffers.size(); ++id) {
    const BufferSpec& spec = plan.buffers[id];
    if (!layout.upload_here[id] && spec.kind != BufferKind::kUpload) continue;
    uint8_t* destination = staging + layout.staging_offset[id];
    if (spec.kind == BufferKind::kZeroed) {
      std::memset(destination, 0, spec.size_bytes);
    } else {
      const char* source = spec.kind == BufferKind::kResident
                               ? made[id]->data()
                               : spec.host_bytes->data() + spec.host_offset;
      ParallelMemcpy(destination, source, spec.size_bytes);
    }
  }
}

// Records the copies from the staging reservation into place: the upload
// arena in one copy, each separate upload in its own, after one barrier call
// for all their transitions.
void RecordCopiesIn(const DispatchPlan& plan, const BatchLayout& layout,
                    const BatchBuffers& buffers, const UploadRing::Reservation& staging,
                    StateTracker& states, ID3D12GraphicsCommandList* list) {
  for (BufferId id = 0; id < plan.buffers.size(); ++id) {
    if (layout.upload_here[id]) {
      states.Require(buffers.buffer(id).resource.get(), D3D12_RESOURCE_STATE_COPY_DEST);
    }
  }
  if (layout.upload_arena_bytes > 0) {
    states.Require(buffers.upload_arena_.resource.get(), D3D12_RESOURCE_STATE_COPY_DEST);
  }
  states.Flush(list);
  if (layout.upload_arena_bytes > 0) {
    list->CopyBufferRegion(buffers.upload_arena_.resource.get(), 0, staging.buffer(),
                           staging.offset(), layout.upload_arena_bytes);
  }
  for (BufferId id = 0; id < plan.buffers.size(); ++id) {
    if (!layout.upload_here[id]) continue;
    list->CopyBufferRegion(buffers.buffer(id).resource.get(), 0, staging.buffer(),
                           staging.offset() + layout.staging_offset[id],
                           plan.buffers[id].size_bytes);
  }
}

// Records the plan's dispatches on parts' root signature: each one's
// transitions (and the UAV barrier a stage boundary asked for) in one barrier
// call before it, its pipeline only when the kernel changes, its root
// constants, and its root descriptors (unbound slots point at parts'
// placeholder buffers) only where the slot's address changes: root arguments
// stay set across dispatches and pipeline changes within a list, and vkd3d
// 1.2 creates a Vulkan buffer view for every root descriptor set (and
// destroys them all when the allocator is reset), calls into the driver that
// wait on other threads' batches (docs/d3d12.md).
void RecordDispatches(const DispatchPlan& plan, const std::vector<ID3D12PipelineState*>& pipelines,
                      const BatchBuffers& buffers, const PlanExecutorParts& parts,
                      StateTracker& states, ID3D12GraphicsCommandList* list) {
  list->SetComputeRootSignature(parts.pipelines->root_signature());
  ID3D12PipelineState* bound_pipeline = nullptr;
  // What each root descriptor slot holds in this list (0: not set yet; no
  // buffer has GPU address 0).
  D3D12_GPU_VIRTUAL_ADDRESS bound_srv[kSrvCount] = {};
  D3D12_GPU_VIRTUAL_ADDRESS bound_uav[kUavCount] = {};
  for (size_t d = 0; d < plan.dispatches.size(); ++d) {
    const Dispatch& dispatch = plan.dispatches[d];
    D3D12_GPU_VIRTUAL_ADDRESS srv_address[kSrvCount];
    D3D12_GPU_VIRTUAL_ADDRESS uav_address[kUavCount];
    for (int slot_index = 0; slot_index < kSrvCount; ++slot_index) {
      const BufferBinding& binding = dispatch.srvs[slot_index];
      const PooledBuffer& buffer = binding.buffer == BufferBinding::kUnbound
                                       ? *parts.unbound_srv
                                       : buffers.buffer(binding.buffer);
      states.Require(buffer.resource.get(), D3D12_RESOURCE_STATE_NON_PIXEL_SHADER_RESOURCE);
      srv_address[slot_index] = buffer.address + binding.offset_bytes;
    }
    for (int slot_index = 0; slot_index < kUavCount; ++slot_index) {
      const BufferBinding& binding = dispatch.uavs[slot_index];
      const PooledBuffer& buffer = binding.buffer == BufferBinding::kUnbound
                                       ? *parts.unbound_uav
                                       : buffers.buffer(binding.buffer);
      states.Require(buffer.resource.get(), D3D12_RESOURCE_STATE_UNORDERED_ACCESS);
      uav_address[slot_index] = buffer.address + binding.offset_bytes;
    }
    states.Flush(list);
    if (pipelines[d] != bound_pipeline) {
      list->SetPipelineState(pipelines[d]);
      bound_pipeline = pipelines[d];
    }
    list->SetComputeRoot32BitConstants(kRootConstantsParameter, kRootConstantCount,
                                       dispatch.constants.data(), 0);
    for (int slot_index = 0; slot_index < kSrvCount; ++slot_index) {
      if (srv_address[slot_index] == bound_srv[slot_index]) continue;
      list->SetComputeRootShaderResourceView(RootSrvParameter(slot_index), srv_address[slot_index]);
      bound_srv[slot_index] = srv_address[slot_index];
    }
    for (int slot_index = 0; slot_index < kUavCount; ++slot_index) {
      if (uav_address[slot_index] == bound_uav[slot_index]) continue;
      list->SetComputeRootUnorderedAccessView(RootUavParameter(slot_index),
                                              uav_address[slot_index]);
      bound_uav[slot_index] = uav_address[slot_index];
    }
    if (dispatch.groups_x > 0 && dispatch.groups_y > 0 && dispatch.groups_z > 0) {
      list->Dispatch(dispatch.groups_x, dispatch.groups_y, dispatch.groups_z);
    }
    // Flushed before the next dispatch or the read-back copies, with
    // their transitions.
    if (dispatch.barrier_after) states.RequireUavBarrier();
  }
}

// The batch's kOutput buffers, by BufferId, from the readback buffer. Large
// outputs borrow the readback memory: a large scan's 64 MiB answer is not
// copied on the CPU (host memory traffic bound the end-to-end rate;
// docs/benchmarks.md). Small ones are copied out, as the copy costs little
// and a borrowed output keeps the whole readback buffer (every output of the
// batch) from the pool until the caller drops it: a batch of many small
// answers then gives its buffer back as soon as it ends.
ReadBackBuffers ReadOutputs(const DispatchPlan& plan, const BatchLayout& layout,
                            const std::shared_ptr<ReadbackLease>& readback) {
  ReadBackBuffers outputs(plan.buffers.size());
  for (BufferId id = 0; id < plan.buffers.size(); ++id) {
    if (plan.buffers[id].kind != BufferKind::kOutput) continue;
    char* source = readback->data() + layout.staging_offset[id];
    const uint64_t size = plan.buffers[id].size_bytes;
    if (size >= kLentOutputBytes) {
      outputs[id] = Buffer::Borrow(source, size, readback);
    } else {
      outputs[id] = Buffer::Uninitialized(size);
      std::memcpy(outputs[id]->data(), source, size);
    }
  }
  return outputs;
}

}  // namespace

absl::Status ValidatePlan(const DispatchPlan& plan) {
  for (size_t id = 0; id < plan.buffers.size(); ++id) {
    const BufferSpec& spec = plan.buffers[id];
    if (spec.size_bytes == 0 || spec.size_bytes % 4 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("buffer ", id, " is ", spec.size_bytes,
                                                     " bytes; sizes are positive multiples of 4"));
    }
    if (spec.kind == BufferKind::kUpload) {
      if (spec.host_bytes == nullptr || spec.host_offset > spec.host_bytes->size() ||
          spec.host_bytes->size() - spec.host_offset < spec.size_bytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "buffer ", id, " uploads ", spec.size_bytes, " bytes from offset ", spec.host_offset,
            " of ", spec.host_bytes ? spec.host_bytes->size() : 0, " host bytes"));
      }
    }
    if (spec.kind == BufferKind::kResident &&
        (spec.resident_key.empty() || !spec.make_resident_bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("resident buffer ", id, " has no key or no way to make its bytes"));
    }
  }
  for (size_t d = 0; d < plan.dispatches.size(); ++d) {
    const Dispatch& dispatch = plan.dispatches[d];
    if (dispatch.groups_x > kMaxGroupsPerDimension || dispatch.groups_y > kMaxGroupsPerDimension ||
        dispatch.groups_z > kMaxGroupsPerDimension) {
      return absl::InvalidArgumentError(
          absl::StrCat("dispatch ", d, " (", dispatch.kernel, ") has ", dispatch.groups_x, "x",
                       dispatch.groups_y, "x", dispatch.groups_z, " groups; D3D12 allows ",
                       kMaxGroupsPerDimension, " per dimension"));
    }
    for (int slot = 0; slot < kSrvCount; ++slot) {
      const BufferBinding& srv = dispatch.srvs[slot];
      absl::Status status = CheckBinding(plan, d, "t", slot, srv);
      if (!status.ok()) return status;
      // Outputs share one resource per batch, which stays writable.
      if (srv.buffer != BufferBinding::kUnbound &&
          plan.buffers[srv.buffer].kind == BufferKind::kOutput) {
        return absl::InvalidArgumentError(
            absl::StrCat("dispatch ", d, " reads output buffer ", srv.buffer, " (t", slot,
                         "); outputs are only written (stage results through kScratch)"));
      }
    }
    for (int slot = 0; slot < kUavCount; ++slot) {
      const BufferBinding& uav = dispatch.uavs[slot];
      absl::Status status = CheckBinding(plan, d, "u", slot, uav);
      if (!status.ok()) return status;
      if (uav.buffer == BufferBinding::kUnbound) continue;
      if (plan.buffers[uav.buffer].kind == BufferKind::kUpload) {
        return absl::InvalidArgumentError(
            absl::StrCat("dispatch ", d, " writes upload buffer ", uav.buffer, " (u", slot,
                         "); uploads share one resource per batch and are only read"));
      }
      if (plan.buffers[uav.buffer].kind == BufferKind::kResident) {
        return absl::InvalidArgumentError(
            absl::StrCat("dispatch ", d, " writes resident buffer ", uav.buffer, " (u", slot,
                         "); resident buffers are shared and read-only"));
      }
      for (int srv = 0; srv < kSrvCount; ++srv) {
        if (dispatch.srvs[srv].buffer == uav.buffer) {
          return absl::InvalidArgumentError(
              absl::StrCat("dispatch ", d, " binds buffer ", uav.buffer, " as both t", srv,
                           " and u", slot, "; a buffer is either read or written by a dispatch"));
        }
      }
    }
  }
  return absl::OkStatus();
}

// What a submitted batch lends the GPU: its buffers (pooled, arenas and
// resident), the upload ring's buffer, its readback buffer and its command
// context (allocator and list). Not its space in the upload ring: a batch
// that kept it would block every later batch that needs the ring to grow
// (UploadRing::Reserve waits for all space back), and a late copy that reads
// bytes another batch wrote there only spoils this batch's outputs, which
// nobody reads. The ring's buffer is kept, so that growing the ring does
// not free what the late copy reads.
struct PlanExecutor::AbandonedBatch {
  std::unique_ptr<BatchBuffers> buffers;
  ComPtr<ID3D12Resource> staging_buffer;
  std::shared_ptr<ReadbackLease> readback;
  CommandRing::Lease context;
};

namespace {

// Another reference to `resource` (which may be null).
ComPtr<ID3D12Resource> Share(ID3D12Resource* resource) {
  if (resource != nullptr) resource->AddRef();
  return ComPtr<ID3D12Resource>::Adopt(resource);
}

}  // namespace

PlanExecutor::PlanExecutor(const PlanExecutorParts& parts) : parts_(parts) {}
PlanExecutor::~PlanExecutor() = default;

void PlanExecutor::Abandon(AbandonedBatch batch) {
  // Its memory stays, but not its claim on the resident forms it was
  // uploading: a batch waiting for one of them would otherwise wait for as
  // long as this executor lives, and the executor for it. The form's buffer
  // lives on in `batch`.
  for (const std::string& key : batch.buffers->uploading_) parts_.residents->Abandoned(key);
  batch.buffers->uploading_.clear();
  std::lock_guard<std::mutex> lock(abandoned_mutex_);
  abandoned_.push_back(std::make_unique<AbandonedBatch>(std::move(batch)));
}

absl::Status PlanExecutor::DeviceFailure(const absl::Status& failure) {
  absl::Status lost = parts_.health->CheckAfterFailure(parts_.device, failure);
  return lost.ok() ? failure : lost;
}

absl::StatusOr<ReadBackBuffers> PlanExecutor::Run(const DispatchPlan& plan) {
  const auto run_start = std::chrono::steady_clock::now();
  if (absl::Status health = parts_.health->status(); !health.ok()) return health;
  if (absl::Status valid = ValidatePlan(plan); !valid.ok()) return valid;

  // Pipelines first: building a kernel takes time and needs no command context.
  std::vector<ID3D12PipelineState*> pipelines(plan.dispatches.size());
  for (size_t d = 0; d < plan.dispatches.size(); ++d) {
    absl::StatusOr<ID3D12PipelineState*> pipeline =
        parts_.pipelines->Get(plan.dispatches[d].kernel);
    if (!pipeline.ok()) return DeviceFailure(pipeline.status());
    pipelines[d] = *pipeline;
  }

  absl::StatusOr<CommandRing::Lease> context = parts_.commands->Acquire(parts_.batch_timeout_ms);
  if (!context.ok()) return DeviceFailure(context.status());
  ID3D12GraphicsCommandList* list = (*context)->list();

  // Buffers, staging space and the readback buffer.
  // (On the heap: a batch that may still be running when it fails hands
  // them to Abandon.)
  auto buffers = std::make_unique<BatchBuffers>(parts_.pool, parts_.residents, plan.buffers.size());
  BatchLayout layout(plan.buffers.size());
  if (absl::Status status = AcquireResidents(plan, *parts_.residents, *buffers, layout);
      !status.ok()) {
    return DeviceFailure(status);
  }
  if (absl::Status status = AcquireBuffers(plan, *parts_.pool, *buffers, layout); !status.ok()) {
    return DeviceFailure(status);
  }
  absl::StatusOr<std::vector<std::shared_ptr<const Buffer>>> made = MakeResidentForms(plan, layout);
  if (!made.ok()) return made.status();
  absl::StatusOr<UploadRing::Reservation> staging = parts_.uploads->Reserve(layout.upload_bytes);
  if (!staging.ok()) return DeviceFailure(staging.status());
  std::shared_ptr<ReadbackLease> readback;
  if (layout.output_arena_bytes > 0) {
    absl::StatusOr<PooledBuffer> buffer = parts_.readbacks->Acquire(layout.output_arena_bytes);
    if (!buffer.ok()) return DeviceFailure(buffer.status());
    readback = std::make_shared<ReadbackLease>(parts_.readbacks, std::move(*buffer));
  }

  // One command list: copies in, dispatches, the copy out.
  const auto copy_in_start = std::chrono::steady_clock::now();
  StageUploadBytes(plan, layout, *made, staging->data());
  copy_in_ns_.fetch_add(ElapsedNs(copy_in_start), std::memory_order_relaxed);
  StateTracker states;
  RecordCopiesIn(plan, layout, *buffers, *staging, states, list);
  parts_.commands->MarkDispatchesBegin(context->get());
  RecordDispatches(plan, pipelines, *buffers, parts_, states, list);
  parts_.commands->MarkDispatchesEnd(context->get());
  if (layout.output_arena_bytes > 0) {
    states.Require(buffers->output_arena_.resource.get(), D3D12_RESOURCE_STATE_COPY_SOURCE);
    states.Flush(list);
    list->CopyBufferRegion(readback->resource(), 0, buffers->output_arena_.resource.get(), 0,
                           layout.output_arena_bytes);
  }

  // Submission, and the wait for this batch's fence.
  if (parts_.faults->ShouldFailSubmission()) {
    return parts_.health->MarkLost(absl::UnavailableError(
        "ExecuteCommandLists: 0x887a0005 DXGI_ERROR_DEVICE_REMOVED (injected by the "
        "fail_after_batches fault-injection switch)"));
  }
  const auto submit_start = std::chrono::steady_clock::now();
  record_ns_.fetch_add(NanosecondsBetween(run_start, submit_start), std::memory_order_relaxed);
  absl::StatusOr<uint64_t> fence_value = parts_.commands->Submit(context->get());
  if (!fence_value.ok()) {
    // The list may have reached the queue before the call failed.
    Abandon({std::move(buffers), Share(staging->buffer()), readback, std::move(*context)});
    return DeviceFailure(fence_value.status());
  }
  const auto wait_start = std::chrono::steady_clock::now();
  submit_ns_.fetch_add(NanosecondsBetween(submit_start, wait_start), std::memory_order_relaxed);
  absl::Status completed =
      parts_.commands->Wait(context->get(), *fence_value, parts_.batch_timeout_ms);
  wait_ns_.fetch_add(ElapsedNs(wait_start), std::memory_order_relaxed);
  if (!completed.ok()) {
    Abandon({std::move(buffers), Share(staging->buffer()), readback, std::move(*context)});
    return DeviceFailure(completed);
  }
  // A device can be removed without any call failing (vkd3d reports loss
  // only this way): do not trust outputs from a removed device.
  if (HRESULT reason = parts_.device->GetDeviceRemovedReason(); FAILED(reason)) {
    return parts_.health->MarkLost(
        absl::UnavailableError(absl::StrCat("GetDeviceRemovedReason: ", HResultToString(reason))));
  }

  parts_.commands->CollectDispatchTime(context->get());
  for (const std::string& key : buffers->uploading_) parts_.residents->Uploaded(key);
  buffers->uploading_.clear();
  return ReadOutputs(plan, layout, readback);
}

}  // namespace dmlserve::d3d12

#include "kernels/d3d12/device_runtime.h"

#include "kernels/d3d12/buffer_factory.h"
#include "kernels/d3d12/command_ring.h"
#include "kernels/d3d12/d3d12_api.h"
#include "kernels/d3d12/device_health.h"
#include "kernels/d3d12/fault_injection.h"
#include "kernels/d3d12/gpu_buffer_pool.h"
#include "kernels/d3d12/pipeline_cache.h"
#include "kernels/d3d12/plan_executor.h"
#include "kernels/d3d12/release_when_idle.h"
#include "kernels/d3d12/resident_tensors.h"
#include "kernels/d3d12/root_signature.h"
#include "kernels/d3d12/upload_ring.h"

namespace dmlserve::d3d12 {

// Declaration order is destruction order reversed: whatever lends buffers
// (pool, factory) outlives whatever borrows them. The readback pool is
// shared: outputs lent to callers may outlive the device and return their
// buffers to it then.
struct DeviceRuntime::Parts {
  ComPtr<ID3D12Device> device;
  std::unique_ptr<BufferFactory> factory;
  std::unique_ptr<GpuBufferPool> pool;
  std::shared_ptr<GpuBufferPool> readbacks;
  std::unique_ptr<UploadRing> uploads;
  std::unique_ptr<ResidentTensors> residents;
  std::unique_ptr<PipelineCache> pipelines;
  std::unique_ptr<CommandRing> commands;
  std::unique_ptr<DeviceHealth> health;
  std::unique_ptr<FaultInjector> faults;
  PooledBuffer unbound_srv;
  PooledBuffer unbound_uav;
  uint64_t creations_at_start = 0;
  uint32_t batch_timeout_ms = 0;
  std::unique_ptr<PlanExecutor> executor;

  ~Parts() {
    executor.reset();
    residents.reset();
    if (pool != nullptr) {
      pool->Release(std::move(unbound_srv));
      pool->Release(std::move(unbound_uav));
    }
  }
};

absl::StatusOr<std::unique_ptr<DeviceRuntime>> DeviceRuntime::Create(
    ComPtr<ID3D12Device> device, std::shared_ptr<KernelLibrary> kernels,
    const RuntimeOptions& options) {
  if (!device) return absl::InvalidArgumentError("no D3D12 device");
  auto parts = std::make_unique<Parts>();
  parts->device = device;
  parts->factory = std::make_unique<BufferFactory>(device);
  parts->pool = std::make_unique<GpuBufferPool>(parts->factory.get(), options.pool_max_idle_bytes);
  parts->readbacks = std::make_shared<GpuBufferPool>(
      parts->factory.get(), options.pool_max_idle_bytes, HeapKind::kReadback);
  parts->uploads =
      std::make_unique<UploadRing>(parts->factory.get(), options.upload_ring_initial_bytes);
  parts->residents = std::make_unique<ResidentTensors>(parts->pool.get());

  absl::StatusOr<ComPtr<ID3D12RootSignature>> root_signature =
      CreateKernelRootSignature(device.get());
  if (!root_signature.ok()) return root_signature.status();
  parts->pipelines =
      std::make_unique<PipelineCache>(device, std::move(*root_signature), std::move(kernels));

  absl::StatusOr<std::unique_ptr<CommandRing>> commands =
      CommandRing::Create(device, std::max(1, options.inflight_batches), options.wrap_command_list);
  if (!commands.ok()) return commands.status();
  parts->commands = std::move(*commands);
  parts->health = std::make_unique<DeviceHealth>(options.name);
  parts->faults =
      std::make_unique<FaultInjector>(ResolveFailAfterBatches(options.fail_after_batches));

  // Made now, not on the first batch, so that batches create nothing the
  // pool or rings do not account for.
  constexpr uint64_t kUnboundBytes = 256;
  absl::StatusOr<PooledBuffer> unbound_srv = parts->pool->Acquire(kUnboundBytes);
  if (!unbound_srv.ok()) return unbound_srv.status();
  parts->unbound_srv = std::move(*unbound_srv);
  absl::StatusOr<PooledBuffer> unbound_uav = parts->pool->Acquire(kUnboundBytes);
  if (!unbound_uav.ok()) return unbound_uav.status();
  parts->unbound_uav = std::move(*unbound_uav);
  parts->creations_at_start = parts->factory->creations();
  parts->batch_timeout_ms = options.batch_timeout_ms;

  PlanExecutorParts executor_parts;
  executor_parts.device = device.get();
  executor_parts.commands = parts->commands.get();
  executor_parts.uploads = parts->uploads.get();
  executor_parts.readbacks = parts->readbacks;
  executor_parts.pool = parts->pool.get();
  executor_parts.residents = parts->residents.get();
  executor_parts.pipelines = parts->pipelines.get();
  executor_parts.health = parts->health.get();
  executor_parts.faults = parts->faults.get();
  executor_parts.unbound_srv = &parts->unbound_srv;
  executor_parts.unbound_uav = &parts->unbound_uav;
  executor_parts.batch_timeout_ms = options.batch_timeout_ms;
  parts->executor = std::make_unique<PlanExecutor>(executor_parts);
  return std::unique_ptr<DeviceRuntime>(new DeviceRuntime(std::move(parts)));
}

DeviceRuntime::DeviceRuntime(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

DeviceRuntime::~DeviceRuntime() {
  // Normally idle already (every batch waits for its fence), but a batch
  // that failed after submitting may have left work that still uses the
  // buffers about to be destroyed. A lost device gets only a short wait; if
  // its queue is still busy then (a batch past the hung-device timeout),
  // everything waits for it on the release thread (release_when_idle.h).
  constexpr uint32_t kLostDeviceWaitMs = 1000;
  const uint32_t wait_ms = parts_->health->status().ok()
                               ? parts_->batch_timeout_ms
                               : std::min(parts_->batch_timeout_ms, kLostDeviceWaitMs);
  if (parts_->commands->WaitIdle(wait_ms).ok()) return;  // parts_ goes now
  const CommandRing* commands = parts_->commands.get();
  ReleaseWhenIdle(std::shared_ptr<Parts>(std::move(parts_)),
                  [commands] { return commands->Idle(); });
}

absl::StatusOr<ReadBackBuffers> DeviceRuntime::Run(const DispatchPlan& plan) {
  return parts_->executor->Run(plan);
}

absl::Status DeviceRuntime::health() const { return parts_->health->status(); }

bool DeviceRuntime::IsResident(absl::string_view registered_id) const {
  return parts_->residents->IsResident(registered_id);
}

void DeviceRuntime::Evict(absl::string_view registered_id) {
  parts_->residents->Evict(registered_id);
}

uint64_t DeviceRuntime::memory_bytes() const {
  return parts_->pool->memory_bytes() + parts_->readbacks->memory_bytes() +
         parts_->uploads->memory_bytes();
}

uint64_t DeviceRuntime::resident_bytes() const { return parts_->residents->resident_bytes(); }

RuntimeStats DeviceRuntime::stats() const {
  RuntimeStats stats;
  stats.buffers_created = parts_->factory->creations() - parts_->creations_at_start;
  stats.resident_uploads = parts_->residents->uploads();
  stats.submissions = parts_->commands->submissions();
  stats.dispatch_ns = parts_->commands->dispatch_ns();
  stats.timed_batches = parts_->commands->timed_batches();
  stats.copy_in_ns = parts_->executor->copy_in_ns();
  stats.record_ns = parts_->executor->record_ns();
  stats.submit_ns = parts_->executor->submit_ns();
  stats.wait_ns = parts_->executor->wait_ns();
  stats.pipelines = parts_->pipelines->size();
  stats.memory_bytes = memory_bytes();
  return stats;
}

int DeviceRuntime::max_inflight_batches() const { return parts_->commands->context_count(); }

}  // namespace dmlserve::d3d12

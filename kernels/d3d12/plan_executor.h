#ifndef DMLSERVE_KERNELS_D3D12_PLAN_EXECUTOR_H_
#define DMLSERVE_KERNELS_D3D12_PLAN_EXECUTOR_H_

// Runs one DispatchPlan on one device: the plan's buffers come from the pool
// (or stay resident), its uploads go through the upload ring, and ONE command
// list holds the copies in, the dispatches with their state transitions and
// UAV barriers, and the copy out into a pooled readback buffer. The batch
// waits for its own fence and returns the outputs: those of 1 MiB or more as
// Buffers that borrow that readback memory (no CPU copy out; the readback
// buffer goes back to its pool when the last of them is dropped), smaller
// ones as pooled copies. Knows nothing about operators.
// Thread-safe: each concurrent Run holds its own command context.
//
// Errors: a plan that breaks the DispatchPlan contract is INVALID_ARGUMENT,
// a kernel that does not build INTERNAL; neither harms the device. A lost
// device (real or injected) is UNAVAILABLE and is recorded in DeviceHealth.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/d3d12/command_ring.h"
#include "kernels/d3d12/d3d12_api.h"
#include "kernels/d3d12/device_health.h"
#include "kernels/d3d12/fault_injection.h"
#include "kernels/d3d12/gpu_buffer_pool.h"
#include "kernels/d3d12/pipeline_cache.h"
#include "kernels/d3d12/resident_tensors.h"
#include "kernels/d3d12/shaders/dispatch_plan.h"
#include "kernels/d3d12/upload_ring.h"

namespace dmlserve::d3d12 {

// What a plan runs on; all owned by the device (DeviceRuntime).
struct PlanExecutorParts {
  ID3D12Device* device = nullptr;
  CommandRing* commands = nullptr;
  UploadRing* uploads = nullptr;
  GpuBufferPool* pool = nullptr;
  // Readback buffers outlive the device while callers hold outputs.
  std::shared_ptr<GpuBufferPool> readbacks;
  ResidentTensors* residents = nullptr;
  PipelineCache* pipelines = nullptr;
  DeviceHealth* health = nullptr;
  FaultInjector* faults = nullptr;
  // Bound to root SRV / UAV slots a dispatch leaves unbound, so every root
  // descriptor always points at memory.
  const PooledBuffer* unbound_srv = nullptr;
  const PooledBuffer* unbound_uav = nullptr;
  uint32_t batch_timeout_ms = 60000;
};

// Checks what the executor relies on: sizes and offsets multiples of 4,
// bindings in range, host bytes present and long enough, group counts within
// D3D12's limit, no buffer both read and written by one dispatch, resident
// and upload buffers never written, outputs never read (a batch's uploads
// share one resource, its outputs another: one copy in and one copy out).
absl::Status ValidatePlan(const DispatchPlan& plan);

class PlanExecutor {
 public:
  explicit PlanExecutor(const PlanExecutorParts& parts);
  // Frees abandoned batches: destroy only once the queue is idle (the owner,
  // DeviceRuntime, waits for it or leaves that to release_when_idle.h).
  ~PlanExecutor();

  // The read-back kOutput buffers: what DispatchPlan::finish takes.
  absl::StatusOr<ReadBackBuffers> Run(const DispatchPlan& plan);

  // CPU time spent copying host bytes into the upload ring, summed over
  // batches (nanoseconds).
  uint64_t copy_in_ns() const { return copy_in_ns_.load(std::memory_order_relaxed); }
  // Wall time of a batch's phases, summed over batches (nanoseconds):
  // from Run's start to submission (buffers, copies in, recording, and any
  // wait for a free command context or upload ring space), the
  // submission itself (close, ExecuteCommandLists, Signal), and the wait for
  // the fence. Their sum less the GPU time is the fixed cost of a batch.
  uint64_t record_ns() const { return record_ns_.load(std::memory_order_relaxed); }
  uint64_t submit_ns() const { return submit_ns_.load(std::memory_order_relaxed); }
  uint64_t wait_ns() const { return wait_ns_.load(std::memory_order_relaxed); }

 private:
  struct AbandonedBatch;

  // `failure` happened on the device: was the device lost with it?
  absl::Status DeviceFailure(const absl::Status& failure);

  // A batch whose fence did not arrive (a hung device, marked lost) may
  // still be running: under vkd3d nothing stops it (lavapipe computes on, a
  // real GPU's driver may take a while to reset). Returning its buffers to
  // the pool would let the pool destroy them (beyond its idle limit) or lend
  // them to a batch running concurrently, and the late batch would then
  // write into freed memory or another batch's outputs. So the batch's
  // memory stays here, unused, until the executor goes: the device is lost,
  // so that is when D3D12Device::Recover replaces its runtime, whose
  // destructor waits for the queue first. What other batches wait for goes
  // back at once: the resident forms it was uploading
  // (ResidentTensors::Abandoned) and its space in the upload ring.
  void Abandon(AbandonedBatch batch);

  PlanExecutorParts parts_;
  std::atomic<uint64_t> copy_in_ns_{0};
  std::atomic<uint64_t> record_ns_{0}, submit_ns_{0}, wait_ns_{0};
  std::mutex abandoned_mutex_;
  std::vector<std::unique_ptr<AbandonedBatch>> abandoned_;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_PLAN_EXECUTOR_H_

#ifndef DMLSERVE_KERNELS_D3D12_DEVICE_RUNTIME_H_
#define DMLSERVE_KERNELS_D3D12_DEVICE_RUNTIME_H_

// Everything one logical D3D12 device owns, put together: its queue and
// command ring, upload ring, buffer pools, resident tensors, pipeline cache
// and health, and the executor that runs plans on them. Operator-agnostic
// (D3D12Device adds the planner and the dmlserve::Device interface), and
// free of the rest of dmlserve, so that it also builds for Windows with
// mingw-w64 on its own.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/d3d12/com_ptr.h"
#include "kernels/d3d12/command_ring.h"
#include "kernels/d3d12/d3d12_api.h"
#include "kernels/d3d12/kernel_library.h"
#include "kernels/d3d12/shaders/dispatch_plan.h"

namespace dmlserve::d3d12 {

// Batches in flight on one queue by default. A batch through vkd3d carries a
// fixed latency (recording, submission, the fence's completion reaching the
// waiting thread: ~130 us on an H100 for ~12 us of GPU work), which batches
// in flight overlap: on the shared-B load the H100 served 36-38k req/s with
// 2, 46-50k with 4 and 40-48k with 8 (docs/benchmarks.md, 2026-11-27).
inline constexpr int kDefaultInflightBatches = 4;

struct RuntimeOptions {
  std::string name = "d3d12:0";  // for error messages
  // Command contexts: batches in flight on the queue.
  int inflight_batches = kDefaultInflightBatches;
  int fail_after_batches = -1;  // fault injection (fault_injection.h)
  // A batch whose fence has not completed after this long means a hung device.
  uint32_t batch_timeout_ms = 60000;
  // Starting size of the upload ring; it grows to the largest batch.
  uint64_t upload_ring_initial_bytes = uint64_t{1} << 20;
  // Idle pooled buffers kept for reuse beyond this are freed (per pool: GPU
  // memory and readback memory).
  uint64_t pool_max_idle_bytes = uint64_t{512} << 20;
  // Tools only (bench/d3d12_report.cc): what batches record into instead of
  // the command lists themselves (see CommandListWrapper). Empty in serving.
  CommandListWrapper wrap_command_list;
};

// Counters for tests and diagnostics.
struct RuntimeStats {
  uint64_t buffers_created = 0;  // every resource the device made after creation
  uint64_t resident_uploads = 0;
  uint64_t submissions = 0;
  // GPU time from each batch's first dispatch to the end of its last
  // (timestamp queries), summed, and the batches it covers (0 where the
  // queue has no timestamps).
  uint64_t dispatch_ns = 0;
  uint64_t timed_batches = 0;
  // CPU time copying host bytes into the upload ring. (Outputs are lent
  // from readback memory, not copied.)
  uint64_t copy_in_ns = 0;
  // Wall time of each phase of a batch, summed (PlanExecutor::record_ns()).
  uint64_t record_ns = 0;
  uint64_t submit_ns = 0;
  uint64_t wait_ns = 0;
  size_t pipelines = 0;
  uint64_t memory_bytes = 0;
};

class DeviceRuntime {
 public:
  // `device` may be shared with other logical devices on the same adapter.
  static absl::StatusOr<std::unique_ptr<DeviceRuntime>> Create(
      ComPtr<ID3D12Device> device, std::shared_ptr<KernelLibrary> kernels,
      const RuntimeOptions& options);
  ~DeviceRuntime();

  // Runs `plan` and returns its outputs (see PlanExecutor::Run); does not call
  // plan.finish. Thread-safe.
  absl::StatusOr<ReadBackBuffers> Run(const DispatchPlan& plan);

  // OK, or why the device was lost. Once lost, Run fails at once.
  absl::Status health() const;

  bool IsResident(absl::string_view registered_id) const;
  void Evict(absl::string_view registered_id);

  // Memory held: pooled (GPU and readback) and resident buffers, the upload
  // ring. Readback buffers lent out with outputs count until returned.
  uint64_t memory_bytes() const;
  // Of which registered tensors' resident forms.
  uint64_t resident_bytes() const;
  RuntimeStats stats() const;
  int max_inflight_batches() const;

 private:
  struct Parts;
  explicit DeviceRuntime(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_DEVICE_RUNTIME_H_

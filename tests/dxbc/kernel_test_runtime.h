#ifndef DMLSERVE_TESTS_DXBC_KERNEL_TEST_RUNTIME_H_
#define DMLSERVE_TESTS_DXBC_KERNEL_TEST_RUNTIME_H_

// Runs planned batches on the real D3D12 runtime (vkd3d + lavapipe here) with
// the production kernels, for the kernel tests. Fails (never skips) when no
// software adapter exists.

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/backend/device.h"
#include "kernels/d3d12/shaders/batch_planner.h"

namespace dmlserve::d3d12::testing {

class KernelTestRuntime {
 public:
  // One runtime per process (device creation costs ~100 ms on lavapipe).
  static absl::StatusOr<KernelTestRuntime*> Get();

  // PlanBatch + run + finish; per-item statuses stay in the items.
  absl::Status Run(absl::Span<WorkItem> items, const PlannerOptions& options = {});

 private:
  struct Impl;
  explicit KernelTestRuntime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dmlserve::d3d12::testing

#endif  // DMLSERVE_TESTS_DXBC_KERNEL_TEST_RUNTIME_H_

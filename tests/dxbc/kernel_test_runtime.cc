#include "tests/dxbc/kernel_test_runtime.h"

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/d3d12/adapter_enumeration.h"
#include "kernels/d3d12/device_runtime.h"
#include "kernels/d3d12/kernel_library.h"
#include "kernels/d3d12/shaders/kernel_abi.h"
#include "tests/d3d12/runtime_test_util.h"

namespace dmlserve::d3d12::testing {

struct KernelTestRuntime::Impl {
  std::unique_ptr<DeviceRuntime> runtime;
};

KernelTestRuntime::KernelTestRuntime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<KernelTestRuntime*> KernelTestRuntime::Get() {
  static std::mutex mutex;
  static KernelTestRuntime* instance = nullptr;
  static absl::Status failure;
  std::lock_guard<std::mutex> lock(mutex);
  if (instance != nullptr) return instance;
  if (!failure.ok()) return failure;
  // lavapipe, or the adapter DMLSERVE_TEST_D3D12_ADAPTER names (a real GPU).
  absl::StatusOr<AdapterInfo> adapter = TestAdapter();
  if (!adapter.ok()) return failure = adapter.status();
  absl::StatusOr<ComPtr<ID3D12Device>> device = CreateAdapterDevice(adapter->index);
  if (!device.ok()) return failure = device.status();
  auto library =
      std::make_shared<KernelLibrary>([](const KernelKey& key) { return BuildKernel(key); });
  RuntimeOptions options;
  options.name = "d3d12:kernel-test";
  absl::StatusOr<std::unique_ptr<DeviceRuntime>> runtime =
      DeviceRuntime::Create(std::move(*device), std::move(library), options);
  if (!runtime.ok()) return failure = runtime.status();
  auto impl = std::make_unique<Impl>();
  impl->runtime = std::move(*runtime);
  instance = new KernelTestRuntime(std::move(impl));
  return instance;
}

absl::Status KernelTestRuntime::Run(absl::Span<WorkItem> items, const PlannerOptions& options) {
  absl::StatusOr<DispatchPlan> plan = PlanBatch(items, options);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<ReadBackBuffers> outputs = impl_->runtime->Run(*plan);
  if (!outputs.ok()) return outputs.status();
  return plan->finish(*outputs);
}

}  // namespace dmlserve::d3d12::testing

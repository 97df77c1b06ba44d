// The D3D12 runtime on Windows: a self-contained program (no test framework,
// no Abseil beyond ../absl_subset) that the cross-build compiles with
// mingw-w64 and that runs on Windows, or under wine + xvfb-run. It runs the
// test kernels (tests/d3d12/testdata) through plans on the first adapter
// (or DMLSERVE_ADAPTER) and checks the results, residency and fault
// injection. Exit code 0 when every check passes.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "embedded_test_kernels.inc"
#include "kernels/d3d12/adapter_enumeration.h"
#include "kernels/d3d12/device_runtime.h"
#include "kernels/d3d12/kernel_library.h"

namespace dmlserve::d3d12 {
namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
  if (!ok) ++failures;
}

KernelBuilder EmbeddedKernels() {
  return [](const KernelKey& key) -> absl::StatusOr<std::vector<uint8_t>> {
    if (key == "test/add_u32") {
      return std::vector<uint8_t>(std::begin(k_add_u32_dxbc), std::end(k_add_u32_dxbc));
    }
    if (key == "test/accumulate_u32") {
      return std::vector<uint8_t>(std::begin(k_accumulate_u32_dxbc),
                                  std::end(k_accumulate_u32_dxbc));
    }
    return absl::NotFoundError("no test kernel " + key);
  };
}

std::vector<uint32_t> RandomWords(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> words(n);
  for (uint32_t& word : words) word = rng();
  return words;
}

BufferSpec Host(BufferKind kind, const std::vector<uint32_t>& values, const std::string& key) {
  BufferSpec spec;
  spec.kind = kind;
  spec.size_bytes = values.size() * 4;
  std::shared_ptr<Buffer> bytes = Buffer::Uninitialized(spec.size_bytes);
  std::memcpy(bytes->data(), values.data(), spec.size_bytes);
  spec.host_bytes = bytes;
  spec.resident_key = key;
  return spec;
}

BufferSpec Device(BufferKind kind, size_t words) {
  BufferSpec spec;
  spec.kind = kind;
  spec.size_bytes = words * 4;
  return spec;
}

Dispatch Kernel(const char* key, BufferId srv0, BufferId srv1, BufferId uav0, uint32_t n,
                uint32_t bias) {
  Dispatch dispatch;
  dispatch.kernel = key;
  dispatch.constants[0] = n;
  dispatch.constants[1] = bias;
  dispatch.srvs[0].buffer = srv0;
  dispatch.srvs[1].buffer = srv1;
  dispatch.uavs[0].buffer = uav0;
  dispatch.groups_x = (n + 63) / 64;
  return dispatch;
}

std::vector<uint32_t> Words(const std::string& bytes) {
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), words.size() * 4);
  return words;
}

// out = a + b + 5
bool RunAdd(DeviceRuntime& runtime, BufferSpec a_spec, const std::vector<uint32_t>& a,
            const std::vector<uint32_t>& b, std::string* error) {
  DispatchPlan plan;
  plan.buffers = {std::move(a_spec), Host(BufferKind::kUpload, b, ""),
                  Device(BufferKind::kOutput, a.size())};
  plan.dispatches = {Kernel("test/add_u32", 0, 1, 2, static_cast<uint32_t>(a.size()), 5)};
  absl::StatusOr<std::vector<std::string>> outputs = runtime.Run(plan);
  if (!outputs.ok()) {
    *error = std::string(outputs.status().message());
    return false;
  }
  std::vector<uint32_t> out = Words((*outputs)[2]);
  for (size_t i = 0; i < a.size(); ++i) {
    if (out[i] != a[i] + b[i] + 5) {
      *error = "wrong value at " + std::to_string(i);
      return false;
    }
  }
  return true;
}

int Main() {
  absl::StatusOr<std::vector<AdapterInfo>> adapters = EnumerateAdapters();
  if (!adapters.ok()) {
    std::printf("FAIL EnumerateAdapters: %s\n", std::string(adapters.status().message()).c_str());
    return 1;
  }
  for (const AdapterInfo& adapter : *adapters) {
    std::printf("adapter %d: %s (vendor 0x%04x, device 0x%04x)%s\n", adapter.index,
                adapter.name.c_str(), adapter.vendor_id, adapter.device_id,
                adapter.software ? " [software]" : "");
  }
  Check(!adapters->empty(), "at least one D3D12 adapter");
  if (adapters->empty()) return 1;
  const char* chosen = std::getenv("DMLSERVE_ADAPTER");
  int index = chosen != nullptr ? std::atoi(chosen) : 0;
  absl::StatusOr<ComPtr<ID3D12Device>> device = CreateAdapterDevice(index);
  Check(device.ok(), "create a device on adapter " + std::to_string(index) +
                         (device.ok() ? "" : ": " + std::string(device.status().message())));
  if (!device.ok()) return 1;
  auto kernels = std::make_shared<KernelLibrary>(EmbeddedKernels());

  RuntimeOptions options;
  absl::StatusOr<std::unique_ptr<DeviceRuntime>> runtime =
      DeviceRuntime::Create(*device, kernels, options);
  Check(runtime.ok(), "create the runtime");
  if (!runtime.ok()) return 1;

  std::string error;
  std::vector<uint32_t> a = RandomWords(10000, 1), b = RandomWords(10000, 2);
  Check(RunAdd(**runtime, Host(BufferKind::kUpload, a, ""), a, b, &error), "add " + error);

  // Dependent dispatches: acc = 0 + a + b (UAV barrier between), out = acc + b + 5.
  {
    DispatchPlan plan;
    const uint32_t n = 4096;
    plan.buffers = {Host(BufferKind::kUpload, a, ""), Host(BufferKind::kUpload, b, ""),
                    Device(BufferKind::kZeroed, n), Device(BufferKind::kOutput, n)};
    for (BufferId in : {0u, 1u}) {
      Dispatch accumulate = Kernel("test/accumulate_u32", in, BufferBinding::kUnbound, 2, n, 0);
      accumulate.barrier_after = true;
      plan.dispatches.push_back(accumulate);
    }
    plan.dispatches.push_back(Kernel("test/add_u32", 2, 1, 3, n, 5));
    absl::StatusOr<std::vector<std::string>> outputs = (*runtime)->Run(plan);
    bool ok = outputs.ok();
    if (ok) {
      std::vector<uint32_t> out = Words((*outputs)[3]);
      for (uint32_t i = 0; i < n && ok; ++i) ok = out[i] == a[i] + 2 * b[i] + 5;
    }
    Check(ok, "barriers and transitions between dependent dispatches");
  }

  // Residency: the second batch must use the first batch's upload.
  std::vector<uint32_t> other = RandomWords(10000, 3);
  Check(RunAdd(**runtime, Host(BufferKind::kResident, a, "w/form"), a, b, &error),
        "resident upload " + error);
  Check(RunAdd(**runtime, Host(BufferKind::kResident, other, "w/form"), a, b, &error),
        "resident reuse " + error);
  Check((*runtime)->stats().resident_uploads == 1, "one resident upload");
  Check((*runtime)->IsResident("w"), "IsResident");

  // Steady state: once a shape has run (after the resident buffer took one
  // of its pooled buffers), running it again creates nothing.
  Check(RunAdd(**runtime, Host(BufferKind::kUpload, a, ""), a, b, &error), "warm-up " + error);
  const uint64_t created = (*runtime)->stats().buffers_created;
  bool all_ok = true;
  for (int i = 0; i < 5; ++i) {
    all_ok = RunAdd(**runtime, Host(BufferKind::kUpload, a, ""), a, b, &error) && all_ok;
  }
  Check(all_ok, "repeated batches " + error);
  Check((*runtime)->stats().buffers_created == created, "no buffer creation in the steady state");

  // Fault injection.
  options.fail_after_batches = 1;
  absl::StatusOr<std::unique_ptr<DeviceRuntime>> failing =
      DeviceRuntime::Create(*device, kernels, options);
  Check(failing.ok(), "create a failing runtime");
  if (failing.ok()) {
    Check(RunAdd(**failing, Host(BufferKind::kUpload, a, ""), a, b, &error), "first batch");
    bool second = RunAdd(**failing, Host(BufferKind::kUpload, a, ""), a, b, &error);
    Check(!second && error.find("DXGI_ERROR_DEVICE_REMOVED") != std::string::npos,
          "injected removal: " + error);
    Check(!(*failing)->health().ok(), "device lost after the injected removal");
  }

  std::printf("%s (%d failed)\n", failures == 0 ? "ALL PASSED" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace dmlserve::d3d12

int main() { return dmlserve::d3d12::Main(); }

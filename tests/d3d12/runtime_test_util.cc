#include "tests/d3d12/runtime_test_util.h"

#include <cstdlib>
#include <cstring>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/d3d12/test_kernels.h"

namespace dmlserve::d3d12::testing {

absl::StatusOr<AdapterInfo> TestAdapter() {
  absl::StatusOr<std::vector<AdapterInfo>> adapters = EnumerateAdapters();
  if (!adapters.ok()) return adapters.status();
  if (const char* chosen = std::getenv("DMLSERVE_TEST_D3D12_ADAPTER"); chosen != nullptr) {
    int index = -1;
    if (!absl::SimpleAtoi(chosen, &index)) {
      return absl::InvalidArgumentError(
          absl::StrCat("DMLSERVE_TEST_D3D12_ADAPTER=", chosen, " is not an adapter index"));
    }
    for (const AdapterInfo& adapter : *adapters) {
      if (adapter.index == index) return adapter;
    }
    return absl::NotFoundError(absl::StrCat("DMLSERVE_TEST_D3D12_ADAPTER=", chosen, ": only ",
                                            adapters->size(), " adapters"));
  }
  for (const AdapterInfo& adapter : *adapters) {
    if (adapter.software) return adapter;
  }
  return absl::NotFoundError(
      "no software D3D12 adapter (lavapipe): install mesa-vulkan-drivers and libvulkan1");
}

std::shared_ptr<const Buffer> HostBytes(const std::vector<uint32_t>& values) {
  return Buffer::Copy(
      absl::string_view(reinterpret_cast<const char*>(values.data()), values.size() * 4));
}

std::vector<uint32_t> Words(absl::string_view bytes) {
  std::vector<uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), words.size() * 4);
  return words;
}

BufferSpec UploadBuffer(const std::vector<uint32_t>& values) {
  BufferSpec spec;
  spec.kind = BufferKind::kUpload;
  spec.size_bytes = values.size() * 4;
  spec.host_bytes = HostBytes(values);
  return spec;
}

BufferSpec ResidentBuffer(const std::string& key, const std::vector<uint32_t>& values,
                          std::atomic<int>* made) {
  BufferSpec spec;
  spec.kind = BufferKind::kResident;
  spec.size_bytes = values.size() * 4;
  spec.resident_key = key;
  spec.make_resident_bytes = [bytes = HostBytes(values), made]() -> std::shared_ptr<const Buffer> {
    if (made != nullptr) ++*made;
    return bytes;
  };
  return spec;
}

BufferSpec DeviceBuffer(BufferKind kind, uint64_t words) {
  BufferSpec spec;
  spec.kind = kind;
  spec.size_bytes = words * 4;
  return spec;
}

Dispatch AddDispatch(BufferId a, BufferId b, BufferId out, uint32_t n, uint32_t bias) {
  Dispatch dispatch;
  dispatch.kernel = kAddKernel;
  dispatch.constants[0] = n;
  dispatch.constants[1] = bias;
  dispatch.srvs[0].buffer = a;
  dispatch.srvs[1].buffer = b;
  dispatch.uavs[0].buffer = out;
  dispatch.groups_x = (n + kTestKernelGroupSize - 1) / kTestKernelGroupSize;
  return dispatch;
}

Dispatch AccumulateDispatch(BufferId in, BufferId acc, uint32_t n) {
  Dispatch dispatch;
  dispatch.kernel = kAccumulateKernel;
  dispatch.constants[0] = n;
  dispatch.srvs[0].buffer = in;
  dispatch.uavs[0].buffer = acc;
  dispatch.groups_x = (n + kTestKernelGroupSize - 1) / kTestKernelGroupSize;
  return dispatch;
}

std::vector<uint32_t> RandomWords(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint32_t> words(n);
  for (uint32_t& word : words) word = rng();
  return words;
}

}  // namespace dmlserve::d3d12::testing

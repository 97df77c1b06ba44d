#ifndef DMLSERVE_TESTS_D3D12_RUNTIME_TEST_UTIL_H_
#define DMLSERVE_TESTS_D3D12_RUNTIME_TEST_UTIL_H_

// Helpers for tests that drive the D3D12 runtime with the test kernels.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/d3d12/adapter_enumeration.h"
#include "kernels/d3d12/shaders/dispatch_plan.h"

namespace dmlserve::d3d12::testing {

// The adapter the D3D12 tests run on: the first software adapter (lavapipe,
// as in CI) unless DMLSERVE_TEST_D3D12_ADAPTER names another by index (as
// `dmlserve --devices` counts them), to run the same suite on a real GPU.
// An error, never a skip, when there is none: the D3D12 tests must fail
// loudly on a machine without Vulkan/lavapipe.
absl::StatusOr<AdapterInfo> TestAdapter();

std::shared_ptr<const Buffer> HostBytes(const std::vector<uint32_t>& values);
std::vector<uint32_t> Words(absl::string_view bytes);

BufferSpec UploadBuffer(const std::vector<uint32_t>& values);
// `made`, when given, counts the calls of its make_resident_bytes.
BufferSpec ResidentBuffer(const std::string& key, const std::vector<uint32_t>& values,
                          std::atomic<int>* made = nullptr);
BufferSpec DeviceBuffer(BufferKind kind, uint64_t words);

// u[out] = a + b + bias over `n` words (kAddKernel).
Dispatch AddDispatch(BufferId a, BufferId b, BufferId out, uint32_t n, uint32_t bias);
// u[acc] += t[in] over `n` words (kAccumulateKernel).
Dispatch AccumulateDispatch(BufferId in, BufferId acc, uint32_t n);

// A random vector of `n` words from `seed`.
std::vector<uint32_t> RandomWords(size_t n, uint32_t seed);

}  // namespace dmlserve::d3d12::testing

#endif  // DMLSERVE_TESTS_D3D12_RUNTIME_TEST_UTIL_H_

#ifndef DMLSERVE_KERNELS_D3D12_KERNEL_LIBRARY_H_
#define DMLSERVE_KERNELS_D3D12_KERNEL_LIBRARY_H_

// Kernel bytecode (DXBC) by KernelKey, built once per process and shared by
// every device's pipeline cache.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/d3d12/shaders/kernel_abi.h"

namespace dmlserve::d3d12 {

// Where DXBC comes from: BuildKernel in production, test kernels in tests.
using KernelBuilder = std::function<absl::StatusOr<std::vector<uint8_t>>(const KernelKey&)>;

// Thread-safe.
class KernelLibrary {
 public:
  explicit KernelLibrary(KernelBuilder builder) : builder_(std::move(builder)) {}

  // INTERNAL (naming the key) when the builder fails.
  absl::StatusOr<std::shared_ptr<const std::vector<uint8_t>>> Get(const KernelKey& key);

  size_t size() const;

 private:
  KernelBuilder builder_;
  mutable std::mutex mutex_;
  std::map<KernelKey, std::shared_ptr<const std::vector<uint8_t>>> built_;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_KERNEL_LIBRARY_H_

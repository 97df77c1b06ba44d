#include "kernels/d3d12/kernel_library.h"

#include "absl/strings/str_cat.h"

namespace dmlserve::d3d12 {

absl::StatusOr<std::shared_ptr<const std::vector<uint8_t>>> KernelLibrary::Get(
    const KernelKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = built_.find(key);
  if (it != built_.end()) return it->second;
  absl::StatusOr<std::vector<uint8_t>> dxbc = builder_(key);
  if (!dxbc.ok()) {
    return absl::InternalError(
        absl::StrCat("building kernel '", key, "': ", dxbc.status().message()));
  }
  auto shared = std::make_shared<const std::vector<uint8_t>>(std::move(*dxbc));
  built_.emplace(key, shared);
  return shared;
}

size_t KernelLibrary::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return built_.size();
}

}  // namespace dmlserve::d3d12

#include "kernels/d3d12/shaders/kernel_registry.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/d3d12/shaders/kernel_abi.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"
#include "kernels/d3d12/shaders/scan_kernels.h"

namespace dmlserve::d3d12 {

// Kernels are generated on demand: assembling one takes microseconds, and the
// runtime caches the pipeline state built from it by key.
absl::StatusOr<std::vector<uint8_t>> BuildKernel(const KernelKey& key) {
  if (absl::StartsWith(key, "scan.")) {
    absl::StatusOr<ScanKernelSpec> spec = ScanKernelSpec::Parse(key);
    if (!spec.ok()) return spec.status();
    return BuildScanKernel(*spec);
  }
  if (absl::StartsWith(key, "qmm.")) {
    return BuildQuantizedMatMulKernelForKey(key);
  }
  return absl::NotFoundError(absl::StrCat("unknown kernel key: ", key));
}

std::vector<KernelKey> AllKernelKeys() {
  std::vector<KernelKey> keys;
  for (const ScanKernelSpec& spec : AllScanKernelSpecs()) keys.push_back(spec.Key());
  for (std::string& key : AllQuantizedMatMulKernelKeys()) keys.push_back(std::move(key));
  return keys;
}

}  // namespace dmlserve::d3d12

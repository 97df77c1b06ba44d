#include "tests/d3d12/test_kernels.h"

#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/str_cat.h"

namespace dmlserve::d3d12::testing {
namespace {

absl::StatusOr<std::vector<uint8_t>> ReadTestData(const std::string& name) {
  std::string path = absl::StrCat(DMLSERVE_D3D12_TESTDATA_DIR, "/", name);
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(file),
                              std::istreambuf_iterator<char>());
}

}  // namespace

KernelBuilder TestKernelBuilder() {
  return [](const KernelKey& key) -> absl::StatusOr<std::vector<uint8_t>> {
    if (key == kAddKernel) return ReadTestData("add_u32.dxbc");
    if (key == kAccumulateKernel) return ReadTestData("accumulate_u32.dxbc");
    return absl::NotFoundError(absl::StrCat("no test kernel '", key, "'"));
  };
}

std::shared_ptr<KernelLibrary> TestKernelLibrary() {
  return std::make_shared<KernelLibrary>(TestKernelBuilder());
}

}  // namespace dmlserve::d3d12::testing

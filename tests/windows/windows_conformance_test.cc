// The whole D3D12 backend on Windows: CreateD3D12Devices with the product
// kernels and planner runs every conformance example
// (tests/conformance/*.json) and must reproduce it exactly. Self-contained
// (no test framework); built by the mingw-w64 cross-build and run on Windows
// or under wine + xvfb-run.
//
//   d3d12_windows_conformance_test.exe <conformance dir>
//
// DMLSERVE_ADAPTER picks the adapter (default: every adapter, software ones
// included). Exit code 0 when every case matches.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/d3d12/d3d12_backend.h"
#include "tests/reference/conformance.h"
#include "tests/reference/reference.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <conformance dir>\n", argv[0]);
    return 2;
  }
  absl::StatusOr<std::vector<dmlserve::reference::ConformanceCase>> cases =
      dmlserve::reference::LoadConformanceCases(argv[1]);
  if (!cases.ok()) {
    std::printf("FAIL loading %s: %s\n", argv[1], std::string(cases.status().message()).c_str());
    return 1;
  }
  dmlserve::D3D12Options options;
  options.allow_software = true;
  if (const char* adapter = std::getenv("DMLSERVE_ADAPTER")) {
    options.adapter_indices = {std::atoi(adapter)};
  }
  absl::StatusOr<std::vector<std::unique_ptr<dmlserve::Device>>> devices =
      dmlserve::CreateD3D12Devices(options);
  if (!devices.ok()) {
    std::printf("FAIL CreateD3D12Devices: %s\n", std::string(devices.status().message()).c_str());
    return 1;
  }
  int failures = 0;
  for (const auto& device : *devices) {
    std::printf("device %s: %s\n", device->description().name.c_str(),
                device->description().description.c_str());
    for (const dmlserve::reference::ConformanceCase& c : *cases) {
      dmlserve::WorkItem item;
      item.operation = &c.operation;
      absl::Status status = device->Execute(absl::MakeSpan(&item, 1));
      if (status.ok()) status = item.status;
      if (status.ok()) status = dmlserve::reference::CheckExact(c.expected, item.output);
      std::printf("%s %s/%s%s%s\n", status.ok() ? "PASS" : "FAIL", c.file.c_str(), c.name.c_str(),
                  status.ok() ? "" : ": ", std::string(status.message()).c_str());
      if (!status.ok()) ++failures;
    }
  }
  std::printf("%s (%d failed)\n", failures == 0 ? "ALL PASSED" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}

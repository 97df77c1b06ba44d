#ifndef DMLSERVE_TESTS_REFERENCE_CONFORMANCE_H_
#define DMLSERVE_TESTS_REFERENCE_CONFORMANCE_H_

// Loads the shared operator examples (tests/conformance/*.json) that every
// backend must reproduce exactly.

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve::reference {

struct ConformanceCase {
  std::string file;  // base name of the JSON file
  std::string name;
  Operation operation;  // validated through Make*Operation
  Tensor expected;
};

// $DMLSERVE_CONFORMANCE_DIR when set, else the directory given to CMake as
// DMLSERVE_CONFORMANCE_DIR.
std::string DefaultConformanceDirectory();

// Every case of every *.json file in `directory`, in file then case order.
// Fails on unreadable files, malformed cases or operations the validator
// rejects.
absl::StatusOr<std::vector<ConformanceCase>> LoadConformanceCases(
    const std::string& directory = DefaultConformanceDirectory());

// One file's cases.
absl::StatusOr<std::vector<ConformanceCase>> LoadConformanceFile(const std::string& path);

}  // namespace dmlserve::reference

#endif  // DMLSERVE_TESTS_REFERENCE_CONFORMANCE_H_

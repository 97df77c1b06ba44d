#ifndef DMLSERVE_TESTS_CLIENT_RUN_PROCESS_H_
#define DMLSERVE_TESTS_CLIENT_RUN_PROCESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dmlserve::client::testing {

struct ProcessResult {
  // The exit code, or 128 + the signal number when a signal ended it.
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `argv` (argv[0] is the program's path) to completion, capturing its
// stdout and stderr separately.
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv);

}  // namespace dmlserve::client::testing

#endif  // DMLSERVE_TESTS_CLIENT_RUN_PROCESS_H_

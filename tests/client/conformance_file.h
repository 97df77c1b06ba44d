#ifndef DMLSERVE_TESTS_CLIENT_CONFORMANCE_FILE_H_
#define DMLSERVE_TESTS_CLIENT_CONFORMANCE_FILE_H_

#include <string>
#include <vector>

#include "client/cli/json_request.h"

namespace dmlserve::client::testing {

// Every *.json file in the conformance directory, sorted by name.
std::vector<std::string> ConformanceFiles();

// The cases of every conformance file, as requests with their expected output.
std::vector<cli::FileRequest> LoadConformanceCases();

// The raw JSON of the first case of `file` whose "operator" is `op`.
cli::Json FirstCaseJson(const std::string& file, const std::string& op);

// The raw JSON of the first case of any conformance file whose "operator" is `op`.
cli::Json FirstCaseJsonOfAnyFile(const std::string& op);

std::string ReadTextFile(const std::string& path);

}  // namespace dmlserve::client::testing

#endif  // DMLSERVE_TESTS_CLIENT_CONFORMANCE_FILE_H_

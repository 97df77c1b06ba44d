#ifndef DMLSERVE_TESTS_SERVER_CONFORMANCE_CASES_H_
#define DMLSERVE_TESTS_SERVER_CONFORMANCE_CASES_H_

// The shared operator examples (tests/conformance/*.json) as API requests.

#include <string>
#include <vector>

#include "dmlserve/v1/dmlserve.pb.h"

namespace dmlserve::testing {

struct ConformanceCase {
  std::string name;
  std::string operator_name;
  v1::ExecuteRequest request;  // request_id = name
  v1::Tensor expected;
};

// Every case of every *.json file in `directory`, sorted by name. Records a
// test failure for a file it cannot read.
std::vector<ConformanceCase> LoadConformanceCases(const std::string& directory);

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SERVER_CONFORMANCE_CASES_H_

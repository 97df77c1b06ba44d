#ifndef DMLSERVE_TESTS_SERVER_MIXED_LOAD_H_
#define DMLSERVE_TESTS_SERVER_MIXED_LOAD_H_

#include <string>

#include "tests/server/test_requests.h"

namespace dmlserve::testing {

// `threads` clients, each on its own channel, send `requests_per_thread`
// unary calls to `address`, alternating random scans and matmuls against the
// registered weights `weights_id` (whose values are `weights`). Every answer
// is checked against the reference; each wrong or failed one is reported with
// ADD_FAILURE. Returns how many were wrong or failed.
int RunMixedLoad(const std::string& address, const QuantizedMatMulCase& weights,
                 const std::string& weights_id, int threads, int requests_per_thread);

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SERVER_MIXED_LOAD_H_

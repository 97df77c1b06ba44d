#ifndef DMLSERVE_CLIENT_CLI_EXPECTED_CHECK_H_
#define DMLSERVE_CLIENT_CLI_EXPECTED_CHECK_H_

#include "absl/status/status.h"
#include "client/cli/json_tensor.h"
#include "dmlserve/v1/dmlserve.pb.h"

namespace dmlserve::client::cli {

// OK when `output` matches a conformance case's "expected" tensor: same data
// type and sizes, integers bit for bit, floats within 1e-5 relative (the
// spec allows any association order for float sums). Otherwise ABORTED
// naming the first difference.
absl::Status CheckAgainstExpected(const v1::Tensor& output, const Json& expected);

}  // namespace dmlserve::client::cli

#endif  // DMLSERVE_CLIENT_CLI_EXPECTED_CHECK_H_

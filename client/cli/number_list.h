#ifndef DMLSERVE_CLIENT_CLI_NUMBER_LIST_H_
#define DMLSERVE_CLIENT_CLI_NUMBER_LIST_H_

// Comma-separated numbers as the CLI's flags take them: "--sizes 1,1,3,4",
// "--values 2,-1,0.5,nan".

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/cli/json_tensor.h"

namespace dmlserve::client::cli {

// Dimension sizes: whole numbers from 0 to 2^32-1.
absl::StatusOr<std::vector<uint32_t>> ParseSizes(absl::string_view text);

// Numbers as a JSON array, integers kept exact (64-bit included), so that
// ValuesToData applies the same checks as to request files. "" is empty.
absl::StatusOr<Json> ParseNumberList(absl::string_view text);

}  // namespace dmlserve::client::cli

#endif  // DMLSERVE_CLIENT_CLI_NUMBER_LIST_H_

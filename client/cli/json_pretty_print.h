#ifndef DMLSERVE_CLIENT_CLI_JSON_PRETTY_PRINT_H_
#define DMLSERVE_CLIENT_CLI_JSON_PRETTY_PRINT_H_

#include <string>

#include "client/cli/json_tensor.h"

namespace dmlserve::client::cli {

// Indented JSON in which arrays of scalars stay on one line, so that tensor
// sizes and values read as rows instead of one number per line.
std::string PrettyPrint(const Json& json, int indent = 2);

}  // namespace dmlserve::client::cli

#endif  // DMLSERVE_CLIENT_CLI_JSON_PRETTY_PRINT_H_

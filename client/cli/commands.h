#ifndef DMLSERVE_CLIENT_CLI_COMMANDS_H_
#define DMLSERVE_CLIENT_CLI_COMMANDS_H_

// The subcommands of dmlserve-cli. Each prints its result as JSON on stdout
// (health: one word) and returns the process exit code; errors go to stderr
// as "dmlserve-cli: CODE: message".

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace dmlserve::client::cli {

// The flag values; empty strings mean "not given".
struct CliSettings {
  std::string server;
  // TLS (all empty: plaintext): the server's CA, and this client's
  // certificate and key for a server that requires one.
  std::string tls_ca_file, tls_cert_file, tls_key_file;
  int64_t deadline_ms = 0;
  bool pretty = false;

  // cumsum, cumprod, register.
  std::string dtype;
  std::string sizes;
  std::string values;
  std::string id;
  uint32_t axis = 0;
  bool exclusive = false;
  bool reverse = false;
  std::string request_id;

  // qmatmul.
  std::string a_sizes, a_values, a_dtype, a_scale, a_zero_point, a_id;
  std::string b_sizes, b_values, b_dtype, b_scale, b_zero_point, b_id;
  std::string output_scale, output_zero_point, output_dtype;

  // run, register.
  std::string file;
  std::string case_name;
  bool check = false;
  bool stream = false;

  // health.
  std::string service;
};

// 0 for OK; 2 when the request itself is at fault (INVALID_ARGUMENT,
// OUT_OF_RANGE, NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION), which
// retrying will not fix; 1 otherwise.
int ExitCodeFor(absl::StatusCode code);

// Exit code 3: run --check found an output that differs from "expected".
inline constexpr int kCheckFailedExitCode = 3;

// `args` are the positional arguments after the subcommand name.
int RunSubcommand(const std::string& name, const std::vector<std::string>& args,
                  const CliSettings& settings);

}  // namespace dmlserve::client::cli

#endif  // DMLSERVE_CLIENT_CLI_COMMANDS_H_

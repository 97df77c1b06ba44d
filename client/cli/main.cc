// dmlserve-cli: runs dmlserve operators from the command line.

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#ifdef _WIN32
#include <windows.h>
#endif

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "client/cli/commands.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051",
          "dmlserve gRPC address: host:port; replicas host1:port,host2:port,... or "
          "dns:///name:port (calls round-robin, register/release reach every replica)");
// A call never waits forever on a server that stopped answering; large
// requests on a slow device may need more (0: no deadline).
ABSL_FLAG(int64_t, deadline_ms, 30000, "Per-call deadline in milliseconds (0: none)");
ABSL_FLAG(std::string, tls_ca_file, "",
          "Connect over TLS, trusting the CA certificates in this PEM file (a server started with "
          "--tls_cert_file)");
ABSL_FLAG(std::string, tls_cert_file, "",
          "This client's PEM certificate, for a server with --tls_client_ca_file (mutual TLS)");
ABSL_FLAG(std::string, tls_key_file, "", "The PEM private key of --tls_cert_file");
ABSL_FLAG(bool, pretty, false, "Indent the JSON output");

ABSL_FLAG(std::string, dtype, "FLOAT32", "cumsum/cumprod/register: element data type");
ABSL_FLAG(std::string, sizes, "",
          "cumsum/cumprod/register: dimension sizes, e.g. 1,1,3,4 (default: one dimension)");
ABSL_FLAG(std::string, values, "", "cumsum/cumprod/register: elements, row-major, e.g. 2,1,3");
ABSL_FLAG(std::string, id, "",
          "cumsum/cumprod: registered input tensor_id; register: id to give; release: id");
ABSL_FLAG(uint32_t, axis, 0, "cumsum/cumprod: dimension to scan");
ABSL_FLAG(bool, exclusive, false, "cumsum/cumprod: exclude each element from its own output");
ABSL_FLAG(bool, reverse, false, "cumsum/cumprod: scan from the last index down");
ABSL_FLAG(std::string, request_id, "", "cumsum/cumprod/qmatmul: request_id to send");

ABSL_FLAG(std::string, a_sizes, "", "qmatmul: A sizes, e.g. 1,1,2,3");
ABSL_FLAG(std::string, a_values, "", "qmatmul: A elements");
ABSL_FLAG(std::string, a_dtype, "UINT8", "qmatmul: A (and A zero point) data type");
ABSL_FLAG(std::string, a_scale, "", "qmatmul: A scale, one value or one per row of A");
ABSL_FLAG(std::string, a_zero_point, "", "qmatmul: A zero point, one value or one per row");
ABSL_FLAG(std::string, a_id, "", "qmatmul: registered tensor_id to use as A");
ABSL_FLAG(std::string, b_sizes, "", "qmatmul: B sizes, e.g. 1,1,3,2");
ABSL_FLAG(std::string, b_values, "", "qmatmul: B elements");
ABSL_FLAG(std::string, b_dtype, "UINT8", "qmatmul: B (and B zero point) data type");
ABSL_FLAG(std::string, b_scale, "", "qmatmul: B scale, one value or one per column of B");
ABSL_FLAG(std::string, b_zero_point, "", "qmatmul: B zero point, one value or one per column");
ABSL_FLAG(std::string, b_id, "", "qmatmul: registered tensor_id to use as B (e.g. weights)");
ABSL_FLAG(std::string, output_scale, "", "qmatmul: output scale, one value or one per row");
ABSL_FLAG(std::string, output_zero_point, "",
          "qmatmul: output zero point, one value or one per row");
ABSL_FLAG(std::string, output_dtype, "UINT8", "qmatmul: output (and output zero point) data type");

ABSL_FLAG(std::string, file, "",
          "run: request file (or give it as the argument); register: tensor JSON file "
          "{\"data_type\",\"sizes\",\"values\"}");
ABSL_FLAG(std::string, case_name, "", "run: only the case/request with this name or request_id");
ABSL_FLAG(bool, check, false,
          "run: compare outputs with the cases' \"expected\" tensors; exit code 3 on a mismatch");
ABSL_FLAG(bool, stream, false, "run: send over ExecuteStream even a single request");

ABSL_FLAG(std::string, service, "", "health: service name to ask about; empty is the server");

namespace {

// Every failure says why: what would otherwise end the process without a
// word (an exception nothing caught, a crash) says so on stderr first.
[[noreturn]] void OnTerminate() {
  std::fputs("dmlserve-cli: fatal: terminated by an uncaught exception or std::terminate\n",
             stderr);
  std::abort();
}

#ifdef _WIN32
LONG WINAPI OnUnhandledException(EXCEPTION_POINTERS* exception) {
  std::fprintf(stderr, "dmlserve-cli: fatal: unhandled exception 0x%08lx at %p\n",
               static_cast<unsigned long>(exception->ExceptionRecord->ExceptionCode),
               exception->ExceptionRecord->ExceptionAddress);
  std::fflush(stderr);
  return EXCEPTION_CONTINUE_SEARCH;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::set_terminate(OnTerminate);
#ifdef _WIN32
  SetUnhandledExceptionFilter(OnUnhandledException);
#endif
  // --help lists the flags of the file that defines main(); Abseil looks for
  // one named after the program, which this file is not.
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "client/cli/");
  };
  usage_config.contains_helpshort_flags = usage_config.contains_help_flags;
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(
      "Runs dmlserve operators.\n"
      "Usage: dmlserve-cli SUBCOMMAND [flags]\n"
      "  cumsum    --sizes 1,1,3,4 --values 2,1,3,5,... --axis 3 [--exclusive] [--reverse]\n"
      "  cumprod   (as cumsum)\n"
      "  qmatmul   --a_sizes --a_values --a_dtype --a_scale [--a_zero_point] (or --a_id),\n"
      "            the same for b_, --output_scale [--output_zero_point] --output_dtype\n"
      "  run FILE  a JSON ExecuteRequest, {\"requests\": [...]} or a conformance case/file\n"
      "  register  --dtype --sizes --values [--id NAME] (or --file tensor.json)\n"
      "  release   --id NAME\n"
      "  info      server version, devices, limits, operators\n"
      "  health    prints SERVING or NOT_SERVING (exit code 0 only when SERVING)\n"
      "Common: --server host:port (replicas: host:port,host:port,... or dns:///name:port),\n"
      "--deadline_ms N (default 30000; 0: none), --pretty;\n"
      "over TLS --tls_ca_file\n"
      "(and --tls_cert_file, --tls_key_file for mutual TLS).\n"
      "Exit codes: 0 ok; 2 bad request (INVALID_ARGUMENT, OUT_OF_RANGE, NOT_FOUND,\n"
      "ALREADY_EXISTS, FAILED_PRECONDITION); 3 run --check mismatch; 1 any other error.");
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() < 2) {
    std::fputs("dmlserve-cli: a subcommand is needed; see --help\n", stderr);
    return 2;
  }

  dmlserve::client::cli::CliSettings settings;
  settings.server = absl::GetFlag(FLAGS_server);
  settings.deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
  settings.tls_ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  settings.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  settings.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  settings.pretty = absl::GetFlag(FLAGS_pretty);
  settings.dtype = absl::GetFlag(FLAGS_dtype);
  settings.sizes = absl::GetFlag(FLAGS_sizes);
  settings.values = absl::GetFlag(FLAGS_values);
  settings.id = absl::GetFlag(FLAGS_id);
  settings.axis = absl::GetFlag(FLAGS_axis);
  settings.exclusive = absl::GetFlag(FLAGS_exclusive);
  settings.reverse = absl::GetFlag(FLAGS_reverse);
  settings.request_id = absl::GetFlag(FLAGS_request_id);
  settings.a_sizes = absl::GetFlag(FLAGS_a_sizes);
  settings.a_values = absl::GetFlag(FLAGS_a_values);
  settings.a_dtype = absl::GetFlag(FLAGS_a_dtype);
  settings.a_scale = absl::GetFlag(FLAGS_a_scale);
  settings.a_zero_point = absl::GetFlag(FLAGS_a_zero_point);
  settings.a_id = absl::GetFlag(FLAGS_a_id);
  settings.b_sizes = absl::GetFlag(FLAGS_b_sizes);
  settings.b_values = absl::GetFlag(FLAGS_b_values);
  settings.b_dtype = absl::GetFlag(FLAGS_b_dtype);
  settings.b_scale = absl::GetFlag(FLAGS_b_scale);
  settings.b_zero_point = absl::GetFlag(FLAGS_b_zero_point);
  settings.b_id = absl::GetFlag(FLAGS_b_id);
  settings.output_scale = absl::GetFlag(FLAGS_output_scale);
  settings.output_zero_point = absl::GetFlag(FLAGS_output_zero_point);
  settings.output_dtype = absl::GetFlag(FLAGS_output_dtype);
  settings.file = absl::GetFlag(FLAGS_file);
  settings.case_name = absl::GetFlag(FLAGS_case_name);
  settings.check = absl::GetFlag(FLAGS_check);
  settings.stream = absl::GetFlag(FLAGS_stream);
  settings.service = absl::GetFlag(FLAGS_service);

  const std::vector<std::string> args(positional.begin() + 2, positional.end());
  const int code = dmlserve::client::cli::RunSubcommand(positional[1], args, settings);
  // An answer that never reached stdout (closed, full disk) is a failure too.
  if (!std::cout.flush()) {
    std::fputs("dmlserve-cli: could not write the answer to stdout\n", stderr);
    return code == 0 ? 1 : code;
  }
  return code;
}

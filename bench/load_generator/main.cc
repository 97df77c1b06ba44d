// dmlserve-load: drives a running dmlserve server (or one it starts) with
// concurrent Execute calls and reports throughput, latency, batching, errors
// and wrong answers. See docs/benchmarks.md.

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/load_generator/echo_comparison.h"
#include "bench/load_generator/load_runner.h"
#include "bench/load_generator/workload.h"
#include "client/cpp/client.h"
#include "client/cpp/tensor_codec.h"
#include "tests/server/server_process.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "gRPC address of a running server");
ABSL_FLAG(std::string, spawn_server, "",
          "path of a dmlserve binary to start on free loopback ports instead of using --server");
ABSL_FLAG(std::string, server_args, "",
          "extra arguments for --spawn_server, separated by spaces (e.g. \"--backend=d3d12 "
          "--d3d12_devices_per_adapter=2\")");
ABSL_FLAG(int, channels, 1, "client connections (each its own TCP connection)");
ABSL_FLAG(int, in_flight, 8, "closed loop: calls in flight on each channel");
ABSL_FLAG(bool, compare_echo, false,
          "with --spawn_server: also start dmlserve-echo (a bare gRPC server that computes "
          "nothing) and run both, interleaved, at each of --loads; prints dmlserve's "
          "throughput and latency as ratios to echo's");
ABSL_FLAG(std::string, loads, "1x1,4x8,8x32",
          "--compare_echo: closed-loop loads, CHANNELSxCALLS_PER_CHANNEL, comma-separated");
ABSL_FLAG(int, rounds, 2, "--compare_echo: interleaved rounds per load");
ABSL_FLAG(std::string, echo_server, "",
          "--compare_echo: the dmlserve-echo binary (default: next to this one)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10),
          "length of the measured phase (0: until --requests are done)");
ABSL_FLAG(uint64_t, requests, 0, "stop after this many measured requests (0: no limit)");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(1), "unrecorded load before measuring");
ABSL_FLAG(double, rate, 0,
          "open loop: target requests/s over all channels (0: closed loop, as fast as answered)");
ABSL_FLAG(std::string, mix, "cumsum=1,cumprod=1,qmatmul=1",
          "operator weights: cumsum, cumprod and qmatmul (missing ones are 0)");
ABSL_FLAG(std::string, scan_sizes, "64,1024", "scan tensor sizes, outermost first");
ABSL_FLAG(uint32_t, scan_axis, 1, "scan axis");
ABSL_FLAG(std::string, scan_type, "UINT32",
          "scan data type; UINT32 and INT32 are checked exactly, FLOAT32 within 1e-4 "
          "(relative), others are not checked");
ABSL_FLAG(bool, mixed_scan_attributes, false,
          "random direction and exclusivity per pooled scan (fewer compatible batches)");
ABSL_FLAG(std::string, matmul_shape, "4,256,256", "M,K,N of the quantized matrix multiplies");
ABSL_FLAG(bool, register_weights, false,
          "register the shared B once and refer to it by id instead of sending it");
ABSL_FLAG(int, verify_every, 100, "check every n-th response against a reference (0: never)");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(30), "deadline of each call");
ABSL_FLAG(int, pool_size, 16, "distinct requests per operator");
ABSL_FLAG(uint64_t, seed, 1, "random seed of the request contents and the mix");

namespace dmlserve::load {
namespace {

absl::StatusOr<std::vector<uint32_t>> ParseSizes(const std::string& text) {
  std::vector<uint32_t> sizes;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    uint32_t size;
    if (!absl::SimpleAtoi(part, &size) || size == 0) {
      return absl::InvalidArgumentError(absl::StrCat("bad size '", part, "' in '", text, "'"));
    }
    sizes.push_back(size);
  }
  if (sizes.empty()) return absl::InvalidArgumentError("no sizes given");
  return sizes;
}

absl::Status ParseMix(const std::string& text, WorkloadOptions& options) {
  options.cumsum_weight = options.cumprod_weight = options.qmatmul_weight = 0;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> name_weight = absl::StrSplit(part, '=');
    int weight = 1;
    if (!name_weight.second.empty() && !absl::SimpleAtoi(name_weight.second, &weight)) {
      return absl::InvalidArgumentError(absl::StrCat("bad weight in '", part, "'"));
    }
    if (name_weight.first == "cumsum") {
      options.cumsum_weight = weight;
    } else if (name_weight.first == "cumprod") {
      options.cumprod_weight = weight;
    } else if (name_weight.first == "qmatmul") {
      options.qmatmul_weight = weight;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown operator '", name_weight.first, "' (cumsum, cumprod, qmatmul)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkloadOptions> WorkloadOptionsFromFlags() {
  WorkloadOptions options;
  if (absl::Status status = ParseMix(absl::GetFlag(FLAGS_mix), options); !status.ok()) {
    return status;
  }
  absl::StatusOr<std::vector<uint32_t>> scan_sizes = ParseSizes(absl::GetFlag(FLAGS_scan_sizes));
  if (!scan_sizes.ok()) return scan_sizes.status();
  options.scan_sizes = *scan_sizes;
  options.scan_axis = absl::GetFlag(FLAGS_scan_axis);
  absl::StatusOr<v1::DataType> scan_type = client::ParseDataType(absl::GetFlag(FLAGS_scan_type));
  if (!scan_type.ok()) return scan_type.status();
  options.scan_type = *scan_type;
  options.mixed_scan_attributes = absl::GetFlag(FLAGS_mixed_scan_attributes);
  absl::StatusOr<std::vector<uint32_t>> shape = ParseSizes(absl::GetFlag(FLAGS_matmul_shape));
  if (!shape.ok()) return shape.status();
  if (shape->size() != 3) return absl::InvalidArgumentError("--matmul_shape is M,K,N");
  options.m = (*shape)[0];
  options.k = (*shape)[1];
  options.n = (*shape)[2];
  if (absl::GetFlag(FLAGS_register_weights) && options.qmatmul_weight > 0) {
    options.registered_b_id = absl::StrCat("dmlserve-load-b-", getpid());
  }
  options.pool_size = absl::GetFlag(FLAGS_pool_size);
  options.seed = absl::GetFlag(FLAGS_seed);
  return options;
}

// dmlserve-echo from --echo_server, or from this binary's directory.
absl::StatusOr<std::unique_ptr<testing::ServerProcess>> StartEcho() {
  std::string binary = absl::GetFlag(FLAGS_echo_server);
  if (binary.empty()) {
    char self[4096];
    const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (length <= 0) return absl::NotFoundError("cannot find this binary; pass --echo_server");
    binary = std::string(self, length);
    binary = binary.substr(0, binary.rfind('/') + 1) + "dmlserve-echo";
  }
  return testing::ServerProcess::StartGrpcOnly(binary);
}

void PrintServerInfo(client::Client& client) {
  absl::StatusOr<v1::GetServerInfoResponse> info =
      client.GetServerInfo(client::CallOptions::WithTimeout(absl::Seconds(10)));
  if (!info.ok()) {
    std::cout << "server:      (GetServerInfo failed: " << info.status() << ")\n";
    return;
  }
  std::vector<std::string> devices;
  for (const v1::DeviceInfo& device : info->devices()) {
    devices.push_back(absl::StrCat(device.name(), " (", device.description(), ")"));
  }
  std::cout << "server:      dmlserve " << info->version() << ", devices "
            << absl::StrJoin(devices, ", ") << "\n";
}

int Run() {
  absl::StatusOr<WorkloadOptions> workload_options = WorkloadOptionsFromFlags();
  if (!workload_options.ok()) {
    std::cerr << "dmlserve-load: " << workload_options.status() << "\n";
    return 2;
  }
  RunOptions run;
  run.channels = absl::GetFlag(FLAGS_channels);
  run.calls_per_channel = absl::GetFlag(FLAGS_in_flight);
  run.duration = absl::GetFlag(FLAGS_duration);
  run.max_requests = absl::GetFlag(FLAGS_requests);
  run.warmup = absl::GetFlag(FLAGS_warmup);
  run.target_rate = absl::GetFlag(FLAGS_rate);
  run.verify_every = absl::GetFlag(FLAGS_verify_every);
  run.timeout = absl::GetFlag(FLAGS_timeout);
  run.seed = absl::GetFlag(FLAGS_seed);
  if (run.channels <= 0 || run.calls_per_channel <= 0 || run.target_rate < 0 ||
      (run.duration <= absl::ZeroDuration() && run.max_requests == 0)) {
    std::cerr << "dmlserve-load: need --channels > 0, --in_flight > 0, --rate >= 0 and a "
                 "--duration or --requests limit\n";
    return 2;
  }
  const bool compare_echo = absl::GetFlag(FLAGS_compare_echo);
  std::vector<LoadLevel> levels = {{run.channels, run.calls_per_channel}};
  if (compare_echo) {
    absl::StatusOr<std::vector<LoadLevel>> parsed = ParseLoadLevels(absl::GetFlag(FLAGS_loads));
    if (!parsed.ok()) {
      std::cerr << "dmlserve-load: --loads: " << parsed.status() << "\n";
      return 2;
    }
    levels = *std::move(parsed);
    if (absl::GetFlag(FLAGS_spawn_server).empty() || run.target_rate > 0) {
      std::cerr << "dmlserve-load: --compare_echo needs --spawn_server and a closed loop\n";
      return 2;
    }
  }
  int max_channels = 1;
  for (const LoadLevel& level : levels) max_channels = std::max(max_channels, level.channels);

  std::unique_ptr<testing::ServerProcess> server;
  std::string address = absl::GetFlag(FLAGS_server);
  if (const std::string binary = absl::GetFlag(FLAGS_spawn_server); !binary.empty()) {
    std::vector<std::string> args =
        absl::StrSplit(absl::GetFlag(FLAGS_server_args), ' ', absl::SkipWhitespace());
    absl::StatusOr<std::unique_ptr<testing::ServerProcess>> started =
        testing::ServerProcess::Start(binary, args);
    if (!started.ok()) {
      std::cerr << "dmlserve-load: cannot start the server: " << started.status() << "\n";
      return 2;
    }
    server = *std::move(started);
    address = server->grpc_address();
    std::cout << "spawned:     " << binary << " " << absl::StrJoin(args, " ") << " on " << address
              << "\n";
  }

  client::ClientOptions client_options;
  client_options.connect_timeout = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Client::Connect(address, client_options);
  absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> channels =
      client.ok() ? OpenChannels(address, max_channels, absl::Seconds(10))
                  : absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>>(client.status());
  if (!channels.ok()) {
    std::cerr << "dmlserve-load: cannot connect to " << address << ": " << channels.status()
              << "\n";
    return 2;
  }
  PrintServerInfo(**client);

  absl::StatusOr<Workload> workload = Workload::Create(*workload_options);
  if (!workload.ok()) {
    std::cerr << "dmlserve-load: " << workload.status() << "\n";
    return 2;
  }
  const std::string& b_id = workload_options->registered_b_id;
  for (const auto& [id, tensor] : workload->Registrations()) {
    absl::StatusOr<v1::RegisterTensorResponse> registered = (*client)->RegisterTensor(tensor, id);
    if (!registered.ok()) {
      std::cerr << "dmlserve-load: RegisterTensor " << id << ": " << registered.status() << "\n";
      return 2;
    }
  }
  std::cout << "load:        "
            << (compare_echo ? absl::StrCat("loads ", absl::GetFlag(FLAGS_loads))
                             : absl::StrCat(run.channels, " channels x ", run.calls_per_channel,
                                            " calls in flight"))
            << ", "
            << (run.target_rate > 0 ? absl::StrCat("open loop at ", run.target_rate, " req/s")
                                    : std::string("closed loop"))
            << ", mix " << absl::GetFlag(FLAGS_mix) << ", scans "
            << client::DataTypeDisplayName(workload_options->scan_type) << " ["
            << absl::GetFlag(FLAGS_scan_sizes) << "] axis " << workload_options->scan_axis
            << ", qmatmul " << workload_options->m << "x" << workload_options->k << "x"
            << workload_options->n
            << (b_id.empty() ? " (B inline)" : " (B and its scales registered)") << "\n";

  LoadStats stats;
  if (compare_echo) {
    absl::StatusOr<std::unique_ptr<testing::ServerProcess>> echo = StartEcho();
    if (!echo.ok()) {
      std::cerr << "dmlserve-load: cannot start dmlserve-echo: " << echo.status() << "\n";
      return 2;
    }
    absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> echo_channels =
        OpenChannels((*echo)->grpc_address(), max_channels, absl::Seconds(10));
    if (!echo_channels.ok()) {
      std::cerr << "dmlserve-load: dmlserve-echo: " << echo_channels.status() << "\n";
      return 2;
    }
    stats = CompareWithEcho({"echo", *std::move(echo_channels), /*verify=*/false},
                            {"dmlserve", *channels, /*verify=*/true}, *workload, run, levels,
                            absl::GetFlag(FLAGS_rounds), std::cout);
    std::cout << absl::StrFormat("checked:     %d dmlserve responses, %d wrong\n", stats.checked,
                                 stats.wrong);
    for (const std::string& example : stats.wrong_examples)
      std::cout << "  WRONG " << example << "\n";
  } else {
    const RunResult result = RunLoad(*channels, *workload, run);
    PrintReport(result.stats, ReportContext{result.elapsed, run.target_rate}, std::cout);
    stats = result.stats;
  }

  for (const auto& [id, tensor] : workload->Registrations()) {
    if (absl::Status status = (*client)->ReleaseTensor(id); !status.ok()) {
      std::cerr << "dmlserve-load: ReleaseTensor " << id << ": " << status << "\n";
    }
  }
  if (server != nullptr) {
    absl::StatusOr<int> exit_code = server->Stop();
    if (!exit_code.ok() || *exit_code != 0) {
      std::cerr << "dmlserve-load: the spawned server did not exit cleanly ("
                << (exit_code.ok() ? absl::StrCat("exit ", *exit_code)
                                   : exit_code.status().ToString())
                << "); its output:\n"
                << server->Output();
    }
  }
  if (stats.wrong > 0) return 1;
  return stats.successes > 0 ? 0 : 2;
}

}  // namespace
}  // namespace dmlserve::load

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Drives a dmlserve server with concurrent requests and reports throughput, latency "
      "percentiles, batch sizes, errors and wrong answers.\n"
      "  dmlserve-load --server=127.0.0.1:50051 --channels=2 --in_flight=8 --duration=10s\n"
      "  dmlserve-load --spawn_server=build/server/dmlserve --compare_echo --mix=cumsum=1\n"
      "  dmlserve-load --spawn_server=build/server/dmlserve --server_args=\"--backend=d3d12\"");
  // As in dmlserve itself (server/main.cc): Debian's Abseil checks lock order
  // on every Mutex, gRPC's included; both sides of a comparison turn it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::ParseCommandLine(argc, argv);
  const int exit_code = dmlserve::load::Run();
  // Ends the process without static destructors: gRPC's threads may still
  // be finishing their bookkeeping of the last calls (after every completion
  // ran), and tearing gRPC's globals down under them aborted this tool
  // ("assertion failed: prior > 0") about once in 100 runs on a busy
  // machine. Everything the run owned is already released.
  std::cout.flush();
  std::cerr.flush();
  std::_Exit(exit_code);
}

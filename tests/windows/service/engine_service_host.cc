// The Windows service layer (server/platform/) around dmlserve's engine (the
// scheduler with its CPU and D3D12 devices), for the service test under
// wine (windows_service_test.py). It is the product's service code, unchanged:
// the same `service install|uninstall|start|stop|run` commands, the same
// ServiceMain, control handler, drain and event log. Only the front end
// differs: gRPC and protobuf cannot be cross-built here (Debian has no
// mingw-w64 build of them), so instead of dmlserve's gRPC server this host
// serves a line protocol on loopback TCP that names conformance cases:
//
//   request:  "<case index>\n"   (tests/conformance/*.json, in load order)
//   response: "ok <index> <device> <batch size>\n", the output checked
//             bit-exact against the case's expected tensor by the host, or
//             "fail <index> <reason>\n" (a wrong answer, or UNAVAILABLE once
//             the drain began).
//
// Each request is one scheduler job, batched and placed exactly as
// dmlserve's are. A stop (SCM STOP/PRESHUTDOWN/SHUTDOWN) stops accepting
// connections and new requests, finishes every request admitted before it,
// answers them, then returns (drain order as in server/main.cc).
//
//   dmlserve_engine_service.exe service <verb> [--service_name=NAME]
//       [--port=N] [--conformance_dir=DIR] [--batch_delay_ms=N]
//       [--log_file=PATH] [--backend=cpu|d3d12|cpu+d3d12]

#include <winsock2.h>
#include <ws2tcpip.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "scheduler/scheduler.h"
#include "server/device_events_log.h"
#include "server/device_factory.h"
#include "server/drain_gate.h"
#include "server/platform/log.h"
#include "server/platform/server_control.h"
#include "server/platform/service_command.h"
#include "tests/reference/conformance.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

struct HostFlags {
  int port = 0;
  std::string conformance_dir;
  int batch_delay_ms = 0;
  std::string log_file;
  std::string backend = "cpu+d3d12";
};

absl::StatusOr<HostFlags> ParseFlags(const std::vector<std::string>& arguments) {
  HostFlags flags;
  for (const std::string& argument : arguments) {
    const size_t equals = argument.find('=');
    const std::string name = argument.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : argument.substr(equals + 1);
    if (name == "--port") {
      flags.port = std::atoi(value.c_str());
    } else if (name == "--conformance_dir") {
      flags.conformance_dir = value;
    } else if (name == "--batch_delay_ms") {
      flags.batch_delay_ms = std::atoi(value.c_str());
    } else if (name == "--log_file") {
      flags.log_file = value;
    } else if (name == "--backend") {
      flags.backend = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", argument));
    }
  }
  return flags;
}

// One connection: reads request lines, answers each when its job is done.
class Connection {
 public:
  Connection(SOCKET socket, Scheduler* scheduler, DrainGate* gate,
             const std::vector<reference::ConformanceCase>* cases)
      : socket_(socket), scheduler_(scheduler), gate_(gate), cases_(cases) {}

  void Serve() {
    std::string buffer;
    char chunk[256];
    // Polls rather than blocking in recv(): wine does not wake a recv()
    // blocked in another thread when the socket is shut down, so Shutdown()
    // sets a flag this loop sees within 100 ms.
    while (!stopping_.load()) {
      fd_set readable;
      FD_ZERO(&readable);
      FD_SET(socket_, &readable);
      timeval timeout{0, 100'000};
      const int ready = select(0, &readable, nullptr, nullptr, &timeout);
      if (ready < 0) return;
      if (ready == 0) continue;
      const int received = recv(socket_, chunk, sizeof(chunk), 0);
      if (received <= 0) return;
      buffer.append(chunk, static_cast<size_t>(received));
      size_t newline;
      while ((newline = buffer.find('\n')) != std::string::npos) {
        const std::string line = buffer.substr(0, newline);
        buffer.erase(0, newline + 1);
        Handle(line);
      }
    }
  }

  // The client sees the connection close; Serve() returns.
  void Shutdown() {
    stopping_.store(true);
    shutdown(socket_, SD_BOTH);
  }
  ~Connection() { closesocket(socket_); }

 private:
  void Handle(const std::string& line) {
    const int index = std::atoi(line.c_str());
    if (index < 0 || index >= static_cast<int>(cases_->size())) {
      Send(absl::StrCat("fail ", line, " no such case\n"));
      return;
    }
    if (!gate_->TryEnter()) {
      Send(absl::StrCat("fail ", index, " UNAVAILABLE: draining\n"));
      return;
    }
    const reference::ConformanceCase& c = (*cases_)[index];
    auto job = std::make_shared<Job>();
    job->operation = c.operation;
    // Answered from the scheduler's thread, so that requests pipelined on
    // one connection are in flight together and batch.
    job->done = [this, index, &c](JobResult result) {
      absl::Status status = result.status;
      if (status.ok()) status = reference::CheckExact(c.expected, result.output);
      Send(status.ok() ? absl::StrCat("ok ", index, " ", result.info.device, " ",
                                      result.info.batch_size, "\n")
                       : absl::StrCat("fail ", index, " ", status.ToString(), "\n"));
      gate_->Exit();
    };
    absl::Status submitted = scheduler_->Submit(std::move(job));
    if (!submitted.ok()) {
      Send(absl::StrCat("fail ", index, " ", submitted.ToString(), "\n"));
      gate_->Exit();
    }
  }

  void Send(const std::string& text) {
    std::lock_guard<std::mutex> lock(send_mu_);
    send(socket_, text.data(), static_cast<int>(text.size()), 0);
  }

  const SOCKET socket_;
  Scheduler* const scheduler_;
  DrainGate* const gate_;
  const std::vector<reference::ConformanceCase>* const cases_;
  std::mutex send_mu_;
  std::atomic<bool> stopping_{false};
};

absl::StatusOr<std::vector<std::unique_ptr<Device>>> Devices(const std::string& backend) {
  std::vector<std::unique_ptr<Device>> devices;
  for (const char* kind : {"d3d12", "cpu"}) {
    if (backend.find(kind) == std::string::npos) continue;
    DeviceFactoryOptions options;
    // lavapipe, wine's D3D12 adapter here, is a software adapter.
    absl::StatusOr<DeviceSet> set = CreateDevices(kind, options);
    if (!set.ok()) return set.status();
    for (auto& device : set->devices) {
      LogInfo(absl::StrCat("device ", device->description().name, " (",
                           device->description().description, ")"));
      devices.push_back(std::move(device));
    }
  }
  if (devices.empty()) return absl::InvalidArgumentError("--backend: no devices");
  return devices;
}

int Serve(const HostFlags& flags, ServerControl& control) {
  absl::StatusOr<std::vector<reference::ConformanceCase>> cases =
      reference::LoadConformanceCases(flags.conformance_dir);
  if (!cases.ok()) {
    LogError(absl::StrCat("--conformance_dir: ", cases.status().ToString()));
    return 1;
  }
  absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices = Devices(flags.backend);
  if (!devices.ok()) {
    LogError(absl::StrCat("--backend=", flags.backend, ": ", devices.status().ToString()));
    return 1;
  }
  SchedulerOptions options;
  options.injected_batch_delay = absl::Milliseconds(flags.batch_delay_ms);
  DeviceEventsLog device_events(nullptr);
  Scheduler scheduler(options, *std::move(devices), &device_events);

  WSADATA wsa;
  WSAStartup(MAKEWORD(2, 2), &wsa);
  SOCKET listener = socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<u_short>(flags.port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (listener == INVALID_SOCKET ||
      bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener, 16) != 0) {
    LogError(
        absl::StrCat("--port=", flags.port, ": cannot listen (WSA error ", WSAGetLastError(), ")"));
    return 1;
  }
  DrainGate gate;
  std::mutex connections_mu;
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<std::thread> threads;
  std::thread acceptor([&] {
    for (;;) {
      SOCKET socket = accept(listener, nullptr, nullptr);
      if (socket == INVALID_SOCKET) return;  // the listener closed: draining
      std::lock_guard<std::mutex> lock(connections_mu);
      connections.push_back(
          std::make_unique<Connection>(socket, &scheduler, &gate, &cases.value()));
      threads.emplace_back([connection = connections.back().get()] { connection->Serve(); });
    }
  });
  LogInfo(absl::StrCat("engine serving ", cases->size(),
                       " conformance cases on 127.0.0.1:", flags.port));
  control.ReportServing();

  const std::string reason = control.WaitForStop();
  LogInfo(absl::StrCat(reason, ", draining ", gate.active(), " requests in flight"));
  closesocket(listener);
  acceptor.join();
  gate.BeginDrain();
  gate.WaitForIdle(absl::InfiniteFuture());
  LogInfo("drained: every admitted request answered");
  {
    std::lock_guard<std::mutex> lock(connections_mu);
    for (auto& connection : connections) connection->Shutdown();
  }
  for (std::thread& thread : threads) thread.join();
  connections.clear();
  scheduler.Shutdown();
  WSACleanup();
  LogInfo("engine stopped");
  return 0;
}

}  // namespace
}  // namespace dmlserve

int main(int argc, char** argv) {
  absl::StatusOr<dmlserve::ServiceCommand> command = dmlserve::ParseServiceCommand(argc, argv);
  if (!command.ok()) {
    dmlserve::LogError(command.status().ToString());
    return 2;
  }
  absl::StatusOr<dmlserve::HostFlags> flags = dmlserve::ParseFlags(command->server_arguments);
  if (!flags.ok()) {
    dmlserve::LogError(flags.status().ToString());
    return 2;
  }
  if (!flags->log_file.empty()) {
    // The test reads what the service logged from here (a service has no
    // console, and wine keeps no event log to read back).
    std::FILE* file = std::fopen(flags->log_file.c_str(), "a");
    if (file != nullptr) {
      dmlserve::AddLogSink([file](dmlserve::LogSeverity severity, absl::string_view message) {
        const char* level = severity == dmlserve::LogSeverity::kError     ? "E"
                            : severity == dmlserve::LogSeverity::kWarning ? "W"
                                                                          : "I";
        std::fprintf(file, "%s %lu %.*s\n", level,
                     static_cast<unsigned long>(GetCurrentProcessId()),
                     static_cast<int>(message.size()), message.data());
        std::fflush(file);
      });
    }
  }
  return dmlserve::RunServiceCommand(*command, dmlserve::ExecutablePath(), absl::Seconds(30),
                                     [&flags](std::shared_ptr<dmlserve::ServerControl> control) {
                                       return dmlserve::Serve(*flags, *control);
                                     });
}

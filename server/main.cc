// dmlserve: the gRPC operator server. Flags and wiring only; see
// docs/api.md for the API and server_flags.cc for the flags.

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"
#include "scheduler/scheduler.h"
#include "server/backend_devices.h"
#include "server/device_events_log.h"
#include "server/drain_gate.h"
#include "server/grpc_listener.h"
#include "server/host_port.h"
#include "server/kserve_service.h"
#include "server/memory_budget.h"
#include "server/metrics/metrics_endpoint.h"
#include "server/metrics/scrape_time_gauges.h"
#include "server/operator_service.h"
#include "server/platform/console_control.h"
#include "server/platform/crash_report.h"
#include "server/platform/log.h"
#include "server/platform/server_control.h"
#include "server/platform/service_command.h"
#include "server/server_flags.h"
#include "server/service_metrics.h"
#include "server/serving_health.h"
#include "server/tensor_registry.h"
#include "server/tensor_repository.h"

namespace dmlserve {
namespace {

constexpr char kServiceName[] = "dmlserve.v1.OperatorService";

int Fail(const absl::Status& status) {
  LogError(status.ToString());
  return 1;
}

// --placement matters where unlike devices serve together (D3D12 devices
// with CPU devices beside them): there "cost" makes them peers. A pool of one
// kind is placed by load, as placing it by cost would only add a calibration.
Placement PlacementFor(const ServerConfig& config, const DeviceSet& set) {
  return config.placement == "cost" && !set.devices.empty() && !set.fallback_devices.empty()
             ? Placement::kCost
             : Placement::kLeastLoaded;
}

// Which adapters were found and which devices serve, so an operator sees at
// a glance whether the GPUs are in use.
void LogDevices(const DeviceSet& set, Placement placement) {
  for (const AdapterReport& adapter : set.adapters) {
    LogInfo(absl::StrCat("adapter ", adapter.index, ": ", adapter.name,
                         adapter.software ? " (software)" : "", ", ",
                         adapter.used ? "used" : "not used"));
  }
  if (!set.note.empty()) LogInfo(set.note);
  for (const auto& device : set.devices) {
    LogInfo(absl::StrCat("device ", device->description().name, " (",
                         device->description().description, ")"));
  }
  for (const auto& device : set.fallback_devices) {
    LogInfo(absl::StrCat(placement == Placement::kCost ? "device " : "fallback device ",
                         device->description().name, " (", device->description().description, ")"));
  }
  if (placement == Placement::kCost) {
    LogInfo("placement: cost (each batch where it is estimated to finish first; calibrating)");
  }
}

// Loads --tensor_repository into `tensors` (at start-up, or again on a reload
// request: SIGHUP, or PARAMCHANGE for a Windows service),
// logs what it serves and counts the reload in `reloads` when given.
absl::Status LoadRepository(const std::string& directory, uint64_t max_tensor_bytes,
                            TensorRegistry& tensors,
                            prometheus::Family<prometheus::Counter>* reloads) {
  absl::StatusOr<std::vector<RepositoryTensor>> loaded =
      LoadTensorRepository(directory, max_tensor_bytes);
  absl::Status status =
      loaded.ok() ? tensors.ReplaceRepository(*std::move(loaded)) : loaded.status();
  if (reloads != nullptr) reloads->Add({{"result", status.ok() ? "ok" : "error"}}).Increment();
  if (status.ok()) {
    LogInfo(absl::StrCat("tensor repository ", directory, ": ", tensors.repository_size(),
                         " tensors, ", tensors.repository_bytes(), " bytes"));
  }
  return status;
}

// Serves until `control` asks for a stop, then drains; returns the exit code.
// Loads --tensor_repository (if given) into `tensors`, exports its metrics,
// and reloads it when `control` asks. The caller stops reloads
// (ServerControl::StopReloads) before `config`, `tensors` and `registry` go.
absl::Status ServeTensorRepository(const ServerConfig& config, TensorRegistry& tensors,
                                   prometheus::Registry& registry,
                                   metrics::ScrapeTimeGauges& gauges, ServerControl& control) {
  // The repository is loaded before the server listens: it never reports
  // SERVING (health, KServe ready) without the weights it was started with.
  if (!config.tensor_repository.empty()) {
    absl::Status loaded = LoadRepository(config.tensor_repository, config.max_request_bytes,
                                         tensors, /*metrics=*/nullptr);
    if (!loaded.ok()) {
      return absl::Status(
          loaded.code(),
          absl::StrCat("--tensor_repository=", config.tensor_repository, ": ", loaded.message()));
    }
  }
  prometheus::Family<prometheus::Counter>& reloads =
      prometheus::BuildCounter()
          .Name("dmlserve_tensor_repository_reloads_total")
          .Help(
              "Reloads of --tensor_repository (SIGHUP, or a Windows service's PARAMCHANGE), by "
              "result (ok: the new set serves; "
              "error: the previous set keeps serving, the error is on stderr).")
          .Register(registry);
  reloads.Add({{"result", "ok"}});
  reloads.Add({{"result", "error"}});
  gauges.Add("dmlserve_tensor_repository_tensors", "Tensors served from --tensor_repository.",
             [&tensors] {
               return metrics::ScrapeTimeGauges::Samples{
                   {{}, static_cast<double>(tensors.repository_size())}};
             });
  if (!config.tensor_repository.empty()) {
    control.OnReload([&config, &tensors, &reloads] {
      const absl::Status reloaded =
          LoadRepository(config.tensor_repository, config.max_request_bytes, tensors, &reloads);
      if (!reloaded.ok()) {
        LogError(absl::StrCat("reload: --tensor_repository=", config.tensor_repository,
                              " not reloaded, the ", tensors.repository_size(),
                              " tensors loaded before keep serving: ", reloaded.ToString()));
      }
    });
  }
  return absl::OkStatus();
}

// How long gRPC gets, after the last call left the drain gate, to send the
// answers already handed to it: a call leaves the gate once its answer is
// passed to Finish, which only queues it, and gRPC's shutdown cancels every
// call whose answer has not gone out (the client sees "UNAVAILABLE:
// Cancelling all calls"; seen under wine on a loaded 2-core machine).
// Shutdown returns as soon as every call and connection is done, so this
// costs a stop time only while clients keep idle connections open.
constexpr absl::Duration kAnswerFlushGrace = absl::Seconds(1);

// A graceful stop: new calls are refused from here on; those in flight get
// until --shutdown_timeout to finish (their jobs still run). Then gRPC shuts
// down, with up to kAnswerFlushGrace (within --shutdown_timeout) to send the
// last answers; it cancels whatever is left and closes the connections, and
// the scheduler's workers end.
void Drain(const ServerConfig& config, ServingHealth& serving_health, DrainGate& gate,
           grpc::Server& server, Scheduler& scheduler) {
  serving_health.Detach();
  server.GetHealthCheckService()->SetServingStatus(false);
  gate.BeginDrain();
  const absl::Time deadline = absl::Now() + config.shutdown_timeout;
  if (!gate.WaitForIdle(deadline)) {
    LogWarning(absl::StrCat(gate.active(), " calls still open after --shutdown_timeout=",
                            absl::FormatDuration(config.shutdown_timeout), "; cancelling"));
  }
  server.Shutdown(absl::ToChronoTime(std::min(deadline, absl::Now() + kAnswerFlushGrace)));
  server.Wait();
  scheduler.Shutdown();
}

int Run(const ServerConfig& server_config, ServerControl& control) {
  const ServerConfig* config = &server_config;
  absl::StatusOr<HostPort> listen = ParseHostPort(config->listen);
  if (!listen.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--listen=", listen.status().message())));
  }

  // What the metrics endpoint serves: the recorded metrics, and gauges read
  // at scrape time. Shared with the endpoint, which holds them weakly.
  auto registry = std::make_shared<prometheus::Registry>();
  auto gauges = std::make_shared<metrics::ScrapeTimeGauges>();
  ServiceMetrics service_metrics(registry.get(), gauges.get(), DMLSERVE_VERSION,
                                 config->scheduler.batch.max_batch_size);

  absl::StatusOr<DeviceSet> devices = CreateBackendDevices(config->backend, config->devices);
  if (!devices.ok()) {
    return Fail(absl::Status(
        devices.status().code(),
        absl::StrCat("--backend=", config->backend, ": no devices: ", devices.status().message())));
  }
  SchedulerOptions scheduler_options = config->scheduler;
  scheduler_options.placement = PlacementFor(*config, *devices);
  LogDevices(*devices, scheduler_options.placement);
  if (config->scheduler.injected_batch_delay > absl::ZeroDuration()) {
    LogWarning(absl::StrCat("fault injection: every batch waits ",
                            absl::FormatDuration(config->scheduler.injected_batch_delay),
                            " before it runs (DMLSERVE_INJECT_BATCH_DELAY_US)"));
  }
  std::vector<AdapterReport> adapters = devices->adapters;
  DeviceEventsLog device_events(&service_metrics);
  ServingHealth serving_health(&device_events);
  Scheduler scheduler(scheduler_options, std::move(devices->devices), &serving_health,
                      std::move(devices->fallback_devices));
  TensorRegistry tensors(
      config->max_registered_tensor_bytes,
      [&scheduler](absl::string_view id) { scheduler.EvictTensor(id); },
      config->max_registered_tensors);
  service_metrics.ObserveDevices(&scheduler);
  service_metrics.ObserveTensorRegistry(&tensors);

  // Reloads end before what they use (the registry, the counter) goes, on
  // every way out of this function.
  absl::Cleanup stop_reloads = [&control] { control.StopReloads(); };
  if (absl::Status served = ServeTensorRepository(*config, tensors, *registry, *gauges, control);
      !served.ok()) {
    return Fail(served);
  }

  OperatorServiceOptions service_options;
  service_options.version = DMLSERVE_VERSION;
  service_options.max_request_bytes = config->max_request_bytes;
  service_options.adapters = std::move(adapters);
  DrainGate gate;
  MemoryBudget budget(config->max_inflight_bytes);
  gauges->Add(
      "dmlserve_inflight_request_bytes",
      "Bytes admitted Execute requests hold (message, output and the devices' working memory) "
      "until their responses are sent; "
      "limited by --max_inflight_bytes.",
      [&budget] {
        return metrics::ScrapeTimeGauges::Samples{{{}, static_cast<double>(budget.used())}};
      });
  ReportTls(*config, *gauges);
  OperatorService service(&scheduler, &tensors, &service_metrics, &gate, &budget, service_options);
  KServeService kserve(&scheduler, service.executor(), &gate, DMLSERVE_VERSION);

  int grpc_port = 0;
  absl::StatusOr<std::unique_ptr<grpc::Server>> listening =
      ListenForGrpc(*config, {&service, &kserve}, grpc_port);
  if (!listening.ok()) return Fail(listening.status());
  std::unique_ptr<grpc::Server> server = *std::move(listening);
  server->GetHealthCheckService()->SetServingStatus(kServiceName, true);
  int devices_serving = 0;
  for (const DeviceStatus& device : scheduler.devices()) devices_serving += device.healthy ? 1 : 0;
  serving_health.Attach(server->GetHealthCheckService(), devices_serving);

  // Declared after everything its gauges read, so it stops serving first.
  absl::StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> metrics_server =
      metrics::MetricsEndpoint::Start(config->metrics_listen, {registry, gauges});
  if (!metrics_server.ok()) {
    server->Shutdown(std::chrono::system_clock::now());
    scheduler.Shutdown();
    return Fail(absl::Status(metrics_server.status().code(),
                             absl::StrCat("--metrics_listen=", config->metrics_listen, ": ",
                                          metrics_server.status().message())));
  }

  // Tests and scripts wait for exactly these two lines.
  const std::string grpc_address = FormatHostPort(listen->host, grpc_port);
  const std::string metrics_url = absl::StrCat("http://", (*metrics_server)->address(), "/metrics");
  std::printf("dmlserve: serving gRPC on %s\n", grpc_address.c_str());
  std::printf("dmlserve: serving metrics on %s\n", metrics_url.c_str());
  std::fflush(stdout);
  control.ReportServing(absl::StrCat("gRPC on ", grpc_address, ", metrics on ", metrics_url));

  const std::string reason = control.WaitForStop();
  LogInfo(absl::StrCat(reason, ", draining"));
  Drain(*config, serving_health, gate, *server, scheduler);
  LogInfo("stopped");
  return 0;
}

}  // namespace
}  // namespace dmlserve

int main(int argc, char** argv) {
  // Before anything can fault: a crash says why (crash_report.h).
  dmlserve::InstallCrashReport(argv[0]);
  auto control = std::make_shared<dmlserve::ServerControl>();
  const bool service_command = dmlserve::IsServiceCommand(argc, argv);
  // Before any thread exists: on POSIX every thread inherits the blocked
  // signals. A service is controlled by the SCM instead (service_command.h).
  if (!service_command) dmlserve::ListenForConsoleControl(control);
  absl::SetProgramUsageMessage(
      "dmlserve: tensor operators with DirectML semantics over gRPC.\n"
      "  dmlserve [flags]                      serve\n"
      "  dmlserve service <verb> [flags]       the Windows service: install, uninstall, start,\n"
      "                                        stop, run (docs/windows.md)");
  // --version: what was built, for bug reports and for checking a deployment.
  absl::FlagsUsageConfig usage_config;
  usage_config.version_string = [] {
#ifdef _WIN32
    constexpr char kPlatform[] = "Windows x64";
#else
    constexpr char kPlatform[] = "Linux";
#endif
    return absl::StrCat("dmlserve ", DMLSERVE_VERSION, " (", kPlatform, ", gRPC ", grpc::Version(),
                        ")\n");
  };
  absl::SetFlagsUsageConfig(usage_config);
  // Debian builds Abseil without NDEBUG, which turns on Mutex deadlock
  // detection: a global lock-order graph updated on every Lock. It cost the
  // request path about a tenth of its CPU, so the server turns it off; the
  // tests keep it, and they run the same locks.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  if (!service_command) {
    absl::ParseCommandLine(argc, argv);
    absl::StatusOr<dmlserve::ServerConfig> config = dmlserve::ServerConfigFromFlags();
    if (!config.ok()) return dmlserve::Fail(config.status());
    return dmlserve::Run(*config, *control);
  }
  absl::StatusOr<dmlserve::ServiceCommand> command = dmlserve::ParseServiceCommand(argc, argv);
  if (!command.ok()) {
    dmlserve::LogError(command.status().ToString());
    return 2;
  }
  // The server flags after the verb are checked now, so that `install`
  // refuses what the service would fail on at every start.
  std::vector<char*> flags{argv[0]};
  for (std::string& argument : command->server_arguments) flags.push_back(argument.data());
  absl::ParseCommandLine(static_cast<int>(flags.size()), flags.data());
  absl::StatusOr<dmlserve::ServerConfig> config = dmlserve::ServerConfigFromFlags();
  if (!config.ok()) return dmlserve::Fail(config.status());
  return dmlserve::RunServiceCommand(
      *command, dmlserve::ExecutablePath(), config->shutdown_timeout,
      [&config](std::shared_ptr<dmlserve::ServerControl> service_control) {
        return dmlserve::Run(*config, *service_control);
      });
}

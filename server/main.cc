// dmlserve: the gRPC operator server. Flags and wiring only; see
// docs/api.md for the API and server_flags.cc for the flags.

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>
#include <chrono>
#include <climits>
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
#include "server/tls_certificate.h"

namespace dmlserve {
namespace {

constexpr char kServiceName[] = "dmlserve.v1.OperatorService";

int Fail(const absl::Status& status) {
  LogError(status.ToString());
  return 1;
}

void ConfigureGrpc(const ServerConfig& config, grpc::ServerBuilder& builder) {
  // Oversized requests fail in gRPC itself with RESOURCE_EXHAUSTED, before
  // any of their bytes are buffered for the service.
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_request_bytes));
  // Detect dead peers on idle connections, and let clients keep connections
  // alive with pings as often as every 10 s without being disconnected.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10 * 1000);
  // gRPC sets SO_REUSEPORT by default, which would let a second server start
  // on a busy port and silently share its traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A client cannot open unbounded calls on one connection, hold idle
  // connections forever, or make gRPC buffer more than its quota.
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONCURRENT_STREAMS,
      static_cast<int>(std::min<uint32_t>(config.max_concurrent_streams, INT_MAX)));
  auto milliseconds = [](absl::Duration duration) {
    return duration == absl::InfiniteDuration()
               ? INT_MAX
               : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(duration), INT_MAX));
  };
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             milliseconds(config.max_connection_idle));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             milliseconds(config.max_connection_age));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 30 * 1000);
  grpc::ResourceQuota quota("dmlserve");
  quota.Resize(static_cast<size_t>(config.grpc_memory_bytes));
  builder.SetResourceQuota(quota);
}

// Plaintext, TLS, or TLS with client certificates required (ServerConfig).
// With a reload interval, gRPC's file watcher reads the files again that
// often on a thread of its own and hands new connections what it read; the
// connections open keep their session. It swaps a certificate and its key
// together only when both files changed before it looked (a Kubernetes
// Secret's volume changes both at once; by hand, replace both within the
// interval), and keeps what it had when a file cannot be read.
std::shared_ptr<grpc::ServerCredentials> ListenerCredentials(const ServerConfig& config) {
  if (config.tls_cert_pem.empty()) return grpc::InsecureServerCredentials();
  const bool mutual = !config.tls_client_ca_pem.empty();
  if (config.tls_reload_interval > absl::ZeroDuration()) {
    const auto seconds =
        static_cast<unsigned int>(absl::ToInt64Seconds(config.tls_reload_interval));
    auto files = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        config.tls_key_file, config.tls_cert_file, mutual ? config.tls_client_ca_file : "",
        seconds);
    grpc::experimental::TlsServerCredentialsOptions options(files);
    options.watch_identity_key_cert_pairs();
    if (mutual) options.watch_root_certs();
    options.set_cert_request_type(mutual
                                      ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                      : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    return grpc::experimental::TlsServerCredentials(options);
  }
  grpc::SslServerCredentialsOptions options(
      mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = config.tls_client_ca_pem;
  options.pem_key_cert_pairs.push_back({config.tls_key_pem, config.tls_cert_pem});
  return grpc::SslServerCredentials(options);
}

// TLS as the log and the metrics show it (tls_certificate.h): what is
// required, until when the certificate is valid, whether the files are read
// again. The gauge reads the file at each scrape, since it serves within the
// reload interval; read once, it is the certificate read at start-up.
void ReportTls(const ServerConfig& config, metrics::ScrapeTimeGauges& gauges) {
  constexpr char kExpiry[] = "dmlserve_tls_certificate_expiry_timestamp_seconds";
  constexpr char kExpiryHelp[] =
      "When the server's TLS certificate expires (its notAfter, Unix time): the files', read at "
      "each scrape, which serve within --tls_reload_interval. No sample without TLS, or while "
      "the files do not hold a certificate and its key.";
  if (config.tls_cert_pem.empty()) {
    // The family is there, empty: dashboards and alerts find it on every server.
    gauges.Add(kExpiry, kExpiryHelp, [] { return metrics::ScrapeTimeGauges::Samples{}; });
    return;
  }
  std::string line = absl::StrCat(
      "gRPC over TLS", config.tls_client_ca_pem.empty() ? "" : ", client certificates required");
  const absl::StatusOr<absl::Time> expiry = KeyPairExpiry(config.tls_cert_pem, config.tls_key_pem);
  if (expiry.ok()) {
    absl::StrAppend(&line, "; certificate valid until ",
                    absl::FormatTime(absl::RFC3339_sec, *expiry, absl::UTCTimeZone()));
  }
  const bool reloads = config.tls_reload_interval > absl::ZeroDuration();
  absl::StrAppend(&line, reloads ? "; TLS files read again every " : "; TLS files read once",
                  reloads ? absl::FormatDuration(config.tls_reload_interval) : "");
  LogInfo(line);
  if (expiry.ok() && *expiry < absl::Now()) {
    LogWarning(absl::StrCat("--tls_cert_file=", config.tls_cert_file,
                            ": the certificate has expired; clients will refuse it"));
  }
  gauges.Add(kExpiry, kExpiryHelp,
             [reloads, cert_file = config.tls_cert_file, key_file = config.tls_key_file,
              start_up = expiry]() {
               absl::StatusOr<absl::Time> now_serving = start_up;
               if (reloads) {
                 const absl::StatusOr<std::string> cert = ReadTlsFile(cert_file);
                 const absl::StatusOr<std::string> key = ReadTlsFile(key_file);
                 now_serving = !cert.ok()  ? cert.status()
                               : !key.ok() ? key.status()
                                           : KeyPairExpiry(*cert, *key);
               }
               if (!now_serving.ok()) return metrics::ScrapeTimeGauges::Samples{};
               return metrics::ScrapeTimeGauges::Samples{
                   {{}, static_cast<double>(absl::ToUnixSeconds(*now_serving))}};
             });
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

// Starts gRPC on --listen with `services`, health checking and (unless
// turned off) reflection; `port` receives the port it listens on.
absl::StatusOr<std::unique_ptr<grpc::Server>> ListenForGrpc(
    const ServerConfig& config, std::initializer_list<grpc::Service*> services, int& port) {
  grpc::EnableDefaultHealthCheckService(true);
  if (config.reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.listen, ListenerCredentials(config), &port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  ConfigureGrpc(config, builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen=", config.listen, ": cannot listen for gRPC there"));
  }
  return server;
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

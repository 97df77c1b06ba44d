#include "server/server_flags.h"

#include <climits>
#include <cstdlib>
#include <string>
#include <tuple>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/host_port.h"
#include "server/tensor_registry.h"
#include "server/tls_certificate.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "HOST:PORT for gRPC; port 0 picks a free port (printed at start-up).");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "HOST:PORT for the Prometheus /metrics endpoint; port 0 picks a free port.");
ABSL_FLAG(std::string, backend, "cpu",
          "cpu (the embedded CPU backend), d3d12 (D3D12 adapters, software ones such as lavapipe "
          "or WARP included) or auto (D3D12 on hardware adapters, else CPU).");
ABSL_FLAG(int, cpu_devices, 1,
          "Number of CPU devices. One already computes on every core (its kernels split work over "
          "them) and runs two batches at a time; more split the traffic into smaller batches on "
          "the same cores. With a D3D12 backend, the CPU fallback devices.");
ABSL_FLAG(std::string, devices, "",
          "D3D12 adapter indices to use, comma-separated (e.g. 0,2); empty: every adapter the "
          "backend allows. The start-up log and GetServerInfo list the adapters found.");
ABSL_FLAG(int, d3d12_devices_per_adapter, 1,
          "Logical D3D12 devices per adapter, each with its own compute queue.");
ABSL_FLAG(int, d3d12_inflight_batches, dmlserve::BackendDeviceOptions().d3d12_inflight_batches,
          "Batches in flight per D3D12 device: they overlap each batch's fixed latency "
          "(submission, completion) and one's uploads with another's compute.");
ABSL_FLAG(bool, cpu_fallback, true,
          "With a D3D12 backend, keep --cpu_devices CPU devices beside the D3D12 devices: peers "
          "placed by cost (--placement=cost), or ones that take over once every D3D12 device has "
          "been removed (--placement=gpu_first).");
ABSL_FLAG(std::string, placement, "cost",
          "With a D3D12 backend and CPU devices beside it: cost (every device a peer; each batch "
          "goes where it is estimated to finish first, from a start-up calibration and every "
          "batch since) or gpu_first (the least loaded D3D12 device; the CPU only once every "
          "D3D12 device has been removed).");
ABSL_FLAG(int, d3d12_fail_after_batches, -1,
          "Testing only: each D3D12 device fails as removed after this many batches (-1: never).");
ABSL_FLAG(int, max_batch_size, dmlserve::SchedulerOptions().batch.max_batch_size,
          "Most requests the scheduler puts in one batch.");
ABSL_FLAG(uint64_t, max_batch_bytes, dmlserve::SchedulerOptions().batch.max_batch_bytes,
          "Most bytes (each request's inputs and output) in one batch; operands the batch shares, "
          "such as a matrix multiply's B, count once and not towards it.");
ABSL_FLAG(int64_t, max_queue_delay_us, 200,
          "The longest a forming batch waits for more requests while a device with room is busy, "
          "in microseconds. An idle device starts the oldest batch at once, except under "
          "sustained load for jobs that cost nearly as much alone as in a batch (a few rows "
          "against a large shared B), which wait up to this long for company.");
ABSL_FLAG(int64_t, hold_backstop_us, 1000,
          "Under sustained load, a batch waiting for company ends on the thread of the first "
          "request to arrive after --max_queue_delay_us, with no thread woken for it; the "
          "device's idle worker looks at the queue this often, in microseconds, in case arrivals "
          "stop. A waiting request thus waits at most --max_queue_delay_us plus this. 0: the "
          "worker times every such wait itself (two thread wake-ups each).");
ABSL_FLAG(int, max_batch_attempts, dmlserve::SchedulerOptions().max_attempts,
          "Devices a batch may fail on (each failure takes that device out of rotation) before "
          "its requests fail UNAVAILABLE instead of moving to the next device.");
ABSL_FLAG(absl::Duration, device_reprobe_interval, dmlserve::SchedulerOptions().reprobe_interval,
          "How often a device taken out of rotation after a failure is probed (for D3D12: a new "
          "device on the same adapter, checked with a known-answer batch) until it serves again; "
          "0 keeps failed devices out for good.");
ABSL_FLAG(int, max_queue, dmlserve::SchedulerOptions().max_queue,
          "Requests admitted and not yet started; beyond it requests fail with "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, max_request_bytes, 64ull << 20,
          "Largest request message accepted (also gRPC's receive limit); larger ones fail with "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, max_registered_tensor_bytes, 1ull << 30,
          "Total bytes of registered tensors; RegisterTensor beyond it fails with "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint32_t, max_registered_tensors, dmlserve::TensorRegistry::kDefaultMaxTensors,
          "How many tensors may be registered at once; RegisterTensor beyond it fails with "
          "RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, max_inflight_bytes, 2ull << 30,
          "Total bytes admitted Execute requests may hold (their message plus their output) until "
          "their responses are sent; beyond it requests fail with RESOURCE_EXHAUSTED. At least "
          "twice --max_request_bytes.");
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain for the gRPC listener; with --tls_key_file the server speaks only "
          "TLS. Empty: plaintext.");
ABSL_FLAG(std::string, tls_key_file, "", "PEM private key of --tls_cert_file.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA certificates; when set (with --tls_cert_file), every client must present a "
          "certificate they signed (mutual TLS).");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Minutes(1),
          "How often the TLS files are read again: a renewed certificate, key or client CA "
          "serves new connections within this long, without a restart (0: read once).");
ABSL_FLAG(uint32_t, max_concurrent_streams, 256,
          "Calls one connection may have open at once (HTTP/2 streams); more wait.");
ABSL_FLAG(absl::Duration, max_connection_idle, absl::InfiniteDuration(),
          "A connection without calls for this long is closed (inf: never). Setting it (or "
          "--max_connection_age) adds gRPC's connection-age filter to every call.");
ABSL_FLAG(absl::Duration, max_connection_age, absl::InfiniteDuration(),
          "Connections are closed gracefully after this long (in-flight calls get 30 s more), "
          "so clients reconnect and spread over replicas (inf: never).");
ABSL_FLAG(uint64_t, grpc_memory_bytes, 1ull << 30,
          "Memory gRPC itself may use for connections and their buffers (its resource quota); "
          "beyond it new connections and reads are refused or wait.");
ABSL_FLAG(std::string, tensor_repository, "",
          "Directory of named tensors (DIR/manifest.json) served read-only under their names, as "
          "registered tensors are; loaded before the server serves, reloaded on SIGHUP. Empty: "
          "none.");
ABSL_FLAG(bool, reflection, true,
          "Serve grpc.reflection (service discovery for tools such as grpcurl).");
ABSL_FLAG(absl::Duration, shutdown_timeout, absl::Seconds(30),
          "On a stop (SIGTERM/SIGINT, Ctrl+C, a Windows service STOP), how long in-flight calls "
          "get to finish before they are cancelled.");

namespace dmlserve {
namespace {

// A PEM file's contents; NOT_FOUND or INVALID_ARGUMENT saying why not.
absl::StatusOr<std::string> ReadPemFile(const std::string& path) {
  absl::StatusOr<std::string> pem = ReadTlsFile(path);
  if (!pem.ok()) return pem.status();
  if (pem->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError("not a PEM file (no -----BEGIN line)");
  }
  return pem;
}

template <typename T>
absl::Status FlagError(absl::string_view flag, const T& value, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": ", rule));
}

}  // namespace

absl::StatusOr<ServerConfig> ServerConfigFromFlags() {
  ServerConfig config;
  config.listen = absl::GetFlag(FLAGS_listen);
  // Checked here, not only when the server binds: `service install` refuses
  // what the service would fail on at every start.
  if (absl::StatusOr<HostPort> listen = ParseHostPort(config.listen); !listen.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--listen=", listen.status().message()));
  }
  config.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  config.backend = absl::GetFlag(FLAGS_backend);
  config.devices.cpu_devices = absl::GetFlag(FLAGS_cpu_devices);
  const std::string adapters = absl::GetFlag(FLAGS_devices);
  for (absl::string_view index : absl::StrSplit(adapters, ',', absl::SkipWhitespace())) {
    int value = 0;
    if (!absl::SimpleAtoi(index, &value) || value < 0) {
      return FlagError("devices", adapters, "expected comma-separated adapter indices, e.g. 0,2");
    }
    config.devices.adapter_indices.push_back(value);
  }
  config.devices.d3d12_devices_per_adapter = absl::GetFlag(FLAGS_d3d12_devices_per_adapter);
  config.devices.d3d12_inflight_batches = absl::GetFlag(FLAGS_d3d12_inflight_batches);
  config.devices.cpu_fallback = absl::GetFlag(FLAGS_cpu_fallback);
  config.placement = absl::GetFlag(FLAGS_placement);
  config.devices.d3d12_fail_after_batches = absl::GetFlag(FLAGS_d3d12_fail_after_batches);
  config.scheduler.batch.max_batch_size = absl::GetFlag(FLAGS_max_batch_size);
  config.scheduler.batch.max_batch_bytes = absl::GetFlag(FLAGS_max_batch_bytes);
  const int64_t delay_us = absl::GetFlag(FLAGS_max_queue_delay_us);
  config.scheduler.batch.max_queue_delay = absl::Microseconds(delay_us);
  const int64_t backstop_us = absl::GetFlag(FLAGS_hold_backstop_us);
  config.scheduler.hold_backstop = absl::Microseconds(backstop_us);
  if (const char* injected = std::getenv("DMLSERVE_INJECT_BATCH_DELAY_US")) {
    int64_t microseconds = 0;
    if (!absl::SimpleAtoi(injected, &microseconds) || microseconds < 0) {
      return absl::InvalidArgumentError(absl::StrCat("DMLSERVE_INJECT_BATCH_DELAY_US=", injected,
                                                     ": expected a number of microseconds"));
    }
    config.scheduler.injected_batch_delay = absl::Microseconds(microseconds);
  }
  config.scheduler.max_queue = absl::GetFlag(FLAGS_max_queue);
  config.scheduler.max_attempts = absl::GetFlag(FLAGS_max_batch_attempts);
  config.scheduler.reprobe_interval = absl::GetFlag(FLAGS_device_reprobe_interval);
  config.max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  config.max_registered_tensor_bytes = absl::GetFlag(FLAGS_max_registered_tensor_bytes);
  config.max_registered_tensors = absl::GetFlag(FLAGS_max_registered_tensors);
  config.max_inflight_bytes = absl::GetFlag(FLAGS_max_inflight_bytes);
  config.shutdown_timeout = absl::GetFlag(FLAGS_shutdown_timeout);
  config.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  config.max_connection_idle = absl::GetFlag(FLAGS_max_connection_idle);
  config.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  config.grpc_memory_bytes = absl::GetFlag(FLAGS_grpc_memory_bytes);
  config.reflection = absl::GetFlag(FLAGS_reflection);
  config.tensor_repository = absl::GetFlag(FLAGS_tensor_repository);
  const std::string cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  const std::string key_file = absl::GetFlag(FLAGS_tls_key_file);
  const std::string client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file: give both (TLS) or neither (plaintext)");
  }
  if (!client_ca_file.empty() && cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca_file: needs --tls_cert_file and --tls_key_file (mutual TLS is TLS)");
  }
  for (auto [flag, path, pem] :
       {std::make_tuple("tls_cert_file", &cert_file, &config.tls_cert_pem),
        std::make_tuple("tls_key_file", &key_file, &config.tls_key_pem),
        std::make_tuple("tls_client_ca_file", &client_ca_file, &config.tls_client_ca_pem)}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> contents = ReadPemFile(*path);
    if (!contents.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, "=", *path, ": ", contents.status().message()));
    }
    *pem = *std::move(contents);
  }
  // What the handshake would find out one client at a time, said at start-up.
  if (!cert_file.empty()) {
    if (absl::StatusOr<absl::Time> pair = KeyPairExpiry(config.tls_cert_pem, config.tls_key_pem);
        !pair.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--tls_cert_file=", cert_file,
                                                     " and --tls_key_file=", key_file, ": ",
                                                     pair.status().message()));
    }
  }
  if (!client_ca_file.empty()) {
    if (absl::StatusOr<absl::Time> ca = CertificateExpiry(config.tls_client_ca_pem); !ca.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls_client_ca_file=", client_ca_file, ": ", ca.status().message()));
    }
  }
  config.tls_cert_file = cert_file;
  config.tls_key_file = key_file;
  config.tls_client_ca_file = client_ca_file;
  config.tls_reload_interval = absl::GetFlag(FLAGS_tls_reload_interval);
  // gRPC's file watcher counts whole seconds.
  if (config.tls_reload_interval != absl::ZeroDuration() &&
      (config.tls_reload_interval < absl::Seconds(1) ||
       config.tls_reload_interval > absl::Hours(24 * 365) ||
       config.tls_reload_interval % absl::Seconds(1) != absl::ZeroDuration())) {
    return FlagError("tls_reload_interval", absl::FormatDuration(config.tls_reload_interval),
                     "must be 0 (read once) or whole seconds from 1s to 8760h");
  }

  if (config.devices.cpu_devices < 1) {
    return FlagError("cpu_devices", config.devices.cpu_devices, "must be at least 1");
  }
  if (config.devices.d3d12_devices_per_adapter < 1) {
    return FlagError("d3d12_devices_per_adapter", config.devices.d3d12_devices_per_adapter,
                     "must be at least 1");
  }
  if (config.devices.d3d12_inflight_batches < 1) {
    return FlagError("d3d12_inflight_batches", config.devices.d3d12_inflight_batches,
                     "must be at least 1");
  }
  if (config.scheduler.batch.max_batch_size < 1) {
    return FlagError("max_batch_size", config.scheduler.batch.max_batch_size, "must be at least 1");
  }
  if (config.scheduler.batch.max_batch_bytes < 1) {
    return FlagError("max_batch_bytes", config.scheduler.batch.max_batch_bytes,
                     "must be at least 1");
  }
  // ServerLimits reports the delay as uint32 microseconds.
  if (delay_us < 0 || delay_us > UINT32_MAX) {
    return FlagError("max_queue_delay_us", delay_us, "must be from 0 to 4294967295");
  }
  if (config.placement != "cost" && config.placement != "gpu_first") {
    return FlagError("placement", config.placement, "expected cost or gpu_first");
  }
  if (backstop_us < 0 || backstop_us > 60'000'000) {
    return FlagError("hold_backstop_us", backstop_us, "must be from 0 to 60000000 (one minute)");
  }
  if (config.max_concurrent_streams < 1) {
    return FlagError("max_concurrent_streams", config.max_concurrent_streams, "must be at least 1");
  }
  // gRPC takes these in int milliseconds and reads INT_MAX as "never": a
  // finite value that long would quietly mean no limit, and one under a
  // millisecond would be 0.
  constexpr absl::Duration kLongestConnectionLimit = absl::Milliseconds(INT_MAX - 1);
  for (const auto& [flag, value] : {std::pair{"max_connection_idle", config.max_connection_idle},
                                    std::pair{"max_connection_age", config.max_connection_age}}) {
    if (value < absl::Milliseconds(1) ||
        (value != absl::InfiniteDuration() && value > kLongestConnectionLimit)) {
      return FlagError(
          flag, absl::FormatDuration(value),
          absl::StrCat("must be from 1ms to ", absl::FormatDuration(kLongestConnectionLimit),
                       " (inf: no limit)"));
    }
  }
  if (config.grpc_memory_bytes < 2 * config.max_request_bytes) {
    return FlagError("grpc_memory_bytes", config.grpc_memory_bytes,
                     absl::StrCat("must be at least twice --max_request_bytes (",
                                  2 * config.max_request_bytes, ")"));
  }
  if (config.max_registered_tensors < 1) {
    return FlagError("max_registered_tensors", config.max_registered_tensors, "must be at least 1");
  }
  if (config.scheduler.max_attempts < 1) {
    return FlagError("max_batch_attempts", config.scheduler.max_attempts, "must be at least 1");
  }
  if (config.scheduler.reprobe_interval < absl::ZeroDuration()) {
    return FlagError("device_reprobe_interval",
                     absl::FormatDuration(config.scheduler.reprobe_interval),
                     "must not be negative (0: never)");
  }
  if (config.scheduler.max_queue < 1) {
    return FlagError("max_queue", config.scheduler.max_queue, "must be at least 1");
  }
  // gRPC's message size limit is an int.
  if (config.max_request_bytes < 1 || config.max_request_bytes > INT_MAX) {
    return FlagError("max_request_bytes", config.max_request_bytes,
                     absl::StrCat("must be from 1 to ", INT_MAX));
  }
  // One largest request (its message and an output as large) must fit.
  if (config.max_inflight_bytes < 2 * config.max_request_bytes) {
    return FlagError("max_inflight_bytes", config.max_inflight_bytes,
                     absl::StrCat("must be at least twice --max_request_bytes (",
                                  2 * config.max_request_bytes, ")"));
  }
  if (config.shutdown_timeout < absl::ZeroDuration()) {
    return FlagError("shutdown_timeout", absl::FormatDuration(config.shutdown_timeout),
                     "must not be negative");
  }
  return config;
}

}  // namespace dmlserve

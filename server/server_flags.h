#ifndef DMLSERVE_SERVER_SERVER_FLAGS_H_
#define DMLSERVE_SERVER_SERVER_FLAGS_H_

// dmlserve's command-line flags, read into one validated configuration.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "scheduler/scheduler.h"
#include "server/backend_devices.h"

namespace dmlserve {

struct ServerConfig {
  std::string listen;          // gRPC, HOST:PORT
  std::string metrics_listen;  // /metrics, HOST:PORT
  std::string backend;         // cpu, d3d12, auto
  BackendDeviceOptions devices;
  // --placement: "cost" or "gpu_first". It sets scheduler.placement once the
  // devices are known (PlacementFor): it matters only where unlike devices
  // serve together.
  std::string placement;
  SchedulerOptions scheduler;
  uint64_t max_request_bytes = 0;
  uint64_t max_registered_tensor_bytes = 0;
  uint32_t max_registered_tensors = 0;
  uint64_t max_inflight_bytes = 0;
  absl::Duration shutdown_timeout;

  // Transport. TLS is on when `tls_cert_pem` is set (the files' contents,
  // read at start-up to check them); `tls_client_ca_pem` then requires client
  // certificates it signed (mutual TLS). With a non-zero
  // `tls_reload_interval` the files (their paths below) are read again that
  // often, and a renewed certificate, key or CA serves new connections.
  std::string tls_cert_pem, tls_key_pem, tls_client_ca_pem;
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  absl::Duration tls_reload_interval;  // ZeroDuration: read once
  uint32_t max_concurrent_streams = 0;
  absl::Duration max_connection_idle;  // InfiniteDuration: never closed for idleness
  absl::Duration max_connection_age;   // InfiniteDuration: no limit
  uint64_t grpc_memory_bytes = 0;      // gRPC's own buffers (its resource quota)
  bool reflection = true;
  std::string tensor_repository;  // a directory, or empty
};

// Call after absl::ParseCommandLine. INVALID_ARGUMENT names the bad flag.
absl::StatusOr<ServerConfig> ServerConfigFromFlags();

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_SERVER_FLAGS_H_

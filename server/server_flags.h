#ifndef DMLSERVE_SERVER_SERVER_FLAGS_H_
#define DMLSERVE_SERVER_SERVER_FLAGS_H_

// dmlserve's command-line flags, read into one validated configuration.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "scheduler/scheduler.h"
#include "server/device_factory.h"

namespace dmlserve {

struct ServerConfig {
  std::string listen;          // gRPC, HOST:PORT
  std::string metrics_listen;  // /metrics, HOST:PORT
  std::string backend;         // cpu, d3d12, auto
  DeviceFactoryOptions devices;
  SchedulerOptions scheduler;
  uint64_t max_request_bytes = 0;
  uint64_t max_registered_tensor_bytes = 0;
  uint32_t max_registered_tensors = 0;
  uint64_t max_inflight_bytes = 0;
  absl::Duration shutdown_timeout;
};

// Call after absl::ParseCommandLine. INVALID_ARGUMENT names the bad flag.
absl::StatusOr<ServerConfig> ServerConfigFromFlags();

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_SERVER_FLAGS_H_

#ifndef DMLSERVE_CLIENT_CPP_HEALTH_STATUS_H_
#define DMLSERVE_CLIENT_CPP_HEALTH_STATUS_H_

#include "absl/strings/string_view.h"

namespace dmlserve::client {

// grpc.health.v1.HealthCheckResponse.ServingStatus, without exposing the
// generated health stubs to users of the client.
enum class HealthStatus {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,
};

// "UNKNOWN", "SERVING", "NOT_SERVING" or "SERVICE_UNKNOWN", as grpc_health_probe prints them.
absl::string_view HealthStatusName(HealthStatus status);

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_HEALTH_STATUS_H_

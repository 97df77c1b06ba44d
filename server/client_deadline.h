#ifndef DMLSERVE_SERVER_CLIENT_DEADLINE_H_
#define DMLSERVE_SERVER_CLIENT_DEADLINE_H_

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "absl/time/time.h"

namespace dmlserve {

// The call's deadline as the client set it (InfiniteFuture when none).
inline absl::Time ClientDeadline(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_CLIENT_DEADLINE_H_

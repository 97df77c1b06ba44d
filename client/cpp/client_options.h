#ifndef DMLSERVE_CLIENT_CPP_CLIENT_OPTIONS_H_
#define DMLSERVE_CLIENT_CPP_CLIENT_OPTIONS_H_

#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/security/credentials.h"

namespace dmlserve::client {

// Settings of one connection to a dmlserve server.
struct ClientOptions {
  // Null means an insecure (plaintext) channel, as the server's default
  // listener expects.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // Applied to calls that do not set their own deadline.
  absl::Duration default_timeout = absl::InfiniteDuration();
  // When positive, Connect waits this long for the channel to become ready
  // and fails with UNAVAILABLE otherwise; when zero it connects lazily.
  absl::Duration connect_timeout = absl::ZeroDuration();
  // gRPC's 4 MiB default is too small for large outputs; -1 is unlimited.
  int max_receive_message_bytes = -1;
  int max_send_message_bytes = -1;
  // Queue calls while the server is unreachable instead of failing them.
  bool wait_for_ready = false;
};

// Settings of one call.
struct CallOptions {
  // The call fails with DEADLINE_EXCEEDED past this point. InfiniteFuture
  // means the client's default timeout, if any.
  absl::Time deadline = absl::InfiniteFuture();

  static CallOptions WithTimeout(absl::Duration timeout) {
    CallOptions options;
    options.deadline = absl::Now() + timeout;
    return options;
  }
};

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_CLIENT_OPTIONS_H_

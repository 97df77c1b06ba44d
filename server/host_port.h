#ifndef DMLSERVE_SERVER_HOST_PORT_H_
#define DMLSERVE_SERVER_HOST_PORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dmlserve {

// A listening address as given on the command line: "127.0.0.1:50051",
// "[::]:0", "localhost:9464". Port 0 asks the OS for a free port.
struct HostPort {
  std::string host;  // without brackets
  int port = 0;
};

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address);

// "127.0.0.1:50051", "[::1]:50051" (brackets around IPv6 hosts).
std::string FormatHostPort(absl::string_view host, int port);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_HOST_PORT_H_

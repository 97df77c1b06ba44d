#include "server/host_port.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace dmlserve {

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", address, "\": expected HOST:PORT, e.g. 127.0.0.1:50051"));
  }
  HostPort result;
  absl::string_view host = address.substr(0, colon);
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", address, "\": empty host"));
  }
  result.host = std::string(host);
  if (!absl::SimpleAtoi(address.substr(colon + 1), &result.port) || result.port < 0 ||
      result.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", address, "\": port must be a number from 0 to 65535"));
  }
  return result;
}

std::string FormatHostPort(absl::string_view host, int port) {
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

}  // namespace dmlserve

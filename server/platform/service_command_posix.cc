#include <unistd.h>

#include <climits>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/platform/log.h"
#include "server/platform/service_command.h"

namespace dmlserve {

int RunServiceCommand(const ServiceCommand& command, absl::string_view /*executable*/,
                      absl::Duration /*drain_timeout*/, ServiceBody /*body*/) {
  LogError(absl::StrCat("service ", command.verb,
                        ": Windows services exist on Windows only; on Linux run dmlserve under "
                        "systemd (deploy/systemd) or Kubernetes (deploy/kubernetes)"));
  return 2;
}

std::string ExecutablePath() {
  char path[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return length > 0 ? std::string(path, static_cast<size_t>(length)) : std::string();
}

}  // namespace dmlserve

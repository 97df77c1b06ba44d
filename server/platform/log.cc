#include "server/platform/log.h"

#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

namespace dmlserve {
namespace {

// std::mutex rather than absl::Mutex: logging happens during static
// destruction and from a Windows console control thread, where plain
// primitives are the least surprising.
std::mutex& LogMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

using Sink = absl::AnyInvocable<void(LogSeverity, absl::string_view)>;

std::vector<Sink>& Sinks() {
  static auto* sinks = new std::vector<Sink>;
  return *sinks;
}

}  // namespace

void Log(LogSeverity severity, absl::string_view message) {
  std::lock_guard<std::mutex> lock(LogMutex());
  std::fprintf(stderr, "dmlserve: %.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  for (Sink& sink : Sinks()) sink(severity, message);
}

void AddLogSink(absl::AnyInvocable<void(LogSeverity, absl::string_view)> sink) {
  std::lock_guard<std::mutex> lock(LogMutex());
  Sinks().push_back(std::move(sink));
}

}  // namespace dmlserve

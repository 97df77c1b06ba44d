#include "server/platform/log.h"

#include <cstdio>
#include <mutex>
#include <utility>

namespace dmlserve {
namespace {

// std::mutex rather than absl::Mutex: logging happens during static
// destruction and from a Windows console control thread, where plain
// primitives are the least surprising.
std::mutex& LogMutex() {
  static auto* mutex = new std::mutex;
  return *mutex;
}

absl::AnyInvocable<void(LogSeverity, absl::string_view)>& Sink() {
  static auto* sink = new absl::AnyInvocable<void(LogSeverity, absl::string_view)>;
  return *sink;
}

}  // namespace

void Log(LogSeverity severity, absl::string_view message) {
  std::lock_guard<std::mutex> lock(LogMutex());
  std::fprintf(stderr, "dmlserve: %.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
  if (Sink()) Sink()(severity, message);
}

void SetLogSink(absl::AnyInvocable<void(LogSeverity, absl::string_view)> sink) {
  std::lock_guard<std::mutex> lock(LogMutex());
  Sink() = std::move(sink);
}

}  // namespace dmlserve

#include "server/platform/log.h"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <utility>
#include <vector>

namespace dmlserve {
namespace {

// A standard mutex rather than absl::Mutex: logging happens during static
// destruction, from a Windows console control thread and from a crashing
// thread, where plain primitives are the least surprising. Timed, for
// LogFatal.
std::timed_mutex& LogMutex() {
  static auto* mutex = new std::timed_mutex;
  return *mutex;
}

void WriteLine(absl::string_view message) {
  std::fprintf(stderr, "dmlserve: %.*s\n", static_cast<int>(message.size()), message.data());
  std::fflush(stderr);
}

using Sink = absl::AnyInvocable<void(LogSeverity, absl::string_view)>;

std::vector<Sink>& Sinks() {
  static auto* sinks = new std::vector<Sink>;
  return *sinks;
}

}  // namespace

void Log(LogSeverity severity, absl::string_view message) {
  std::lock_guard<std::timed_mutex> lock(LogMutex());
  WriteLine(message);
  for (Sink& sink : Sinks()) sink(severity, message);
}

void LogFatal(absl::string_view message) {
  std::unique_lock<std::timed_mutex> lock(LogMutex(), std::defer_lock);
  if (!lock.try_lock_for(std::chrono::milliseconds(500))) {
    WriteLine(message);
    return;
  }
  WriteLine(message);
  for (Sink& sink : Sinks()) sink(LogSeverity::kError, message);
}

void AddLogSink(absl::AnyInvocable<void(LogSeverity, absl::string_view)> sink) {
  std::lock_guard<std::timed_mutex> lock(LogMutex());
  Sinks().push_back(std::move(sink));
}

}  // namespace dmlserve

#include "server/platform/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
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

// The thread holding LogMutex (a default id when none): a thread that
// faults inside Log, in a sink, must not wait for itself in LogFatal.
std::atomic<std::thread::id>& LogOwner() {
  static auto* owner = new std::atomic<std::thread::id>();
  return *owner;
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
  LogOwner().store(std::this_thread::get_id());
  WriteLine(message);
  for (Sink& sink : Sinks()) sink(severity, message);
  LogOwner().store(std::thread::id());
}

void LogFatal(absl::string_view message) {
  std::unique_lock<std::timed_mutex> lock(LogMutex(), std::defer_lock);
  if (LogOwner().load() == std::this_thread::get_id() ||
      !lock.try_lock_for(std::chrono::milliseconds(500))) {
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

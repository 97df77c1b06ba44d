#ifndef DMLSERVE_SERVER_PLATFORM_LOG_H_
#define DMLSERVE_SERVER_PLATFORM_LOG_H_

// The server's operational log: what an operator must see (start-up, devices,
// failures, shutdown). Every line goes to stderr as "dmlserve: <message>",
// which systemd's journal, Kubernetes and a console all collect. A process
// with no console to write to (a Windows service) adds a sink as well: the
// Windows event log (windows_event_log.h).
//
// Thread-safe. Not for per-request logging: requests are counted in metrics.

#include "absl/functional/any_invocable.h"
#include "absl/strings/string_view.h"

namespace dmlserve {

enum class LogSeverity { kInfo, kWarning, kError };

// Writes `message` (one line, no trailing newline) to stderr and to the sink.
void Log(LogSeverity severity, absl::string_view message);

inline void LogInfo(absl::string_view message) { Log(LogSeverity::kInfo, message); }
inline void LogWarning(absl::string_view message) { Log(LogSeverity::kWarning, message); }
inline void LogError(absl::string_view message) { Log(LogSeverity::kError, message); }

// A dying process's last line (crash_report.h), logged as an error. It waits
// for the log's lock at most a moment: the thread holding it may be the one
// that faulted. Without the lock the line still goes to stderr, but not to
// the sinks, whose state the dying holder may have left half-changed.
void LogFatal(absl::string_view message);

// Sends every later line to `sink` too, for the rest of the process. Sinks
// are called under the log's lock (lines never interleave) and must not Log.
void AddLogSink(absl::AnyInvocable<void(LogSeverity, absl::string_view)> sink);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_LOG_H_

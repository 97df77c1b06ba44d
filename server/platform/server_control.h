#ifndef DMLSERVE_SERVER_PLATFORM_SERVER_CONTROL_H_
#define DMLSERVE_SERVER_PLATFORM_SERVER_CONTROL_H_

// How the world around the process tells a running server to stop or to
// reload, and learns that it serves. The server (main.cc's Run) only talks to
// this class; which platform source feeds it is decided in main():
//   console_control.h   POSIX signals (SIGTERM/SIGINT stop, SIGHUP reloads),
//                       or the Windows console (Ctrl+C, Ctrl+Break, close);
//   windows_service.h   the Windows Service Control Manager (STOP,
//                       PRESHUTDOWN and SHUTDOWN stop, PARAMCHANGE reloads).
//
// Shared (std::shared_ptr) between the server and the source, whose threads
// may outlive the server. Every method is thread-safe.

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dmlserve {

class ServerControl {
 public:
  ServerControl() = default;
  ServerControl(const ServerControl&) = delete;
  ServerControl& operator=(const ServerControl&) = delete;

  // ---- The server's side.

  // Blocks until a stop was requested; returns its reason ("SIGTERM",
  // "service STOP", ...) for the log.
  std::string WaitForStop();
  // Runs `reload` for every later RequestReload(), one at a time, until
  // StopReloads(). Call once.
  void OnReload(absl::AnyInvocable<void()> reload);
  // After it returns no reload runs any more (one under way is waited for),
  // so what `reload` uses may go. Later requests are ignored.
  void StopReloads();
  // The server listens and serves; a service manager may now say so (and
  // log `endpoints`, e.g. "gRPC on 127.0.0.1:50051, metrics on ...").
  void ReportServing(std::string endpoints = "");

  // ---- The platform source's side.

  // The first request wins; later ones are ignored. Never blocks for long
  // (safe from a signal thread, a console handler or the SCM's handler).
  void RequestStop(std::string reason);
  // Runs the reload on the calling thread (nothing before OnReload or after
  // StopReloads). Blocks while it runs.
  void RequestReload();

  bool stop_requested() const;
  // Blocks until the server reported serving (true), a stop was requested
  // before that (false), or `deadline` passed (false).
  bool WaitUntilServing(absl::Time deadline);
  // What ReportServing() was given ("" before).
  std::string serving_endpoints() const;

 private:
  mutable absl::Mutex mu_;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  std::string serving_endpoints_ ABSL_GUARDED_BY(mu_);

  // Held while a reload runs, so StopReloads() waits for it; separate from
  // mu_ so that a long reload never delays a stop.
  absl::Mutex reload_mu_;
  absl::AnyInvocable<void()> reload_ ABSL_GUARDED_BY(reload_mu_);
  bool reloads_stopped_ ABSL_GUARDED_BY(reload_mu_) = false;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_PLATFORM_SERVER_CONTROL_H_

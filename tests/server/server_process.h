#ifndef DMLSERVE_TESTS_SERVER_SERVER_PROCESS_H_
#define DMLSERVE_TESTS_SERVER_SERVER_PROCESS_H_

// Starts the real dmlserve binary as a child process on free loopback ports,
// for tests that talk to it over gRPC and HTTP.
//
// The server prints one line per listening endpoint once it is ready:
//   dmlserve: serving gRPC on 127.0.0.1:PORT
//   dmlserve: serving metrics on http://127.0.0.1:PORT/metrics
// and exits 0 after SIGTERM once its in-flight work is done.

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dmlserve::testing {

class ServerProcess {
 public:
  // Runs `binary --listen=127.0.0.1:0 --metrics_listen=127.0.0.1:0
  // extra_args...` and waits for both lines. The error carries the server's
  // output when it exits early or does not get ready in time.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& binary, const std::vector<std::string>& extra_args = {},
      absl::Duration startup_timeout = absl::Seconds(60));

  // Runs `binary --listen=127.0.0.1:0 extra_args...` (not DMLSERVE_SERVER_ARGS)
  // and waits only for the "serving gRPC on" line: for servers without
  // metrics, such as bench/load_generator's dmlserve-echo.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> StartGrpcOnly(
      const std::string& binary, const std::vector<std::string>& extra_args = {},
      absl::Duration startup_timeout = absl::Seconds(60));

  // Runs `binary args...` until it exits (killed after `timeout`), for
  // start-up failures: its exit code and everything it printed.
  struct Exit {
    int exit_code = -1;
    std::string output;
  };
  static absl::StatusOr<Exit> RunToExit(const std::string& binary,
                                        const std::vector<std::string>& args,
                                        absl::Duration timeout = absl::Seconds(60));

  // Stops the server if it still runs (SIGTERM, then SIGKILL).
  ~ServerProcess();

  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // "127.0.0.1:PORT"
  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }
  pid_t pid() const { return pid_; }
  // The server's peak resident size so far (VmHWM), in bytes; 0 if unknown.
  uint64_t PeakResidentBytes() const;

  bool Alive();
  // Sends `signal` to the server.
  void Signal(int signal);
  // SIGTERM, then waits for the exit; the exit code, or 128 + signal number if
  // it died from a signal. After `timeout` it is killed and an error returned.
  absl::StatusOr<int> Stop(absl::Duration timeout = absl::Seconds(60));
  // Waits for the process to exit on its own (see Stop for the result).
  absl::StatusOr<int> Wait(absl::Duration timeout);

  // Everything the server wrote to stdout and stderr so far.
  std::string Output() const;
  // Whether the output contains `text` within `timeout`: a line the server
  // writes after a state a test can see (a metric, an answer) is read from
  // its pipe a moment later.
  bool WaitForOutput(absl::string_view text, absl::Duration timeout = absl::Seconds(30)) const;

 private:
  ServerProcess() = default;
  // Starts `binary args...` with stdout and stderr collected.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Spawn(const std::string& binary,
                                                              std::vector<std::string> args);
  // Spawn, then wait for the gRPC line (and the metrics line if asked).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> SpawnAndAwait(
      const std::string& binary, std::vector<std::string> args, bool with_metrics,
      absl::Duration startup_timeout);
  void ReadOutput(int fd);
  void Reap(int wait_status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  pid_t pid_ = -1;
  std::string grpc_address_;
  std::string metrics_address_;
  std::thread reader_;

  mutable absl::Mutex mutex_;
  std::string output_ ABSL_GUARDED_BY(mutex_);
  bool output_closed_ ABSL_GUARDED_BY(mutex_) = false;
  bool exited_ ABSL_GUARDED_BY(mutex_) = false;
  int exit_code_ ABSL_GUARDED_BY(mutex_) = -1;
};

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SERVER_SERVER_PROCESS_H_

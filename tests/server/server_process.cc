#include "tests/server/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

extern char** environ;

namespace dmlserve::testing {
namespace {

const std::regex& GrpcLine() {
  static const std::regex* const kLine = new std::regex(R"(serving gRPC on (\S+))");
  return *kLine;
}

const std::regex& MetricsLine() {
  static const std::regex* const kLine =
      new std::regex(R"(serving metrics on http://(\S+)/metrics)");
  return *kLine;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Spawn(const std::string& binary,
                                                                    std::vector<std::string> args) {
  args.insert(args.begin(), binary);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  int pipe_fds[2];
  // Close-on-exec so other children started by the test do not hold the
  // write end open (the reader would never see end-of-file).
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  std::unique_ptr<ServerProcess> process(new ServerProcess());
  const int error =
      posix_spawn(&process->pid_, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (error != 0) {
    close(pipe_fds[0]);
    return absl::InternalError(absl::StrCat("cannot start ", binary, ": ", std::strerror(error)));
  }
  process->reader_ = std::thread([p = process.get(), fd = pipe_fds[0]] { p->ReadOutput(fd); });
  return process;
}

absl::StatusOr<ServerProcess::Exit> ServerProcess::RunToExit(const std::string& binary,
                                                             const std::vector<std::string>& args,
                                                             absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> process = Spawn(binary, args);
  if (!process.ok()) return process.status();
  absl::StatusOr<int> exit_code = (*process)->Wait(timeout);
  if (!exit_code.ok()) return exit_code.status();
  (*process)->reader_.join();
  return Exit{*exit_code, (*process)->Output()};
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const std::string& binary, const std::vector<std::string>& extra_args,
    absl::Duration startup_timeout) {
  std::vector<std::string> args = {"--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0"};
  // CTest runs the same suites once per backend by setting
  // DMLSERVE_SERVER_ARGS (e.g. "--backend=d3d12 --d3d12_devices_per_adapter=2").
  // A test's own flags come after, so they win.
  if (const char* backend_args = std::getenv("DMLSERVE_SERVER_ARGS")) {
    for (absl::string_view arg : absl::StrSplit(backend_args, ' ', absl::SkipEmpty())) {
      args.emplace_back(arg);
    }
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return SpawnAndAwait(binary, std::move(args), /*with_metrics=*/true, startup_timeout);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::StartGrpcOnly(
    const std::string& binary, const std::vector<std::string>& extra_args,
    absl::Duration startup_timeout) {
  std::vector<std::string> args = {"--listen=127.0.0.1:0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  return SpawnAndAwait(binary, std::move(args), /*with_metrics=*/false, startup_timeout);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::SpawnAndAwait(
    const std::string& binary, std::vector<std::string> args, bool with_metrics,
    absl::Duration startup_timeout) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> spawned = Spawn(binary, std::move(args));
  if (!spawned.ok()) return spawned.status();
  std::unique_ptr<ServerProcess> process = *std::move(spawned);

  bool ready = false;
  std::string output;
  {
    ServerProcess* p = process.get();
    absl::MutexLock lock(&p->mutex_);
    auto ready_or_closed = [p, with_metrics]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mutex_) {
      std::smatch grpc, metrics;
      return p->output_closed_ ||
             (std::regex_search(p->output_, grpc, GrpcLine()) &&
              (!with_metrics || std::regex_search(p->output_, metrics, MetricsLine())));
    };
    ready = p->mutex_.AwaitWithTimeout(absl::Condition(&ready_or_closed), startup_timeout) &&
            !p->output_closed_;
    output = p->output_;
  }
  if (!ready) {
    process.reset();  // kills and reaps the child
    return absl::UnavailableError(absl::StrCat(binary, " did not get ready:\n", output));
  }
  std::smatch match;
  std::regex_search(output, match, GrpcLine());
  process->grpc_address_ = match[1];
  if (with_metrics) {
    std::regex_search(output, match, MetricsLine());
    process->metrics_address_ = match[1];
  }
  return process;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && Alive()) {
    if (!Stop(absl::Seconds(30)).ok()) {
      // Stop already killed it.
    }
  }
  if (reader_.joinable()) reader_.join();
}

void ServerProcess::ReadOutput(int fd) {
  char buffer[4096];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    absl::MutexLock lock(&mutex_);
    output_.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  absl::MutexLock lock(&mutex_);
  output_closed_ = true;
}

void ServerProcess::Reap(int wait_status) {
  exited_ = true;
  if (WIFEXITED(wait_status)) {
    exit_code_ = WEXITSTATUS(wait_status);
  } else if (WIFSIGNALED(wait_status)) {
    exit_code_ = 128 + WTERMSIG(wait_status);
  }
}

bool ServerProcess::Alive() {
  absl::MutexLock lock(&mutex_);
  if (exited_) return false;
  int wait_status = 0;
  if (waitpid(pid_, &wait_status, WNOHANG) == pid_) {
    Reap(wait_status);
    return false;
  }
  return true;
}

void ServerProcess::Signal(int signal) {
  absl::MutexLock lock(&mutex_);
  if (!exited_) kill(pid_, signal);
}

absl::StatusOr<int> ServerProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    {
      absl::MutexLock lock(&mutex_);
      if (exited_) return exit_code_;
      int wait_status = 0;
      if (waitpid(pid_, &wait_status, WNOHANG) == pid_) {
        Reap(wait_status);
        return exit_code_;
      }
      if (absl::Now() > deadline) break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  Signal(SIGKILL);
  {
    absl::MutexLock lock(&mutex_);
    int wait_status = 0;
    if (!exited_ && waitpid(pid_, &wait_status, 0) == pid_) Reap(wait_status);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("dmlserve (pid ", pid_, ") did not exit in time; killed"));
}

absl::StatusOr<int> ServerProcess::Stop(absl::Duration timeout) {
  Signal(SIGTERM);
  return Wait(timeout);
}

std::string ServerProcess::Output() const {
  absl::MutexLock lock(&mutex_);
  return output_;
}

bool ServerProcess::WaitForOutput(absl::string_view text, absl::Duration timeout) const {
  auto contains = [this, text]() { return absl::StrContains(output_, text); };
  absl::MutexLock lock(&mutex_);
  return mutex_.AwaitWithTimeout(absl::Condition(&contains), timeout);
}

uint64_t ServerProcess::PeakResidentBytes() const {
  std::ifstream status(absl::StrCat("/proc/", pid_, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::vector<std::string> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    uint64_t kib = 0;
    if (fields.size() >= 2 && absl::SimpleAtoi(fields[1], &kib)) return kib << 10;
  }
  return 0;
}

}  // namespace dmlserve::testing

#include "tests/client/run_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace dmlserve::client::testing {
namespace {

// Files rather than pipes: nothing can block however much the child writes.
absl::StatusOr<std::string> MakeTempFile(int* fd) {
  char path[] = "/tmp/dmlserve_client_test_XXXXXX";
  *fd = mkstemp(path);
  if (*fd < 0) return absl::InternalError(absl::StrCat("mkstemp: ", std::strerror(errno)));
  return std::string(path);
}

std::string ReadAndRemove(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  std::remove(path.c_str());
  return text.str();
}

}  // namespace

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv) {
  int out_fd;
  int err_fd;
  absl::StatusOr<std::string> out_path = MakeTempFile(&out_fd);
  if (!out_path.ok()) return out_path.status();
  absl::StatusOr<std::string> err_path = MakeTempFile(&err_fd);
  if (!err_path.ok()) return err_path.status();

  std::vector<std::string> args = argv;
  std::vector<char*> raw;
  for (std::string& arg : args) raw.push_back(arg.data());
  raw.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_fd, STDERR_FILENO);
  pid_t pid;
  const int error = posix_spawn(&pid, raw[0], &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_fd);
  close(err_fd);
  if (error != 0) {
    ReadAndRemove(*out_path);
    ReadAndRemove(*err_path);
    return absl::InternalError(absl::StrCat("posix_spawn ", argv[0], ": ", std::strerror(error)));
  }
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
  }
  ProcessResult result;
  result.exit_code =
      WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
  result.out = ReadAndRemove(*out_path);
  result.err = ReadAndRemove(*err_path);
  return result;
}

}  // namespace dmlserve::client::testing

// A server that dies of a fault says why (server/platform/crash_report.h):
// the signal, the time and the stack on stderr, then it dies of the signal,
// so a service manager sees a failure and restarts it.

#include <sys/resource.h>

#include <csignal>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/server_process.h"

namespace dmlserve::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;

class CrashReportTest : public ::testing::TestWithParam<int> {};

// The signals a fault raises, sent from outside: the handler cannot tell,
// and a test cannot make the server fault on purpose.
TEST_P(CrashReportTest, FaultSignalIsReportedAndTheProcessDiesOfIt) {
  const int signal = GetParam();
  // No core file from the server this starts (it inherits the limit).
  const rlimit no_core{0, 0};
  ASSERT_EQ(setrlimit(RLIMIT_CORE, &no_core), 0);
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(ServerBinary());
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Signal(signal);
  absl::StatusOr<int> exit_code = (*server)->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 128 + signal) << (*server)->Output();
  const std::string name = signal == SIGSEGV ? "SIGSEGV" : signal == SIGBUS ? "SIGBUS" : "SIGABRT";
  EXPECT_THAT((*server)->Output(), HasSubstr(absl::StrCat("*** ", name, " received at time=")));
  // The receiving thread's stack, a frame a line.
  EXPECT_THAT((*server)->Output(), ContainsRegex("@ +0x[0-9a-f]+ "));
}

INSTANTIATE_TEST_SUITE_P(Signals, CrashReportTest, ::testing::Values(SIGSEGV, SIGBUS, SIGABRT),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SIGSEGV  ? "Sigsegv"
                                              : info.param == SIGBUS ? "Sigbus"
                                                                     : "Sigabrt");
                         });

}  // namespace
}  // namespace dmlserve::testing

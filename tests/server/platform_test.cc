// The portable parts of the platform seam (server/platform/): the stop and
// reload channel every platform source feeds, the log's sinks, and the
// `service` command line (the Windows service itself runs under wine:
// tests/windows/service/windows_service_test.py).

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/platform/log.h"
#include "server/platform/server_control.h"
#include "server/platform/service_command.h"

namespace dmlserve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ServerControlTest, TheFirstStopRequestWinsAndWakesTheWaiter) {
  ServerControl control;
  std::string reason;
  std::thread waiter([&] { reason = control.WaitForStop(); });
  EXPECT_FALSE(control.stop_requested());
  control.RequestStop("SIGTERM");
  control.RequestStop("service STOP");
  waiter.join();
  EXPECT_EQ(reason, "SIGTERM");
  EXPECT_TRUE(control.stop_requested());
  EXPECT_EQ(control.WaitForStop(), "SIGTERM");
}

TEST(ServerControlTest, ReloadsRunOnlyBetweenOnReloadAndStopReloads) {
  ServerControl control;
  int reloads = 0;
  control.RequestReload();  // before OnReload: nothing to run
  control.OnReload([&reloads] { ++reloads; });
  control.RequestReload();
  control.RequestReload();
  EXPECT_EQ(reloads, 2);
  control.StopReloads();
  control.RequestReload();
  EXPECT_EQ(reloads, 2);
}

TEST(ServerControlTest, StopReloadsWaitsForAReloadUnderWay) {
  ServerControl control;
  absl::Notification started;
  std::atomic<bool> finished{false};
  control.OnReload([&] {
    started.Notify();
    absl::SleepFor(absl::Milliseconds(100));
    finished = true;
  });
  std::thread reloader([&] { control.RequestReload(); });
  started.WaitForNotification();
  control.StopReloads();
  EXPECT_TRUE(finished);
  reloader.join();
}

TEST(ServerControlTest, AStopIsNotDelayedByALongReload) {
  ServerControl control;
  absl::Notification started, release;
  control.OnReload([&] {
    started.Notify();
    release.WaitForNotification();
  });
  std::thread reloader([&] { control.RequestReload(); });
  started.WaitForNotification();
  control.RequestStop("SIGINT");
  EXPECT_EQ(control.WaitForStop(), "SIGINT");
  release.Notify();
  reloader.join();
}

TEST(ServerControlTest, WaitUntilServingTellsServingFromStoppedAndTimedOut) {
  {
    ServerControl control;
    EXPECT_FALSE(control.WaitUntilServing(absl::Now() + absl::Milliseconds(20)));
    std::thread server([&] { control.ReportServing(); });
    EXPECT_TRUE(control.WaitUntilServing(absl::InfiniteFuture()));
    server.join();
  }
  {
    ServerControl control;
    control.RequestStop("service STOP");
    EXPECT_FALSE(control.WaitUntilServing(absl::InfiniteFuture()));
  }
}

TEST(LogTest, SinksSeeEveryLineWithItsSeverity) {
  static std::vector<std::string>* lines = new std::vector<std::string>;
  AddLogSink([](LogSeverity severity, absl::string_view message) {
    lines->push_back(std::string(severity == LogSeverity::kError     ? "E "
                                 : severity == LogSeverity::kWarning ? "W "
                                                                     : "I ") +
                     std::string(message));
  });
  LogInfo("serving");
  LogWarning("device removed");
  LogError("cannot listen");
  EXPECT_THAT(*lines, ElementsAre("I serving", "W device removed", "E cannot listen"));
}

absl::StatusOr<ServiceCommand> Parse(std::vector<std::string> arguments) {
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  return ParseServiceCommand(static_cast<int>(argv.size()), argv.data());
}

TEST(ServiceCommandTest, InstallKeepsTheServerFlagsAndTakesTheName) {
  absl::StatusOr<ServiceCommand> command =
      Parse({"dmlserve", "service", "install", "--listen=0.0.0.0:50051",
             "--service_name=dmlserve-gpu1", "--backend=d3d12"});
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->verb, "install");
  EXPECT_EQ(command->name, "dmlserve-gpu1");
  EXPECT_THAT(command->server_arguments, ElementsAre("--listen=0.0.0.0:50051", "--backend=d3d12"));
  EXPECT_EQ(Parse({"dmlserve", "service", "run"})->name, "dmlserve");
}

TEST(ServiceCommandTest, BadCommandLinesNameWhatIsWrong) {
  EXPECT_THAT(Parse({"dmlserve", "service"}).status().message(), HasSubstr("missing verb"));
  EXPECT_THAT(Parse({"dmlserve", "service", "launch"}).status().message(),
              HasSubstr("unknown verb \"launch\""));
  EXPECT_THAT(Parse({"dmlserve", "service", "stop", "--listen=:1"}).status().message(),
              HasSubstr("takes only --service_name"));
  EXPECT_THAT(Parse({"dmlserve", "service", "start", "--service_name="}).status().message(),
              HasSubstr("--service_name"));
  EXPECT_THAT(Parse({"dmlserve", "service", "start", "--service_name=a\\b"}).status().message(),
              HasSubstr("--service_name"));
  EXPECT_FALSE(Parse({"dmlserve", "--listen=:1"}).ok());
}

TEST(ServiceCommandTest, CommandLinesQuoteTheWayWindowsParsesThem) {
  EXPECT_EQ(JoinWindowsCommandLine({"C:\\Program Files\\dmlserve\\dmlserve.exe", "service", "run",
                                    "--tensor_repository=D:\\models\\"}),
            "\"C:\\Program Files\\dmlserve\\dmlserve.exe\" service run "
            "--tensor_repository=D:\\models\\");
  // Trailing backslashes double before the closing quote; quotes escape.
  EXPECT_EQ(JoinWindowsCommandLine({"--dir=C:\\my models\\"}), "\"--dir=C:\\my models\\\\\"");
  EXPECT_EQ(JoinWindowsCommandLine({"say \"hi\""}), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(JoinWindowsCommandLine({"a\\\"b"}), "\"a\\\\\\\"b\"");
  EXPECT_EQ(JoinWindowsCommandLine({""}), "\"\"");
}

TEST(ServiceCommandTest, OnLinuxEveryVerbPointsToSystemd) {
  ServiceCommand command;
  command.verb = "install";
  EXPECT_EQ(RunServiceCommand(command, "/usr/bin/dmlserve", absl::Seconds(30),
                              [](std::shared_ptr<ServerControl>) { return 0; }),
            2);
}

}  // namespace
}  // namespace dmlserve

// Start-up failures: a clear message on stderr and a non-zero exit.

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/server_process.h"

namespace dmlserve::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ServerProcess::Exit RunServer(const std::vector<std::string>& flags) {
  std::vector<std::string> args = {"--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0"};
  args.insert(args.end(), flags.begin(), flags.end());
  absl::StatusOr<ServerProcess::Exit> exit = ServerProcess::RunToExit(ServerBinary(), args);
  EXPECT_TRUE(exit.ok()) << exit.status();
  return exit.ok() ? *exit : ServerProcess::Exit{};
}

TEST(StartupTest, UnknownD3D12AdapterIsRejected) {
  if (!BuiltWithD3D12()) GTEST_SKIP() << "this build has no D3D12 backend";
  const ServerProcess::Exit exit = RunServer({"--backend=d3d12", "--devices=7"});
  EXPECT_NE(exit.exit_code, 0);
  EXPECT_THAT(exit.output, HasSubstr("--backend=d3d12: no devices"));
  EXPECT_THAT(exit.output, HasSubstr("7"));
  EXPECT_THAT(exit.output, Not(HasSubstr("serving gRPC")));
}

// docs/d3d12.md: a user who names an adapter wants that adapter; auto falls
// back to the CPU only when none was named (AutoUsesHardwareAdapters...).
TEST(StartupTest, AutoWithAnUnknownAdapterFailsRatherThanServingOnTheCpu) {
  if (!BuiltWithD3D12()) GTEST_SKIP() << "this build has no D3D12 backend";
  const ServerProcess::Exit exit = RunServer({"--backend=auto", "--devices=7"});
  EXPECT_NE(exit.exit_code, 0);
  EXPECT_THAT(exit.output, HasSubstr("--backend=auto with --devices"));
  EXPECT_THAT(exit.output, HasSubstr("7"));
  EXPECT_THAT(exit.output, Not(HasSubstr("serving gRPC")));
}

TEST(StartupTest, BadDeviceListIsRejected) {
  const ServerProcess::Exit exit = RunServer({"--backend=d3d12", "--devices=0,x"});
  EXPECT_NE(exit.exit_code, 0);
  EXPECT_THAT(exit.output, HasSubstr("--devices=0,x"));
}

TEST(StartupTest, AutoUsesHardwareAdaptersButNeverSoftwareOnes) {
  if (!BuiltWithD3D12()) GTEST_SKIP() << "this build has no D3D12 backend";
  // CI has lavapipe only: auto must not pick a software GPU over the CPU, and
  // the log says which adapters it found and why it did not use them. On a
  // machine with a GPU (an H100 through vkd3d, say) auto serves on it.
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start(ServerBinary(), {"--backend=auto"});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string output = (*server)->Output();
  if (output.find(", used\n") != std::string::npos) {
    EXPECT_THAT(output, HasSubstr("device d3d12:0"));
    EXPECT_THAT(output, Not(HasSubstr("(software), used")));
    return;
  }
  EXPECT_THAT(output, HasSubstr("(software), not used"));
  EXPECT_THAT(output, HasSubstr("device cpu:0"));
  EXPECT_THAT(output, Not(HasSubstr("device d3d12:0")));
}

// docs/api.md: the default build serves --backend=d3d12 (lavapipe where
// there is no GPU); only a build configured without the backend refuses it.
TEST(StartupTest, D3D12BackendServesUnlessTheBuildLeftItOut) {
  if (!BuiltWithD3D12()) {
    const ServerProcess::Exit exit = RunServer({"--backend=d3d12"});
    EXPECT_NE(exit.exit_code, 0);
    EXPECT_THAT(exit.output, HasSubstr("UNIMPLEMENTED"));
    EXPECT_THAT(exit.output, HasSubstr("this build has no D3D12 backend"));
    return;
  }
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start(ServerBinary(), {"--backend=d3d12", "--cpu_fallback=false"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Output(), HasSubstr("dmlserve: device d3d12:0"));
  absl::StatusOr<int> stopped = (*server)->Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(*stopped, 0);
}

TEST(StartupTest, UnknownBackendIsRejected) {
  const ServerProcess::Exit exit = RunServer({"--backend=tpu"});
  EXPECT_NE(exit.exit_code, 0);
  EXPECT_THAT(exit.output, HasSubstr("--backend=tpu: expected cpu, d3d12 or auto"));
}

TEST(StartupTest, UnknownPlacementIsRejected) {
  const ServerProcess::Exit exit = RunServer({"--placement=fastest"});
  EXPECT_NE(exit.exit_code, 0);
  EXPECT_THAT(exit.output, HasSubstr("--placement=fastest: expected cost or gpu_first"));
  EXPECT_THAT(exit.output, Not(HasSubstr("serving gRPC")));
}

// A CPU-only server has nothing to place: it says so rather than calibrate.
TEST(StartupTest, PlacementIsLoggedOnlyWhereUnlikeDevicesServe) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start(ServerBinary(), {"--backend=cpu", "--placement=cost"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Output(), Not(HasSubstr("placement: cost")));
  absl::StatusOr<int> stopped = (*server)->Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(*stopped, 0);
}

TEST(StartupTest, InvalidLimitsAreRejected) {
  for (const std::string flag :
       {"--max_queue=0", "--max_batch_size=0", "--cpu_devices=0", "--max_request_bytes=0",
        "--max_queue_delay_us=-1", "--hold_backstop_us=-1", "--max_inflight_bytes=1000",
        "--max_registered_tensors=0", "--max_batch_attempts=0", "--max_connection_idle=0",
        "--max_connection_idle=500us", "--max_connection_age=1000h"}) {
    SCOPED_TRACE(flag);
    const ServerProcess::Exit exit = RunServer({flag});
    EXPECT_NE(exit.exit_code, 0);
    EXPECT_THAT(exit.output, HasSubstr(flag.substr(0, flag.find('='))));
  }
}

TEST(StartupTest, MalformedFaultInjectionIsRejected) {
  // Each test runs in a process of its own; the server inherits this.
  setenv("DMLSERVE_INJECT_BATCH_DELAY_US", "soon", /*overwrite=*/1);
  const ServerProcess::Exit exit = RunServer({});
  unsetenv("DMLSERVE_INJECT_BATCH_DELAY_US");
  EXPECT_NE(exit.exit_code, 0);
  EXPECT_THAT(exit.output, HasSubstr("DMLSERVE_INJECT_BATCH_DELAY_US=soon: expected a number of "
                                     "microseconds"));
}

TEST(StartupTest, FaultInjectionIsAnnouncedAtStartUp) {
  setenv("DMLSERVE_INJECT_BATCH_DELAY_US", "1500", /*overwrite=*/1);
  absl::StatusOr<std::unique_ptr<ServerProcess>> server = ServerProcess::Start(ServerBinary());
  unsetenv("DMLSERVE_INJECT_BATCH_DELAY_US");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Output(), HasSubstr("fault injection: every batch waits 1.5ms"));
}

TEST(StartupTest, BusyPortIsReportedAsSuch) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> first = ServerProcess::Start(ServerBinary());
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<ServerProcess::Exit> second = ServerProcess::RunToExit(
      ServerBinary(), {"--listen=" + (*first)->grpc_address(), "--metrics_listen=127.0.0.1:0"});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(second->exit_code, 0);
  EXPECT_THAT(second->output, HasSubstr("--listen=" + (*first)->grpc_address()));
  absl::StatusOr<int> stopped = (*first)->Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(*stopped, 0);
}

// D3D12 where an adapter is usable, else the CPU: either way it serves.
TEST(StartupTest, AutoBackendStartsOnWhateverIsUsable) {
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start(ServerBinary(), {"--backend=auto"});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->Output(), HasSubstr("dmlserve: device "));
  absl::StatusOr<int> stopped = (*server)->Stop();
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(*stopped, 0);
}

}  // namespace
}  // namespace dmlserve::testing

// SIGTERM with work in flight: every admitted call completes and the server
// exits 0.

#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

class ShutdownTest : public ServerTest {
 protected:
  // Batches take long enough (an injected second each) for their jobs to be
  // in flight when the signal comes.
  std::vector<std::string> ServerFlags() const override { return {"--max_batch_size=64"}; }
  absl::Duration InjectedBatchDelay() const override { return absl::Seconds(1); }
};

TEST_F(ShutdownTest, SigtermFinishesInFlightWorkAndExitsZero) {
  constexpr int kUnary = 12;
  absl::BlockingCounter pending(kUnary);
  std::vector<std::unique_ptr<AsyncCall>> calls = StartScans(kUnary, &pending);
  // A stream with its items sent and half-closed, answers still to come.
  auto stream_context = MakeContext();
  auto stream = stub_->ExecuteStream(stream_context.get());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(stream->Write(
        ScanRequest(absl::StrCat("s", i), v1::FLOAT32, {2}, {static_cast<double>(i), 1}, 0)));
  }
  ASSERT_TRUE(stream->WritesDone());

  ASSERT_TRUE(WaitForMetric("dmlserve_inflight_requests", {}, [](double n) {
    return n == kUnary + 3;
  })) << server_->Output();
  server_->Signal(SIGTERM);

  pending.Wait();
  for (int i = 0; i < kUnary; ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(calls[i]->status.ok()) << calls[i]->status.error_message();
    EXPECT_EQ(TensorValues(calls[i]->response.output()),
              (std::vector<double>{i + 0.0, i + 1.0, i + 2.0}));
  }
  int streamed = 0;
  v1::ExecuteResponse response;
  while (stream->Read(&response)) {
    EXPECT_EQ(response.status().code(), 0) << response.status().message();
    ++streamed;
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(streamed, 3);

  absl::StatusOr<int> exit_code = server_->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 0) << server_->Output();
  EXPECT_FALSE(server_->Alive());
}

TEST_F(ShutdownTest, SigintIsAGracefulStopToo) {
  ExpectServerStillAnswers();
  server_->Signal(SIGINT);
  absl::StatusOr<int> exit_code = server_->Wait(absl::Seconds(60));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 0) << server_->Output();
}

}  // namespace
}  // namespace dmlserve::testing

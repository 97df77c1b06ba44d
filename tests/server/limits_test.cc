// Limits and client control: oversized requests, a full queue, deadlines and
// cancellation. After each, the server still answers.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kSum[] = "cumulative_summation";

class OversizedRequestTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override { return {"--max_request_bytes=65536"}; }
};

TEST_F(OversizedRequestTest, IsResourceExhausted) {
  const std::vector<double> values(20000, 1.0);  // 80000 bytes of FLOAT32
  v1::ExecuteResponse response;
  const grpc::Status status =
      Execute(ScanRequest("big", v1::FLOAT32, {20000}, values, 0), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();

  v1::Tensor big = MakeTensor(v1::FLOAT32, {20000}, values);
  const grpc::Status register_status = Register(big, nullptr);
  EXPECT_EQ(register_status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Just under the limit is fine.
  const std::vector<double> fitting(15000, 1.0);
  ASSERT_TRUE(Execute(ScanRequest("fits", v1::FLOAT32, {15000}, fitting, 0), &response).ok());
  EXPECT_EQ(TensorValues(response.output()).back(), 15000.0);
  ExpectServerStillAnswers();
}

TEST_F(OversizedRequestTest, AHugeOutputFromSmallInputsIsResourceExhausted) {
  // 1024 x 1 times 1 x 1024: 2 KiB of inputs asking for 1 MiB of output.
  QuantizedMatMulCase c;
  c.m = 1024;
  c.k = 1;
  c.n = 1024;
  c.a.assign(c.m * c.k, 3);
  c.b.assign(c.k * c.n, 5);
  v1::ExecuteResponse response;
  const grpc::Status status = Execute(MatMulRequest("huge", c), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("quantized_linear_matrix_multiply.output: UINT8 sizes [1,1,1024,1024] "
                        "need 1048576 bytes, over the limit of 65536 bytes"));

  // An output within the limit is computed.
  c.m = 64;
  c.a.assign(c.m * c.k, 3);
  ASSERT_TRUE(Execute(MatMulRequest("fits", c), &response).ok());
  EXPECT_EQ(TensorValues(response.output()), QuantizedMatMulReference(c));
  ExpectServerStillAnswers();
}

// Batches take long enough (an injected 3 s before each runs) for the client
// to give up on its request first.
class SlowQueueTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override { return {"--max_batch_size=64"}; }
  absl::Duration InjectedBatchDelay() const override { return absl::Seconds(3); }

  // Not computed: no batch of the operator ran.
  void ExpectNoBatchRan() {
    EXPECT_EQ(Metric("dmlserve_batch_size_count", {{"operator", kSum}}).value_or(0), 0.0);
  }
};

TEST_F(SlowQueueTest, DeadlineExceededJobIsNotComputed) {
  auto context = MakeContext(absl::Seconds(1));
  v1::ExecuteResponse response;
  const grpc::Status status =
      stub_->Execute(context.get(), ScanRequest("late", v1::FLOAT32, {3}, {1, 2, 3}, 0), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);

  // The server answers the job (to nobody) when its batch is about to run;
  // it must not have been computed.
  ASSERT_TRUE(WaitForMetric("dmlserve_requests_total", {{"operator", kSum}},
                            [](double count) { return count >= 1; }));
  EXPECT_EQ(Metric("dmlserve_requests_total", {{"operator", kSum}, {"code", "OK"}}).value_or(0),
            0.0);
  EXPECT_EQ(Metric("dmlserve_requests_total", {{"operator", kSum}, {"code", "DEADLINE_EXCEEDED"}})
                    .value_or(0) +
                Metric("dmlserve_requests_total", {{"operator", kSum}, {"code", "CANCELLED"}})
                    .value_or(0),
            1.0);
  ExpectNoBatchRan();
  ExpectServerStillAnswers();
}

TEST_F(SlowQueueTest, CancelledJobIsNotComputed) {
  grpc::ClientContext context;
  v1::ExecuteResponse response;
  grpc::Status status;
  absl::Notification done;
  const v1::ExecuteRequest request = ScanRequest("cancel-me", v1::FLOAT32, {3}, {1, 2, 3}, 0);
  stub_->async()->Execute(&context, &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  ASSERT_TRUE(WaitForMetric("dmlserve_inflight_requests", {}, [](double n) { return n == 1; }));
  context.TryCancel();
  done.WaitForNotification();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED);

  EXPECT_TRUE(WaitForMetric("dmlserve_requests_total", {{"operator", kSum}, {"code", "CANCELLED"}},
                            [](double count) { return count == 1; }));
  ExpectNoBatchRan();
  ExpectServerStillAnswers();
}

// Requests hold their message, output and the device's working memory for
// them until answered; the server-wide budget refuses what would go over it,
// and frees it as responses go out.
class InflightBytesTest : public ServerTest {
 protected:
  // One 10000-element scan needs ~80 KB on the CPU, ~240 KB on D3D12 (which
  // also counts its staging and device copies, 4x the input): one fits and
  // two do not.
  static uint64_t Budget() { return ServingBackend() == "d3d12" ? 393216 : 131072; }

  std::vector<std::string> ServerFlags() const override {
    return {"--max_request_bytes=65536", absl::StrCat("--max_inflight_bytes=", Budget()),
            "--max_batch_size=64"};
  }
  absl::Duration InjectedBatchDelay() const override { return absl::Seconds(2); }
};

TEST_F(InflightBytesTest, RequestsOverTheBudgetAreResourceExhausted) {
  // 10000 FLOAT32 values: about 40 KB of message and 40 KB of output each.
  const std::vector<double> values(10000, 1.0);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  v1::ExecuteRequest first = ScanRequest("first", v1::FLOAT32, {10000}, values, 0);
  v1::ExecuteResponse first_response;
  grpc::Status first_status;
  absl::Notification first_done;
  stub_->async()->Execute(&context, &first, &first_response, [&](grpc::Status status) {
    first_status = std::move(status);
    first_done.Notify();
  });
  // In flight for the injected 2 s.
  ASSERT_TRUE(WaitForMetric("dmlserve_inflight_requests", {}, [](double n) { return n == 1; }));
  EXPECT_GT(Metric("dmlserve_inflight_request_bytes").value_or(0), 80000.0);

  v1::ExecuteResponse response;
  const grpc::Status second =
      Execute(ScanRequest("second", v1::FLOAT32, {10000}, values, 0), &response);
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(second.error_message(), HasSubstr(absl::StrCat("--max_inflight_bytes=", Budget())));

  first_done.WaitForNotification();
  ASSERT_TRUE(first_status.ok()) << first_status.error_message();
  EXPECT_EQ(TensorValues(first_response.output()).back(), 10000.0);
  // Answered: its bytes are free again and the next request fits.
  EXPECT_TRUE(
      WaitForMetric("dmlserve_inflight_request_bytes", {}, [](double n) { return n == 0; }));
  ASSERT_TRUE(Execute(ScanRequest("third", v1::FLOAT32, {10000}, values, 0), &response).ok());
  EXPECT_EQ(TensorValues(response.output()).back(), 10000.0);
}

// Every device busy (an injected 2 s per batch): the queue fills.
class FullQueueTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override {
    return {"--max_queue=1", "--max_batch_size=64"};
  }
  absl::Duration InjectedBatchDelay() const override { return absl::Seconds(2); }
};

TEST_F(FullQueueTest, FloodIsResourceExhaustedBeyondTheQueue) {
  constexpr int kRequests = 20;
  absl::BlockingCounter pending(kRequests);
  std::vector<std::unique_ptr<AsyncCall>> calls = StartScans(kRequests, &pending);
  pending.Wait();

  int ok = 0, exhausted = 0;
  for (int i = 0; i < kRequests; ++i) {
    const AsyncCall& call = *calls[i];
    SCOPED_TRACE(i);
    if (call.status.ok()) {
      ++ok;
      EXPECT_EQ(TensorValues(call.response.output()),
                (std::vector<double>{i + 0.0, i + 1.0, i + 2.0}));
    } else {
      EXPECT_EQ(call.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
          << call.status.error_message();
      ++exhausted;
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(exhausted, 1);
  EXPECT_EQ(Metric("dmlserve_requests_total", {{"operator", kSum}, {"code", "RESOURCE_EXHAUSTED"}})
                .value_or(0),
            exhausted);
  ExpectServerStillAnswers();
}

}  // namespace
}  // namespace dmlserve::testing

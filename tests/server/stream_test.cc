// ExecuteStream: matching by request_id, per-item errors, flow control,
// half-close and cancellation.

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class StreamTest : public ServerTest {
 protected:
  // A queue delay long enough for items to share batches and for batches of
  // different operators to finish in a different order than they arrived.
  std::vector<std::string> ServerFlags() const override {
    return {"--max_queue_delay_us=5000", "--cpu_devices=2"};
  }
};

TEST_F(StreamTest, ResponsesMatchRequestsByIdWhateverTheirOrder) {
  absl::BitGen bitgen;
  const QuantizedMatMulCase weights = RandomWeights(bitgen, /*k=*/8, /*n=*/5);
  std::map<std::string, std::vector<double>> expected;
  std::vector<v1::ExecuteRequest> requests;
  for (int i = 0; i < 60; ++i) {
    const std::string id = absl::StrCat("item-", i);
    if (i % 3 == 0) {
      const QuantizedMatMulCase c = RandomMatMulCase(bitgen, weights);
      requests.push_back(MatMulRequest(id, c));
      expected[id] = QuantizedMatMulReference(c);
    } else {
      ScanCase scan = RandomScanCase(bitgen, id);
      requests.push_back(std::move(scan.request));
      expected[id] = std::move(scan.expected);
    }
  }

  auto context = MakeContext();
  auto stream = stub_->ExecuteStream(context.get());
  for (const v1::ExecuteRequest& request : requests) ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->WritesDone());
  std::map<std::string, v1::ExecuteResponse> responses;
  v1::ExecuteResponse response;
  while (stream->Read(&response)) {
    EXPECT_FALSE(responses.count(response.request_id())) << "twice: " << response.request_id();
    responses[response.request_id()] = response;
  }
  const grpc::Status status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), requests.size());
  for (const auto& [id, values] : expected) {
    SCOPED_TRACE(id);
    ASSERT_TRUE(responses.count(id));
    EXPECT_EQ(responses[id].status().code(), 0) << responses[id].status().message();
    EXPECT_EQ(TensorValues(responses[id].output()), values);
  }
}

TEST_F(StreamTest, BadItemGetsItsOwnErrorAndTheStreamGoesOn) {
  auto context = MakeContext();
  auto stream = stub_->ExecuteStream(context.get());
  v1::ExecuteResponse response;

  // One at a time, so each response is known to follow its request.
  ASSERT_TRUE(stream->Write(ScanRequest("good-1", v1::FLOAT32, {4}, {1, 2, 3, 4}, 0)));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.request_id(), "good-1");
  EXPECT_EQ(response.status().code(), 0);
  EXPECT_EQ(TensorValues(response.output()), (std::vector<double>{1, 3, 6, 10}));

  v1::ExecuteRequest bad =
      ScanRequest("bad-length", v1::FLOAT32, {1, 1, 3, 4}, std::vector<double>(11, 1.0), 3);
  ASSERT_TRUE(stream->Write(bad));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.request_id(), "bad-length");
  EXPECT_EQ(response.status().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(response.status().message(), StartsWith("cumulative_summation.input.data"));
  EXPECT_FALSE(response.has_output());

  v1::ExecuteRequest no_operator;
  no_operator.set_request_id("no-operator");
  ASSERT_TRUE(stream->Write(no_operator));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.request_id(), "no-operator");
  EXPECT_EQ(response.status().code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(response.status().message(), HasSubstr("operator: required"));

  ASSERT_TRUE(stream->Write(ScanRequest("good-2", v1::FLOAT32, {3}, {2, 2, 2}, 0,
                                        /*product=*/true)));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.request_id(), "good-2");
  EXPECT_EQ(response.status().code(), 0) << response.status().message();
  EXPECT_EQ(TensorValues(response.output()), (std::vector<double>{2, 4, 8}));

  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(StreamTest, HalfCloseWithNothingSentFinishesOk) {
  auto context = MakeContext();
  auto stream = stub_->ExecuteStream(context.get());
  ASSERT_TRUE(stream->WritesDone());
  v1::ExecuteResponse response;
  EXPECT_FALSE(stream->Read(&response));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(StreamTest, ClientCancellationEndsTheStreamAndTheServerGoesOn) {
  auto context = MakeContext();
  auto stream = stub_->ExecuteStream(context.get());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(stream->Write(ScanRequest(absl::StrCat("c", i), v1::FLOAT32, {2}, {1, 1}, 0)));
  }
  context->TryCancel();
  v1::ExecuteResponse response;
  while (stream->Read(&response)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ExpectServerStillAnswers();
}

// A stream longer than the admission queue: reading pauses while the queue's
// worth of items is unanswered, so the stream itself never overflows it.
class SmallQueueStreamTest : public ServerTest {
 protected:
  std::vector<std::string> ServerFlags() const override {
    return {"--max_queue=4", "--max_queue_delay_us=1000"};
  }
};

TEST_F(SmallQueueStreamTest, LongStreamIsHeldBackNotRejected) {
  constexpr int kItems = 300;
  auto context = MakeContext();
  auto stream = stub_->ExecuteStream(context.get());
  std::thread writer([&] {
    for (int i = 0; i < kItems; ++i) {
      if (!stream->Write(
              ScanRequest(absl::StrCat(i), v1::INT32, {3}, {static_cast<double>(i), 1, 1}, 0)))
        break;
    }
    stream->WritesDone();
  });
  int answered = 0;
  v1::ExecuteResponse response;
  while (stream->Read(&response)) {
    SCOPED_TRACE(response.request_id());
    ++answered;
    const int i = std::stoi(response.request_id());
    EXPECT_EQ(response.status().code(), 0) << response.status().message();
    EXPECT_EQ(TensorValues(response.output()), (std::vector<double>{i + 0.0, i + 1.0, i + 2.0}));
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, kItems);
}

// Items whose outputs are as large as a request may be: a tiny matmul
// (K = 1) asks for a --max_request_bytes output. The stream holds one such
// output at a time, not a queue's worth (which would let one client that does
// not read its responses exhaust the server's memory with a few KB of
// requests), so each item is read only after the previous answer was written
// and runs alone, however long the queue delay is.
class HugeOutputStreamTest : public ServerTest {
 protected:
  static constexpr uint32_t kOutputBytes = 1 << 20;
  std::vector<std::string> ServerFlags() const override {
    return {absl::StrCat("--max_request_bytes=", kOutputBytes), "--max_queue_delay_us=200000"};
  }
};

TEST_F(HugeOutputStreamTest, HoldsOneHugeOutputAtATime) {
  constexpr int kItems = 6;
  QuantizedMatMulCase c;
  c.m = 1024;
  c.k = 1;
  c.n = 1024;
  c.a.assign(c.m, 3);
  c.b.assign(c.n, 5);
  ASSERT_EQ(uint64_t{c.m} * c.n, kOutputBytes);
  auto context = MakeContext();
  auto stream = stub_->ExecuteStream(context.get());
  std::thread writer([&] {
    for (int i = 0; i < kItems; ++i) {
      if (!stream->Write(MatMulRequest(absl::StrCat(i), c))) break;
    }
    stream->WritesDone();
  });
  int answered = 0;
  v1::ExecuteResponse response;
  while (stream->Read(&response)) {
    SCOPED_TRACE(response.request_id());
    ++answered;
    ASSERT_EQ(response.status().code(), 0) << response.status().message();
    EXPECT_EQ(response.output().data(), std::string(kOutputBytes, '\x0f'));
    EXPECT_EQ(response.info().batch_size(), 1u);
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, kItems);
}

// Bad items are answered with their request_id echoed: a client sending bad
// items with huge ids and not reading the answers must be held back by flow
// control like one asking for huge outputs, not grow the server by the sum
// of its ids.
TEST_F(HugeOutputStreamTest, BadItemsWithHugeIdsAreHeldBackToo) {
  constexpr int kItems = 48;
  const std::string id(900 << 10, 'i');  // 900 KiB, under the 1 MiB message limit
  auto context = MakeContext();
  auto stream = stub_->ExecuteStream(context.get());
  const uint64_t peak_before = server_->PeakResidentBytes();
  std::thread writer([&] {
    for (int i = 0; i < kItems; ++i) {
      v1::ExecuteRequest bad;  // no operator: refused before it becomes a job
      bad.set_request_id(absl::StrCat(i, id));
      if (!stream->Write(bad)) break;
    }
    stream->WritesDone();
  });
  // Time for the server to read whatever it is going to read (43 MiB of
  // items if nothing held it back) before any answer is taken.
  absl::SleepFor(absl::Seconds(2));
  const uint64_t growth = server_->PeakResidentBytes() - peak_before;
  if (ResidentSizeIsMeaningful()) {
    EXPECT_LT(growth, uint64_t{24} << 20) << "the server grew by " << (growth >> 20) << " MiB";
  }
  int answered = 0;
  v1::ExecuteResponse response;
  while (stream->Read(&response)) {
    EXPECT_EQ(response.request_id(), absl::StrCat(answered, id));
    EXPECT_EQ(response.status().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
    ++answered;
  }
  writer.join();
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_EQ(answered, kItems);
}

}  // namespace
}  // namespace dmlserve::testing

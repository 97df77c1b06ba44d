// Bytes that are not a valid protobuf message, sent as gRPC messages (a
// generic stub, so nothing on the client side parses or checks them): every
// method answers INVALID_ARGUMENT saying so, a stream ends with that status
// after answering what it read before, and the request metrics count them.

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

using ::testing::HasSubstr;

// A field tag of field number 0: not valid wire format in any message.
const std::string kNotAMessage("\x00\x01\x02", 3);

grpc::ByteBuffer BytesOf(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer Serialized(const google::protobuf::MessageLite& message) {
  return BytesOf(message.SerializeAsString());
}

class MalformedMessageTest : public ServerTest {
 protected:
  grpc::Status CallUnary(const std::string& method, const std::string& bytes) {
    grpc::GenericStub stub(channel_);
    auto context = MakeContext();
    grpc::ByteBuffer request = BytesOf(bytes), response;
    grpc::Status result;
    absl::Notification done;
    stub.UnaryCall(context.get(), "/dmlserve.v1.OperatorService/" + method, grpc::StubOptions(),
                   &request, &response, [&](grpc::Status status) {
                     result = std::move(status);
                     done.Notify();
                   });
    done.WaitForNotification();
    return result;
  }
};

TEST_F(MalformedMessageTest, UnaryCallsAreInvalidArgumentSayingSo) {
  for (const char* method : {"Execute", "RegisterTensor", "ReleaseTensor", "GetServerInfo"}) {
    SCOPED_TRACE(method);
    const grpc::Status status = CallUnary(method, kNotAMessage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                HasSubstr(": the 3 bytes received are not a valid message of this type"));
  }
  EXPECT_THAT(CallUnary("Execute", kNotAMessage).error_message(),
              HasSubstr("dmlserve.v1.ExecuteRequest"));
  // Counted with the other requests (two unparsable Executes so far).
  EXPECT_EQ(
      Metric("dmlserve_requests_total", {{"operator", "unknown"}, {"code", "INVALID_ARGUMENT"}}),
      2.0);
  // An empty message is a valid one (every field at its default).
  EXPECT_TRUE(CallUnary("GetServerInfo", "").ok());
  ExpectServerStillAnswers();
}

// Writes `items` in order, half-closes, and collects the responses and the
// final status.
class RawStream : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RawStream(grpc::GenericStub* stub, std::vector<grpc::ByteBuffer> items)
      : items_(std::move(items)) {
    context_.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    stub->PrepareBidiStreamingCall(&context_, "/dmlserve.v1.OperatorService/ExecuteStream",
                                   grpc::StubOptions(), this);
    StartRead(&read_);
    WriteNext();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    v1::ExecuteResponse response;
    std::vector<grpc::Slice> slices;
    if (read_.Dump(&slices).ok()) {
      std::string bytes;
      for (const grpc::Slice& s : slices)
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      if (response.ParseFromString(bytes)) responses_.push_back(std::move(response));
    }
    StartRead(&read_);
  }
  void OnDone(const grpc::Status& status) override {
    status_ = status;
    done_.Notify();
  }

  // Waits for the end of the call.
  const grpc::Status& Await() {
    done_.WaitForNotification();
    return status_;
  }
  const std::vector<v1::ExecuteResponse>& responses() const { return responses_; }

 private:
  void WriteNext() {
    if (next_ < items_.size()) {
      StartWrite(&items_[next_++]);
    } else if (next_++ == items_.size()) {
      StartWritesDone();
    }
  }

  grpc::ClientContext context_;
  std::vector<grpc::ByteBuffer> items_;
  size_t next_ = 0;
  grpc::ByteBuffer read_;
  std::vector<v1::ExecuteResponse> responses_;
  grpc::Status status_;
  absl::Notification done_;
};

// Once a stream item did not parse, the stream ended OK after answering the
// items before it, and the client's later items were silently dropped.
TEST_F(MalformedMessageTest, AStreamEndsInvalidArgumentAtTheItemThatDidNotParse) {
  grpc::GenericStub stub(channel_);
  RawStream stream(&stub, {Serialized(ScanRequest("first", v1::FLOAT32, {3}, {1, 2, 3}, 0)),
                           BytesOf(kNotAMessage),
                           Serialized(ScanRequest("never", v1::FLOAT32, {2}, {1, 1}, 0))});
  const grpc::Status status = stream.Await();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(),
              HasSubstr("stream item 1: dmlserve.v1.ExecuteRequest: the 3 bytes received are not "
                        "a valid message of this type"));
  // The item before it was answered; the one after it was not read.
  ASSERT_EQ(stream.responses().size(), 1u);
  EXPECT_EQ(stream.responses()[0].request_id(), "first");
  EXPECT_EQ(TensorValues(stream.responses()[0].output()), (std::vector<double>{1, 3, 6}));
  ExpectServerStillAnswers();
}

}  // namespace
}  // namespace dmlserve::testing

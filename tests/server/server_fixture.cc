#include "tests/server/server_fixture.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/server/metrics_scrape.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {

std::string ServerBinary() { return DMLSERVE_BINARY; }

bool BuiltWithD3D12() {
#ifdef DMLSERVE_TEST_HAVE_D3D12
  return true;
#else
  return false;
#endif
}

bool ResidentSizeIsMeaningful() {
#if defined(__SANITIZE_ADDRESS__)
  return false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return false;
#else
  return true;
#endif
#else
  return true;
#endif
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  arguments.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments);
}

std::string ServingBackend() {
  const char* args = std::getenv("DMLSERVE_SERVER_ARGS");
  return args != nullptr && absl::StrContains(args, "--backend=d3d12") ? "d3d12" : "cpu";
}

std::unique_ptr<grpc::ClientContext> MakeContext(absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return context;
}

void ServerTest::SetUp() {
  // The server inherits this process's environment; each test runs in a
  // process of its own.
  if (const absl::Duration delay = InjectedBatchDelay(); delay > absl::ZeroDuration()) {
    setenv("DMLSERVE_INJECT_BATCH_DELAY_US", absl::StrCat(absl::ToInt64Microseconds(delay)).c_str(),
           /*overwrite=*/1);
  } else {
    unsetenv("DMLSERVE_INJECT_BATCH_DELAY_US");
  }
  absl::StatusOr<std::unique_ptr<ServerProcess>> server =
      ServerProcess::Start(ServerBinary(), ServerFlags());
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  channel_ = MakeChannel(server_->grpc_address());
  stub_ = v1::OperatorService::NewStub(channel_);
}

void ServerTest::TearDown() {
  if (server_ == nullptr) return;
  absl::StatusOr<int> exit_code = server_->Stop();
  ASSERT_TRUE(exit_code.ok()) << exit_code.status() << "\n" << server_->Output();
  EXPECT_EQ(*exit_code, 0) << server_->Output();
}

grpc::Status ServerTest::Execute(const v1::ExecuteRequest& request, v1::ExecuteResponse* response) {
  auto context = MakeContext();
  return stub_->Execute(context.get(), request, response);
}

grpc::Status ServerTest::Register(const v1::Tensor& tensor, std::string* tensor_id) {
  auto context = MakeContext();
  v1::RegisterTensorRequest request;
  *request.mutable_tensor() = tensor;
  v1::RegisterTensorResponse response;
  grpc::Status status = stub_->RegisterTensor(context.get(), request, &response);
  if (tensor_id != nullptr) *tensor_id = response.tensor_id();
  return status;
}

grpc::Status ServerTest::Release(const std::string& tensor_id) {
  auto context = MakeContext();
  v1::ReleaseTensorRequest request;
  request.set_tensor_id(tensor_id);
  v1::ReleaseTensorResponse response;
  return stub_->ReleaseTensor(context.get(), request, &response);
}

std::optional<double> ServerTest::Metric(const std::string& name,
                                         const std::map<std::string, std::string>& labels) {
  return ScrapeSum(server_->metrics_address(), name, labels);
}

bool ServerTest::WaitForMetric(const std::string& name,
                               const std::map<std::string, std::string>& labels,
                               const std::function<bool(double)>& predicate,
                               absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (predicate(Metric(name, labels).value_or(0))) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

void ServerTest::ExpectServerStillAnswers() {
  // cumulative_summation_example_1 of the reference pages.
  const v1::ExecuteRequest request = ScanRequest("still-answers", v1::FLOAT32, {1, 1, 3, 4},
                                                 {2, 1, 3, 5, 3, 8, 7, 3, 9, 6, 2, 4}, /*axis=*/3);
  v1::ExecuteResponse response;
  const grpc::Status status = Execute(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  EXPECT_EQ(response.request_id(), "still-answers");
  EXPECT_EQ(TensorValues(response.output()),
            (std::vector<double>{2, 3, 6, 11, 3, 11, 18, 21, 9, 15, 17, 21}));
  EXPECT_EQ(TensorSizes(response.output()), (std::vector<uint32_t>{1, 1, 3, 4}));
}

std::vector<std::unique_ptr<AsyncCall>> ServerTest::StartScans(int count,
                                                               absl::BlockingCounter* pending) {
  std::vector<std::unique_ptr<AsyncCall>> calls;
  for (int i = 0; i < count; ++i) {
    auto call = std::make_unique<AsyncCall>();
    call->context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    call->request =
        ScanRequest(absl::StrCat(i), v1::FLOAT32, {3}, {static_cast<double>(i), 1, 1}, 0);
    stub_->async()->Execute(&call->context, &call->request, &call->response,
                            [pending, c = call.get()](grpc::Status s) {
                              c->status = std::move(s);
                              pending->DecrementCount();
                            });
    calls.push_back(std::move(call));
  }
  return calls;
}

}  // namespace dmlserve::testing

#ifndef DMLSERVE_TESTS_SERVER_SERVER_FIXTURE_H_
#define DMLSERVE_TESTS_SERVER_SERVER_FIXTURE_H_

// A test fixture owning one dmlserve process and a stub connected to it.

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/time/time.h"
#include "dmlserve/v1/dmlserve.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/server/server_process.h"

namespace dmlserve::testing {

// The dmlserve binary under test.
std::string ServerBinary();

// The backend the suite's servers run on: "d3d12" when CTest set
// DMLSERVE_SERVER_ARGS to a D3D12 backend, else "cpu". Devices that compute
// requests are named "<backend>:<n>".
std::string ServingBackend();

// Whether this build has the D3D12 backend (tests of its adapters skip
// without it, as in the sanitizer builds).
bool BuiltWithD3D12();

// Whether the server's resident size says anything about what a request
// cost: not under AddressSanitizer, whose quarantine and shadow memory grow
// a process by hundreds of MiB whatever it does.
bool ResidentSizeIsMeaningful();

// An insecure loopback channel without a response size limit.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// A context whose deadline keeps a hung server from hanging the test.
std::unique_ptr<grpc::ClientContext> MakeContext(absl::Duration timeout = absl::Seconds(60));

// One asynchronous Execute call and what it returned.
struct AsyncCall {
  grpc::ClientContext context;
  v1::ExecuteRequest request;
  v1::ExecuteResponse response;
  grpc::Status status;
};

class ServerTest : public ::testing::Test {
 protected:
  // Flags added to --listen/--metrics_listen for this test's server.
  virtual std::vector<std::string> ServerFlags() const { return {}; }
  // Fault injection (DMLSERVE_INJECT_BATCH_DELAY_US): every batch waits this
  // long before it runs, so the server is busy and requests stay in flight or
  // queue without real long work. Zero: off.
  virtual absl::Duration InjectedBatchDelay() const { return absl::ZeroDuration(); }

  void SetUp() override;
  // Stops the server (SIGTERM) and expects a clean exit.
  void TearDown() override;

  grpc::Status Execute(const v1::ExecuteRequest& request, v1::ExecuteResponse* response);
  grpc::Status Register(const v1::Tensor& tensor, std::string* tensor_id);
  grpc::Status Release(const std::string& tensor_id);
  // Starts `count` asynchronous FLOAT32 scans (call i sums {i, 1, 1}, id
  // "i"); each counts `pending` down when answered.
  std::vector<std::unique_ptr<AsyncCall>> StartScans(int count, absl::BlockingCounter* pending);

  // The sum of the matching samples in a fresh scrape of /metrics.
  std::optional<double> Metric(const std::string& name,
                               const std::map<std::string, std::string>& labels = {});
  // Polls /metrics until `predicate` holds for the sum (0 when absent);
  // false if it never does within `timeout`.
  bool WaitForMetric(const std::string& name, const std::map<std::string, std::string>& labels,
                     const std::function<bool(double)>& predicate,
                     absl::Duration timeout = absl::Seconds(60));

  // Sends a known-good request and checks its exact result: the server still
  // works after whatever the test did before.
  void ExpectServerStillAnswers();

  std::unique_ptr<ServerProcess> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::OperatorService::Stub> stub_;
};

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SERVER_SERVER_FIXTURE_H_

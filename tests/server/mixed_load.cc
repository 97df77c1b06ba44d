#include "tests/server/mixed_load.h"

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"

namespace dmlserve::testing {

int RunMixedLoad(const std::string& address, const QuantizedMatMulCase& weights,
                 const std::string& weights_id, int threads, int requests_per_thread) {
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      absl::BitGen bitgen;
      // One channel per client, as separate processes would have.
      auto stub = v1::OperatorService::NewStub(MakeChannel(address));
      for (int i = 0; i < requests_per_thread; ++i) {
        const std::string id = absl::StrCat("t", t, "-", i);
        v1::ExecuteRequest request;
        std::vector<double> expected;
        if ((i + t) % 2 == 0) {
          const QuantizedMatMulCase c = RandomMatMulCase(bitgen, weights);
          request = MatMulRequest(id, c, weights_id);
          expected = QuantizedMatMulReference(c);
        } else {
          ScanCase scan = RandomScanCase(bitgen, id);
          request = std::move(scan.request);
          expected = std::move(scan.expected);
        }
        auto context = MakeContext();
        v1::ExecuteResponse response;
        const grpc::Status status = stub->Execute(context.get(), request, &response);
        if (!status.ok() || response.request_id() != id ||
            TensorValues(response.output()) != expected) {
          ++failures;
          ADD_FAILURE() << id << ": " << status.error_code() << " " << status.error_message()
                        << "\nrequest: " << request.ShortDebugString().substr(0, 400);
        }
      }
    });
  }
  for (std::thread& client : clients) client.join();
  return failures.load();
}

}  // namespace dmlserve::testing

// A tour of the C++ client: every operator, FLOAT16, registered weights, a
// stream and a health check. Run it against a server on 127.0.0.1:50051 (or
// pass another address); docs/client.md walks through it.

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "client/cpp/client.h"
#include "client/cpp/tensor_codec.h"

namespace dc = dmlserve::client;
namespace v1 = dmlserve::v1;

// An example has nowhere better to send errors than stderr.
template <typename T>
T OrExit(absl::StatusOr<T> result) {
  if (!result.ok()) {
    std::cerr << result.status()
              << "\n";  // e.g. "INVALID_ARGUMENT: cumulative_summation.axis: ..."
    std::exit(1);
  }
  return *std::move(result);
}

template <typename T>
void PrintAll(const std::vector<T>& values) {
  for (const T& value : values) std::cout << +value << " ";
  std::cout << "\n";
}

int main(int argc, char** argv) {
  std::unique_ptr<dc::Client> client =
      OrExit(dc::Client::Connect(argc > 1 ? argv[1] : "127.0.0.1:50051"));

  // Cumulative summation of a {1,1,3,4} float tensor along its last axis,
  // from the end, each output excluding its own element.
  const v1::Tensor input =
      dc::MakeTensor<float>({1, 1, 3, 4}, std::vector<float>{2, 1, 3, 5, 3, 8, 7, 3, 9, 6, 2, 4});
  dc::ScanOptions scan;
  scan.axis = 3;
  scan.reverse = true;
  scan.exclusive = true;
  const v1::ExecuteResponse sum = OrExit(
      client->CumulativeSummation(input, scan, dc::CallOptions::WithTimeout(absl::Seconds(5))));
  PrintAll(OrExit(dc::DecodeTensor<float>(sum.output())));
  std::cout << "ran on " << sum.info().device() << " in a batch of " << sum.info().batch_size()
            << "\n";

  // FLOAT16 data is built from floats and read back as floats.
  const v1::ExecuteResponse product = OrExit(client->CumulativeProduct(
      dc::MakeFloat16Tensor({4}, {0.5f, 2.0f, -1.5f, 4.0f}), dc::ScanOptions{}));
  PrintAll(OrExit(dc::DecodeFloat16Tensor(product.output())));

  // Weights kept on the server and used by id.
  const v1::RegisterTensorResponse registered = OrExit(client->RegisterTensor(
      dc::MakeTensor<uint8_t>({1, 1, 3, 2}, std::vector<uint8_t>{129, 127, 140, 128, 100, 255}),
      "weights"));
  dc::QuantizedMatMulInputs inputs;
  inputs.a =
      dc::MakeTensor<uint8_t>({1, 1, 2, 3}, std::vector<uint8_t>{130, 128, 120, 200, 10, 128});
  inputs.a_scale = dc::MakeTensor<float>({1, 1, 1, 1}, std::vector<float>{0.5f});
  inputs.a_zero_point = dc::MakeTensor<uint8_t>({1, 1, 1, 1}, std::vector<uint8_t>{128});
  inputs.b = dc::MakeTensorReference(registered.tensor_id());
  inputs.b_scale = dc::MakeTensor<float>({1, 1, 1, 1}, std::vector<float>{0.25f});
  inputs.b_zero_point = dc::MakeTensor<uint8_t>({1, 1, 1, 1}, std::vector<uint8_t>{128});
  inputs.output_scale = dc::MakeTensor<float>({1, 1, 1, 1}, std::vector<float>{2.0f});
  inputs.output_zero_point = dc::MakeTensor<uint8_t>({1, 1, 1, 1}, std::vector<uint8_t>{100});
  const v1::ExecuteResponse quantized = OrExit(client->QuantizedLinearMatrixMultiply(inputs));
  PrintAll(OrExit(dc::DecodeTensor<uint8_t>(quantized.output())));
  std::cout << client->ReleaseTensor("weights") << "\n";

  // Many requests on one stream; the results come back in request order,
  // each a response or that item's own error.
  std::vector<v1::ExecuteRequest> requests;
  for (uint32_t n : {1u, 3u, 5u}) {
    requests.push_back(dc::CumulativeSummationRequest(
        dc::MakeTensor<int32_t>({n}, std::vector<int32_t>(n, 2)), dc::ScanOptions{}));
  }
  requests.push_back(dc::CumulativeSummationRequest(
      dc::MakeTensor<int8_t>({2}, std::vector<int8_t>{1, 2}), dc::ScanOptions{}));
  for (const absl::StatusOr<v1::ExecuteResponse>& result : OrExit(client->ExecuteMany(requests))) {
    if (result.ok()) {
      std::cout << result->request_id() << ": ";
      PrintAll(OrExit(dc::DecodeTensor<int32_t>(result->output())));
    } else {
      std::cout << result.status() << "\n";
    }
  }

  std::cout << dc::HealthStatusName(OrExit(client->CheckHealth())) << "\n";
  return 0;
}

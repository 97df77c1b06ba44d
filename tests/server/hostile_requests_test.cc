// Legal requests a hostile client could send to cost the server far more
// than their size (issue 12): each is answered correctly, the server's memory
// stays near what the request and its answer need, and it keeps serving.

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/server/reference_ops.h"
#include "tests/server/server_fixture.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

// On the CPU backend. The D3D12 planner still describes every output row
// (16 bytes of row parameters, A and the output padded to 4-byte words, each
// staged in upload, device and readback memory): 8M rows of K = 1 grow a
// lavapipe server by ~600 MiB and the 16M broadcast products take over a
// minute there. That is the open D3D12 part of this work (issue 12).
class HostileRequestTest : public ServerTest {
 protected:
  void SetUp() override {
    if (ServingBackend() == "d3d12") {
      GTEST_SKIP() << "per-row planning on D3D12 is not bounded yet (issue 12)";
    }
    ServerTest::SetUp();
  }
};

// 8M rows of K = 1 (8 MiB in, 8 MiB out). The matrix multiply once described
// every row up front (~176 bytes each: 1.4 GiB for this request, 8.5 GB for
// 48M rows); rows are now made a chunk at a time.
TEST_F(HostileRequestTest, ATallProductWithKOfOneNeedsLittleMoreThanItsOperands) {
  QuantizedMatMulCase c;
  c.m = 8 << 20;
  c.k = 1;
  c.n = 1;
  c.a.resize(c.m);
  for (uint32_t i = 0; i < c.m; ++i) c.a[i] = i % 16;
  c.b = {7};
  const v1::ExecuteRequest request = MatMulRequest("tall", c);
  const uint64_t peak_before = server_->PeakResidentBytes();
  ASSERT_GT(peak_before, 0u);

  v1::ExecuteResponse response;
  const grpc::Status status = Execute(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::string& output = response.output().data();
  ASSERT_EQ(output.size(), c.m);
  for (uint32_t i = 0; i < c.m; ++i) {
    ASSERT_EQ(static_cast<uint8_t>(output[i]), (i % 16) * 7) << "row " << i;
  }
  // The request and the answer pass through gRPC's buffers and the
  // server's tensors a few times over (8 MiB each); 1.4 GiB of row
  // descriptions would not fit under this.
  const uint64_t growth = server_->PeakResidentBytes() - peak_before;
  EXPECT_LT(growth, uint64_t{160} << 20)
      << "peak resident size grew by " << (growth >> 20) << " MiB";
  ExpectServerStillAnswers();
}

// A {4096,1,1,1} x B {1,4096,1,1}: 8 KiB asking for 16M products of one
// multiply each (16 MiB out). Pairing the slices once tested every
// (batch, channel) for every B slice: 68G steps, over 20 s, during which the
// device served nobody else.
TEST_F(HostileRequestTest, SixteenMillionBroadcastProductsAreAnsweredCorrectly) {
  constexpr uint32_t kSlices = 4096;
  QuantizedMatMulCase c;
  c.m = c.k = c.n = 1;
  c.a = {0};
  c.b = {0};
  v1::ExecuteRequest request = MatMulRequest("broadcast", c);
  v1::QuantizedLinearMatrixMultiply* op = request.mutable_quantized_linear_matrix_multiply();
  std::string a(kSlices, '\0'), b(kSlices, '\0');
  for (uint32_t i = 0; i < kSlices; ++i) {
    a[i] = static_cast<char>(i % 16);
    b[i] = static_cast<char>((i / 16) % 16);
  }
  op->mutable_a()->clear_sizes();
  for (uint32_t size : {kSlices, 1u, 1u, 1u}) op->mutable_a()->add_sizes(size);
  op->mutable_a()->set_data(a);
  op->mutable_b()->clear_sizes();
  for (uint32_t size : {1u, kSlices, 1u, 1u}) op->mutable_b()->add_sizes(size);
  op->mutable_b()->set_data(b);

  grpc::ClientContext context;
  // Generous for a 2-core CI machine under load (the fix takes well under
  // a second here); the old code needed over 20 s.
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
  v1::ExecuteResponse response;
  const grpc::Status status = stub_->Execute(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
  const std::string& output = response.output().data();
  ASSERT_EQ(output.size(), uint64_t{kSlices} * kSlices);
  for (uint32_t batch = 0; batch < kSlices; ++batch) {
    for (uint32_t channel = 0; channel < kSlices; ++channel) {
      const uint32_t want = (batch % 16) * ((channel / 16) % 16);  // at most 225: no clamping
      ASSERT_EQ(static_cast<uint8_t>(output[uint64_t{batch} * kSlices + channel]), want)
          << "batch " << batch << ", channel " << channel;
    }
  }
  ExpectServerStillAnswers();
}

}  // namespace
}  // namespace dmlserve::testing

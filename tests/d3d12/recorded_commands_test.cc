// What the D3D12 runtime records into a batch's command list, counted by the
// kernel report's recorder (bench/d3d12_command_recorder.h) wrapped around
// the real list, on vkd3d + lavapipe, with the test kernels.

#include <memory>
#include <vector>

#include "bench/d3d12_command_recorder.h"
#include "gtest/gtest.h"
#include "kernels/d3d12/adapter_enumeration.h"
#include "kernels/d3d12/device_runtime.h"
#include "tests/d3d12/runtime_test_util.h"
#include "tests/d3d12/test_kernels.h"

namespace dmlserve::d3d12 {
namespace {

using ::dmlserve::bench::CommandRecorder;
using ::dmlserve::bench::RecordedCommands;
using ::dmlserve::d3d12::testing::AddDispatch;
using ::dmlserve::d3d12::testing::DeviceBuffer;
using ::dmlserve::d3d12::testing::RandomWords;
using ::dmlserve::d3d12::testing::TestAdapter;
using ::dmlserve::d3d12::testing::TestKernelLibrary;
using ::dmlserve::d3d12::testing::UploadBuffer;
using ::dmlserve::d3d12::testing::Words;

std::vector<uint32_t> Sum(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                          uint32_t bias) {
  std::vector<uint32_t> sum(a.size());
  for (size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i] + bias;
  return sum;
}

class RecordedCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<AdapterInfo> adapter = TestAdapter();
    ASSERT_TRUE(adapter.ok()) << adapter.status();
    absl::StatusOr<ComPtr<ID3D12Device>> device = CreateAdapterDevice(adapter->index);
    ASSERT_TRUE(device.ok()) << device.status();
    RuntimeOptions options;
    options.wrap_command_list = recorder_.Wrapper();
    // One command context: every batch records into the same list, so a
    // root-view cache that outlived the list's reset would show.
    options.inflight_batches = 1;
    absl::StatusOr<std::unique_ptr<DeviceRuntime>> runtime =
        DeviceRuntime::Create(*device, TestKernelLibrary(), options);
    ASSERT_TRUE(runtime.ok()) << runtime.status();
    runtime_ = std::move(*runtime);
  }

  CommandRecorder recorder_;  // outlives the runtime, which records into it
  std::unique_ptr<DeviceRuntime> runtime_;
};

// vkd3d 1.2 creates a Vulkan buffer view for every root SRV or UAV set (and
// destroys them all at the allocator's reset), so the executor sets a slot
// only when its address changes: root arguments persist across dispatches
// within a list. A slot that goes back to an earlier buffer is set again,
// and each batch's list (the same list, reset) starts with nothing set.
// lavapipe has VK_KHR_push_descriptor, so this is vkd3d's push-descriptor
// path; without it vkd3d rewrites the stored root descriptors into each new
// descriptor set itself.
TEST_F(RecordedCommandsTest, RootViewsAreSetOnlyWhereTheirAddressChanges) {
  const uint32_t n = 1000;
  const std::vector<uint32_t> a = RandomWords(n, 1), b = RandomWords(n, 2), c = RandomWords(n, 3);
  DispatchPlan plan;
  // 0: a, 1: b, 2: c; 3, 4, 5: outputs.
  plan.buffers = {UploadBuffer(a),
                  UploadBuffer(b),
                  UploadBuffer(c),
                  DeviceBuffer(BufferKind::kOutput, n),
                  DeviceBuffer(BufferKind::kOutput, n),
                  DeviceBuffer(BufferKind::kOutput, n)};
  plan.dispatches = {
      AddDispatch(0, 1, 3, n, 1),  // all 6 slots (t2, t3 and u1 unbound)
      AddDispatch(0, 2, 4, n, 2),  // t1 and u0 change
      AddDispatch(2, 1, 5, n, 3),  // t0, t1 (back to b) and u0 change
  };
  for (int batch = 0; batch < 3; ++batch) {
    absl::StatusOr<ReadBackBuffers> outputs = runtime_->Run(plan);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    EXPECT_EQ(Words((*outputs)[3]->view()), Sum(a, b, 1));
    EXPECT_EQ(Words((*outputs)[4]->view()), Sum(a, c, 2));
    EXPECT_EQ(Words((*outputs)[5]->view()), Sum(c, b, 3));
    const RecordedCommands recorded = recorder_.Take();
    EXPECT_EQ(recorded.dispatches, 3u);
    EXPECT_EQ(recorded.root_views, 6u + 2u + 3u) << "batch " << batch;
  }
}

}  // namespace
}  // namespace dmlserve::d3d12

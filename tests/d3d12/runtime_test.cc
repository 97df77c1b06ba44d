// The D3D12 runtime (devices, queues, memory, plan execution, faults) on
// real vkd3d + lavapipe, driven by the test kernels.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/d3d12/adapter_enumeration.h"
#include "kernels/d3d12/device_runtime.h"
#include "kernels/d3d12/fault_injection.h"
#include "kernels/d3d12/fence_event.h"
#include "kernels/d3d12/release_when_idle.h"
#include "tests/d3d12/runtime_test_util.h"
#include "tests/d3d12/test_kernels.h"

namespace dmlserve::d3d12 {
namespace {

using ::dmlserve::d3d12::testing::AccumulateDispatch;
using ::dmlserve::d3d12::testing::AddDispatch;
using ::dmlserve::d3d12::testing::DeviceBuffer;
using ::dmlserve::d3d12::testing::RandomWords;
using ::dmlserve::d3d12::testing::ResidentBuffer;
using ::dmlserve::d3d12::testing::TestAdapter;
using ::dmlserve::d3d12::testing::TestKernelLibrary;
using ::dmlserve::d3d12::testing::UploadBuffer;
using ::dmlserve::d3d12::testing::Words;
using ::testing::HasSubstr;

std::vector<uint32_t> AddReference(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                                   uint32_t bias) {
  std::vector<uint32_t> sum(a.size());
  for (size_t i = 0; i < a.size(); ++i) sum[i] = a[i] + b[i] + bias;
  return sum;
}

// out = a + b + bias, the smallest useful plan.
DispatchPlan AddPlan(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                     uint32_t bias) {
  DispatchPlan plan;
  plan.buffers = {UploadBuffer(a), UploadBuffer(b), DeviceBuffer(BufferKind::kOutput, a.size())};
  plan.dispatches = {AddDispatch(0, 1, 2, static_cast<uint32_t>(a.size()), bias)};
  return plan;
}

class RuntimeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<AdapterInfo> adapter = TestAdapter();
    ASSERT_TRUE(adapter.ok()) << adapter.status();
    absl::StatusOr<ComPtr<ID3D12Device>> device = CreateAdapterDevice(adapter->index);
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = new ComPtr<ID3D12Device>(std::move(*device));
  }
  static void TearDownTestSuite() {
    delete device_;
    device_ = nullptr;
  }

  std::unique_ptr<DeviceRuntime> MakeRuntime(RuntimeOptions options = {}) {
    EXPECT_NE(device_, nullptr);
    if (device_ == nullptr) return nullptr;
    absl::StatusOr<std::unique_ptr<DeviceRuntime>> runtime =
        DeviceRuntime::Create(*device_, TestKernelLibrary(), options);
    EXPECT_TRUE(runtime.ok()) << runtime.status();
    return runtime.ok() ? std::move(*runtime) : nullptr;
  }

  static ComPtr<ID3D12Device>* device_;
};

ComPtr<ID3D12Device>* RuntimeTest::device_ = nullptr;

TEST(AdapterEnumerationTest, FindsLavapipeAsSoftware) {
  absl::StatusOr<std::vector<AdapterInfo>> adapters = EnumerateAdapters();
  ASSERT_TRUE(adapters.ok()) << adapters.status();
  ASSERT_FALSE(adapters->empty()) << "no Vulkan device: is mesa-vulkan-drivers installed?";
  bool found_lavapipe = false;
  for (size_t i = 0; i < adapters->size(); ++i) {
    const AdapterInfo& adapter = (*adapters)[i];
    EXPECT_EQ(adapter.index, static_cast<int>(i));
    EXPECT_FALSE(adapter.name.empty());
    if (adapter.name.find("llvmpipe") != std::string::npos) {
      found_lavapipe = true;
      EXPECT_TRUE(adapter.software) << adapter.name << " is lavapipe, a CPU device";
    }
  }
  if (!found_lavapipe && std::getenv("DMLSERVE_TEST_D3D12_ADAPTER") != nullptr) {
    GTEST_SKIP() << "no lavapipe beside the GPU chosen by DMLSERVE_TEST_D3D12_ADAPTER";
  }
  EXPECT_TRUE(found_lavapipe) << "lavapipe (llvmpipe) not among the adapters";
}

TEST(AdapterEnumerationTest, RejectsUnknownAdapterIndex) {
  absl::StatusOr<std::vector<AdapterInfo>> adapters = EnumerateAdapters();
  ASSERT_TRUE(adapters.ok()) << adapters.status();
  EXPECT_TRUE(absl::IsNotFound(CreateAdapterDevice(static_cast<int>(adapters->size())).status()));
  EXPECT_TRUE(absl::IsNotFound(CreateAdapterDevice(-1).status()));
}

TEST_F(RuntimeTest, RunsTrivialKernel) {
  auto runtime = MakeRuntime();
  ASSERT_NE(runtime, nullptr);
  std::vector<uint32_t> a = RandomWords(1000, 1), b = RandomWords(1000, 2);
  absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(AddPlan(a, b, 7));
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), 3u);
  EXPECT_EQ((*outputs)[0], nullptr);
  EXPECT_EQ((*outputs)[1], nullptr);
  EXPECT_EQ(Words((*outputs)[2]->view()), AddReference(a, b, 7));
  EXPECT_TRUE(runtime->health().ok());
}

TEST_F(RuntimeTest, BindsOffsetsIntoBuffersAndHostBytes) {
  auto runtime = MakeRuntime();
  ASSERT_NE(runtime, nullptr);
  // One host string holds both inputs; one device buffer receives the sum
  // at an offset.
  std::vector<uint32_t> both = RandomWords(300, 3);
  DispatchPlan plan;
  BufferSpec a = UploadBuffer(both);
  a.size_bytes = 100 * 4;
  a.host_offset = 0;
  BufferSpec b = UploadBuffer(both);
  b.size_bytes = 200 * 4;
  b.host_offset = 100 * 4;
  plan.buffers = {a, b, DeviceBuffer(BufferKind::kOutput, 150)};
  Dispatch add = AddDispatch(0, 1, 2, 100, 0);
  add.srvs[1].offset_bytes = 50 * 4;  // b's elements 50..149 = both[150..249]
  add.uavs[0].offset_bytes = 50 * 4;
  plan.dispatches = {add};
  absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(plan);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  std::vector<uint32_t> out = Words((*outputs)[2]->view());
  ASSERT_EQ(out.size(), 150u);
  for (size_t i = 0; i < 100; ++i) {
    ASSERT_EQ(out[50 + i], both[i] + both[150 + i]) << i;
  }
}

TEST_F(RuntimeTest, OrdersDependentDispatchesWithBarriersAndTransitions) {
  auto runtime = MakeRuntime();
  ASSERT_NE(runtime, nullptr);
  const uint32_t n = 4096;
  std::vector<uint32_t> x = RandomWords(n, 4), y = RandomWords(n, 5);
  DispatchPlan plan;
  // 0: x, 1: y, 2: zeroed accumulator, 3: output
  plan.buffers = {UploadBuffer(x), UploadBuffer(y), DeviceBuffer(BufferKind::kZeroed, n),
                  DeviceBuffer(BufferKind::kOutput, n)};
  // acc = 0 + x + y + x (read-modify-write of one UAV: barriers needed),
  // then out = acc + y + 1 (acc read as an SRV: a state transition).
  for (BufferId in : {0u, 1u, 0u}) {
    Dispatch accumulate = AccumulateDispatch(in, 2, n);
    accumulate.barrier_after = true;
    plan.dispatches.push_back(accumulate);
  }
  plan.dispatches.push_back(AddDispatch(2, 1, 3, n, 1));
  absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(plan);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  std::vector<uint32_t> out = Words((*outputs)[3]->view());
  ASSERT_EQ(out.size(), n);
  for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] * 2 + y[i] * 2 + 1) << i;
}

TEST_F(RuntimeTest, ZeroedBuffersAreZeroEvenWhenThePoolReusesThem) {
  auto runtime = MakeRuntime();
  ASSERT_NE(runtime, nullptr);
  const uint32_t n = 512;
  std::vector<uint32_t> x = RandomWords(n, 6);
  for (int round = 0; round < 3; ++round) {
    DispatchPlan plan;
    plan.buffers = {UploadBuffer(x), DeviceBuffer(BufferKind::kZeroed, n),
                    DeviceBuffer(BufferKind::kOutput, n)};
    Dispatch accumulate = AccumulateDispatch(0, 1, n);
    accumulate.barrier_after = true;
    plan.dispatches = {accumulate, AddDispatch(1, 0, 2, n, 0)};
    absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(plan);
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    std::vector<uint32_t> out = Words((*outputs)[2]->view());
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(out[i], x[i] * 2) << "round " << round << " " << i;
  }
}

TEST_F(RuntimeTest, SteadyStateCreatesNoResources) {
  auto runtime = MakeRuntime();
  ASSERT_NE(runtime, nullptr);
  auto run = [&](size_t n, uint32_t seed) {
    std::vector<uint32_t> a = RandomWords(n, seed), b = RandomWords(n, seed + 1);
    absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(AddPlan(a, b, seed));
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    ASSERT_EQ(Words((*outputs)[2]->view()), AddReference(a, b, seed));
  };
  // Warm-up: the shapes the "service" sees.
  for (size_t n : {1000, 20000, 3000}) run(n, 10);
  const RuntimeStats warm = runtime->stats();
  EXPECT_GT(warm.buffers_created, 0u);
  EXPECT_EQ(warm.pipelines, 1u);
  // The same shapes (and sizes in the same size classes) again: nothing new.
  for (int round = 0; round < 5; ++round) {
    for (size_t n : {1000, 20000, 3000, 990, 19500}) run(n, 20 + round);
  }
  const RuntimeStats steady = runtime->stats();
  EXPECT_EQ(steady.buffers_created, warm.buffers_created);
  EXPECT_EQ(steady.pipelines, 1u);
  EXPECT_EQ(steady.submissions, warm.submissions + 25);
  EXPECT_EQ(steady.memory_bytes, warm.memory_bytes);
}

TEST_F(RuntimeTest, UploadRingGrowsForLargeBatches) {
  RuntimeOptions options;
  options.upload_ring_initial_bytes = 64 << 10;
  auto runtime = MakeRuntime(options);
  ASSERT_NE(runtime, nullptr);
  const uint64_t before = runtime->memory_bytes();
  const size_t n = 1 << 20;  // 4 MiB per buffer, far past the ring's 64 KiB
  std::vector<uint32_t> a = RandomWords(n, 7), b = RandomWords(n, 8);
  absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(AddPlan(a, b, 3));
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(Words((*outputs)[2]->view()), AddReference(a, b, 3));
  // 8 + 4 MiB of GPU buffers (inputs, output), an upload ring of at least
  // 8 MiB and the 4 MiB readback buffer the output still holds.
  EXPECT_GE(runtime->memory_bytes(), before + 3 * (4u << 20) + (12u << 20));
}

TEST_F(RuntimeTest, LargeOutputsBorrowReadbackMemoryUntilDroppedAndMayOutliveTheDevice) {
  auto runtime = MakeRuntime();
  ASSERT_NE(runtime, nullptr);
  const size_t n = 1 << 18;  // a 1 MiB output: lent, not copied
  std::vector<uint32_t> a = RandomWords(n, 31), b = RandomWords(n, 32);
  absl::StatusOr<ReadBackBuffers> held = runtime->Run(AddPlan(a, b, 1));
  ASSERT_TRUE(held.ok()) << held.status();
  const std::vector<uint32_t> expected = AddReference(a, b, 1);
  ASSERT_EQ(Words((*held)[2]->view()), expected);
  // While held, the readback buffer is not reused: the next batch of the same
  // shape needs another (a copied answer would have given it back), and the
  // held answer stays as it was.
  const uint64_t before_next = runtime->stats().buffers_created;
  for (uint32_t seed : {2u, 3u}) {
    absl::StatusOr<ReadBackBuffers> next = runtime->Run(AddPlan(b, a, seed));
    ASSERT_TRUE(next.ok()) << next.status();
    EXPECT_NE((*next)[2]->data(), (*held)[2]->data());
    EXPECT_EQ(Words((*next)[2]->view()), AddReference(b, a, seed));
  }
  EXPECT_EQ(runtime->stats().buffers_created, before_next + 1) << "one more readback buffer";
  EXPECT_EQ(Words((*held)[2]->view()), expected);
  // Dropped, it is reused: the steady state creates nothing.
  held->clear();
  absl::StatusOr<ReadBackBuffers> again = runtime->Run(AddPlan(a, b, 4));
  ASSERT_TRUE(again.ok()) << again.status();
  const uint64_t created = runtime->stats().buffers_created;
  for (int round = 0; round < 3; ++round) {
    again = runtime->Run(AddPlan(a, b, 5 + round));
    ASSERT_TRUE(again.ok()) << again.status();
  }
  EXPECT_EQ(runtime->stats().buffers_created, created);
  // The device goes first; the answer it lent stays readable, and gives its
  // buffer back when dropped (ASan and the lavapipe heap check this).
  runtime.reset();
  EXPECT_EQ(Words((*again)[2]->view()), AddReference(a, b, 7));
  again->clear();
}

TEST_F(RuntimeTest, SmallOutputsAreCopiedSoHoldingThemPinsNoReadbackMemory) {
  auto runtime = MakeRuntime();
  ASSERT_NE(runtime, nullptr);
  const size_t n = 1000;
  std::vector<uint32_t> a = RandomWords(n, 41), b = RandomWords(n, 42);
  std::vector<ReadBackBuffers> held;
  auto run = [&](uint32_t seed) {
    absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(AddPlan(a, b, seed));
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    ASSERT_EQ(Words((*outputs)[2]->view()), AddReference(a, b, seed));
    held.push_back(*std::move(outputs));
  };
  run(1);
  const uint64_t created = runtime->stats().buffers_created;
  // Every answer is kept, yet each batch's readback buffer went back to the
  // pool when the batch ended: the next batches create nothing.
  for (uint32_t seed = 2; seed < 6; ++seed) run(seed);
  EXPECT_EQ(runtime->stats().buffers_created, created);
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(Words(held[i][2]->view()), AddReference(a, b, static_cast<uint32_t>(i + 1)));
  }
}

TEST_F(RuntimeTest, ConcurrentBatchesShareTheRingsAndStayCorrect) {
  RuntimeOptions options;
  options.inflight_batches = 3;
  options.upload_ring_initial_bytes = 256 << 10;  // small: batches wait for each other's space
  auto runtime = MakeRuntime(options);
  ASSERT_NE(runtime, nullptr);
  EXPECT_EQ(runtime->max_inflight_batches(), 3);
  constexpr int kThreads = 3;
  constexpr int kBatchesPerThread = 12;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kBatchesPerThread; ++i) {
        size_t n = 1000 + 7000 * ((t + i) % 4);
        uint32_t seed = static_cast<uint32_t>(100 * t + i);
        std::vector<uint32_t> a = RandomWords(n, seed), b = RandomWords(n, seed + 50);
        absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(AddPlan(a, b, seed));
        if (!outputs.ok()) {
          failures[t] = std::string(outputs.status().message());
          return;
        }
        if (Words((*outputs)[2]->view()) != AddReference(a, b, seed)) {
          failures[t] = "wrong result in batch " + std::to_string(i);
          return;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_EQ(runtime->stats().submissions, uint64_t{kThreads * kBatchesPerThread});
}

TEST_F(RuntimeTest, ResidentTensorsAreUploadedOncePerDevice) {
  auto runtime = MakeRuntime();
  ASSERT_NE(runtime, nullptr);
  const uint32_t n = 2048;
  std::vector<uint32_t> weights = RandomWords(n, 9);
  // A second batch offers different bytes under the same key: if it
  // re-uploaded, the result would show it.
  std::vector<uint32_t> impostor = RandomWords(n, 10);
  // The form is made only by batches that upload it.
  std::atomic<int> made{0};
  auto plan_with = [&](const std::vector<uint32_t>& resident, const std::vector<uint32_t>& x) {
    DispatchPlan plan;
    plan.buffers = {ResidentBuffer("w1/test-form", resident, &made), UploadBuffer(x),
                    DeviceBuffer(BufferKind::kOutput, n)};
    plan.dispatches = {AddDispatch(0, 1, 2, n, 0)};
    return plan;
  };
  EXPECT_FALSE(runtime->IsResident("w1"));
  std::vector<uint32_t> x1 = RandomWords(n, 11), x2 = RandomWords(n, 12);
  absl::StatusOr<ReadBackBuffers> first = runtime->Run(plan_with(weights, x1));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Words((*first)[2]->view()), AddReference(weights, x1, 0));
  EXPECT_EQ(runtime->stats().resident_uploads, 1u);
  EXPECT_EQ(made.load(), 1);
  EXPECT_TRUE(runtime->IsResident("w1"));
  EXPECT_FALSE(runtime->IsResident("w"));
  EXPECT_FALSE(runtime->IsResident("w1/test"));
  const uint64_t created = runtime->stats().buffers_created;

  absl::StatusOr<ReadBackBuffers> second = runtime->Run(plan_with(impostor, x2));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(Words((*second)[2]->view()), AddReference(weights, x2, 0));
  EXPECT_EQ(runtime->stats().resident_uploads, 1u);
  EXPECT_EQ(made.load(), 1);
  EXPECT_EQ(runtime->stats().buffers_created, created);

  // Released: the next batch uploads what it brings.
  runtime->Evict("w1");
  EXPECT_FALSE(runtime->IsResident("w1"));
  absl::StatusOr<ReadBackBuffers> third = runtime->Run(plan_with(impostor, x2));
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_EQ(Words((*third)[2]->view()), AddReference(impostor, x2, 0));
  EXPECT_EQ(runtime->stats().resident_uploads, 2u);
  EXPECT_EQ(made.load(), 2);
}

// A form of several registered tensors belongs to each ("s/form z": to s
// and to z), and the keys of one slot (up to the first space) replace each
// other: pairing s with many others keeps one form, not one per pair.
TEST_F(RuntimeTest, ResidentFormsOfSeveralTensorsAndTheirSlots) {
  auto runtime = MakeRuntime();
  ASSERT_NE(runtime, nullptr);
  const uint32_t n = 1024;
  std::vector<uint32_t> x = RandomWords(n, 20);
  auto run = [&](const std::string& key, const std::vector<uint32_t>& resident) {
    DispatchPlan plan;
    plan.buffers = {ResidentBuffer(key, resident), UploadBuffer(x),
                    DeviceBuffer(BufferKind::kOutput, n)};
    plan.dispatches = {AddDispatch(0, 1, 2, n, 0)};
    absl::StatusOr<ReadBackBuffers> out = runtime->Run(plan);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? Words((*out)[2]->view()) : std::vector<uint32_t>();
  };
  std::vector<uint32_t> with_z1 = RandomWords(n, 21), with_z2 = RandomWords(n, 22);
  EXPECT_EQ(run("s/form z1", with_z1), AddReference(with_z1, x, 0));
  EXPECT_TRUE(runtime->IsResident("s"));
  EXPECT_TRUE(runtime->IsResident("z1"));
  EXPECT_FALSE(runtime->IsResident("z"));
  EXPECT_EQ(runtime->stats().resident_uploads, 1u);

  // Another key of the slot replaces it.
  EXPECT_EQ(run("s/form z2", with_z2), AddReference(with_z2, x, 0));
  EXPECT_EQ(runtime->stats().resident_uploads, 2u);
  EXPECT_FALSE(runtime->IsResident("z1"));
  EXPECT_TRUE(runtime->IsResident("z2"));
  EXPECT_EQ(runtime->resident_bytes(), uint64_t{n} * 4);
  EXPECT_EQ(run("s/form z2", with_z1), AddReference(with_z2, x, 0));  // still resident
  EXPECT_EQ(runtime->stats().resident_uploads, 2u);

  // Evicting the second owner drops the form; so does evicting the first.
  runtime->Evict("z2");
  EXPECT_FALSE(runtime->IsResident("s"));
  EXPECT_EQ(run("s/form z2", with_z1), AddReference(with_z1, x, 0));
  EXPECT_EQ(runtime->stats().resident_uploads, 3u);
  runtime->Evict("s");
  EXPECT_FALSE(runtime->IsResident("z2"));
}

TEST_F(RuntimeTest, ConcurrentBatchesNeedingOneResidentTensorUploadItOnce) {
  RuntimeOptions options;
  options.inflight_batches = 4;
  auto runtime = MakeRuntime(options);
  ASSERT_NE(runtime, nullptr);
  const uint32_t n = 1 << 16;
  std::vector<uint32_t> weights = RandomWords(n, 13);
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint32_t> x = RandomWords(n, 20 + t);
      DispatchPlan plan;
      plan.buffers = {ResidentBuffer("shared", weights), UploadBuffer(x),
                      DeviceBuffer(BufferKind::kOutput, n)};
      plan.dispatches = {AddDispatch(0, 1, 2, n, 0)};
      absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(plan);
      if (!outputs.ok()) {
        failures[t] = std::string(outputs.status().message());
      } else if (Words((*outputs)[2]->view()) != AddReference(weights, x, 0)) {
        failures[t] = "wrong result";
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_EQ(runtime->stats().resident_uploads, 1u);
}

// Batches racing for two keys of one slot, each replacing the other while
// its upload may still be in flight: every batch reads its own key's bytes,
// and the slot ends with one form resident.
TEST_F(RuntimeTest, ConcurrentBatchesReplacingEachOthersSlotStayCorrect) {
  RuntimeOptions options;
  options.inflight_batches = 4;
  auto runtime = MakeRuntime(options);
  ASSERT_NE(runtime, nullptr);
  const uint32_t n = 1 << 14;
  const std::vector<uint32_t> forms[2] = {RandomWords(n, 30), RandomWords(n, 31)};
  constexpr int kThreads = 4, kRuns = 12;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<uint32_t> x = RandomWords(n, 40 + t);
      for (int run = 0; run < kRuns && failures[t].empty(); ++run) {
        const int form = (t + run) % 2;
        DispatchPlan plan;
        plan.buffers = {ResidentBuffer(form == 0 ? "s/form z0" : "s/form z1", forms[form]),
                        UploadBuffer(x), DeviceBuffer(BufferKind::kOutput, n)};
        plan.dispatches = {AddDispatch(0, 1, 2, n, 0)};
        absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(plan);
        if (!outputs.ok()) {
          failures[t] = std::string(outputs.status().message());
        } else if (Words((*outputs)[2]->view()) != AddReference(forms[form], x, 0)) {
          failures[t] = "wrong result in run " + std::to_string(run);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[t], "") << "thread " << t;
  EXPECT_EQ(runtime->resident_bytes(), uint64_t{n} * 4);
}

// Two batches that each upload one resident key and need the other's: the
// runtime takes keys in one order, so neither waits for the other forever.
TEST_F(RuntimeTest, BatchesNeedingEachOthersResidentUploadsFinish) {
  RuntimeOptions options;
  options.inflight_batches = 2;
  auto runtime = MakeRuntime(options);
  ASSERT_NE(runtime, nullptr);
  const uint32_t n = 4096;
  std::vector<uint32_t> x = RandomWords(n, 30), y = RandomWords(n, 31);
  std::vector<std::string> failures(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        const std::string prefix = "round" + std::to_string(round);
        DispatchPlan plan;
        // Listed in opposite orders by the two threads.
        BufferSpec first = ResidentBuffer(prefix + "/x", x);
        BufferSpec second = ResidentBuffer(prefix + "/y", y);
        if (t == 1) std::swap(first, second);
        plan.buffers = {first, second, DeviceBuffer(BufferKind::kOutput, n)};
        plan.dispatches = {AddDispatch(0, 1, 2, n, 0)};
        absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(plan);
        if (!outputs.ok()) {
          failures[t] = std::string(outputs.status().message());
          return;
        }
        if (Words((*outputs)[2]->view()) != AddReference(x, y, 0)) {
          failures[t] = "wrong result in round " + std::to_string(round);
          return;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
  EXPECT_EQ(runtime->stats().resident_uploads, 40u);
}

TEST_F(RuntimeTest, FaultInjectionRemovesTheDeviceAfterNBatches) {
  RuntimeOptions options;
  options.fail_after_batches = 2;
  auto runtime = MakeRuntime(options);
  ASSERT_NE(runtime, nullptr);
  std::vector<uint32_t> a = RandomWords(100, 14), b = RandomWords(100, 15);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<ReadBackBuffers> outputs = runtime->Run(AddPlan(a, b, 0));
    ASSERT_TRUE(outputs.ok()) << "batch " << i << ": " << outputs.status();
  }
  absl::StatusOr<ReadBackBuffers> failed = runtime->Run(AddPlan(a, b, 0));
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsUnavailable(failed.status())) << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("DXGI_ERROR_DEVICE_REMOVED"));
  EXPECT_FALSE(runtime->health().ok());
  // Removed for good.
  absl::StatusOr<ReadBackBuffers> later = runtime->Run(AddPlan(a, b, 0));
  EXPECT_TRUE(absl::IsUnavailable(later.status())) << later.status();
  EXPECT_EQ(runtime->stats().submissions, 2u);
}

// A wait that timed out leaves its registration with the fence, which may
// fire after the FenceEvent is gone: that must not touch freed memory (the
// ASan build of this suite would report it; here the signal must at least
// not crash), and a new event must still work.
TEST_F(RuntimeTest, AFenceEventMayGoWhileTheFenceStillHoldsItsWait) {
  ComPtr<ID3D12Fence> fence;
  ASSERT_TRUE(SUCCEEDED(
      (*device_)->CreateFence(0, D3D12_FENCE_FLAG_NONE, __uuidof(ID3D12Fence), fence.put_void())));
  // The queue's signals reach fence events (vkd3d signals them from its
  // fence thread; a signal from the CPU does not).
  D3D12_COMMAND_QUEUE_DESC desc{};
  desc.Type = D3D12_COMMAND_LIST_TYPE_COMPUTE;
  ComPtr<ID3D12CommandQueue> queue;
  ASSERT_TRUE(SUCCEEDED(
      (*device_)->CreateCommandQueue(&desc, __uuidof(ID3D12CommandQueue), queue.put_void())));
  {
    FenceEvent event;
    // Long enough to register with the fence (a wait under 1 ms gives up
    // before it does), short enough to time out.
    absl::Status waited = event.Wait(fence.get(), 1, 20);
    EXPECT_TRUE(absl::IsDeadlineExceeded(waited)) << waited;
  }
  ASSERT_TRUE(SUCCEEDED(queue->Signal(fence.get(), 1)));  // fires the abandoned registration
  FenceEvent later;
  EXPECT_TRUE(later.Wait(fence.get(), 1, 10000).ok());
  ASSERT_TRUE(SUCCEEDED(queue->Signal(fence.get(), 2)));
  EXPECT_TRUE(later.Wait(fence.get(), 2, 10000).ok());
}

// Words of the hung-batch tests' buffers (8 MiB).
constexpr uint32_t kHungWords = uint32_t{1} << 21;

// Seconds of lavapipe work in one batch, far past a short hung-device
// timeout: 512 passes that each depend on the last, adding `input` (a
// kHungWords buffer the caller gives) into buffer 1, an output.
DispatchPlan SecondsOfWork(BufferSpec input) {
  DispatchPlan plan;
  plan.buffers = {std::move(input), DeviceBuffer(BufferKind::kOutput, kHungWords)};
  for (int pass = 0; pass < 512; ++pass) {
    plan.dispatches.push_back(AccumulateDispatch(0, 1, kHungWords));
  }
  return plan;
}

// Waits (up to 5 minutes) until the release thread has freed every held
// runtime, as it does once lavapipe has finished their batches.
void WaitUntilNothingIsHeld() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (HeldUntilQueuesIdle() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A batch still running past the hung-device timeout: the device is lost,
// but the GPU computes on (lavapipe has no watchdog to stop it), so what the
// batch uses must outlive the runtime until its queue is idle, then be freed.
// Freeing it at once let lavapipe write into freed memory (a segfault, seen
// when a 4096^3 product outlasted the 60 s timeout on a loaded machine, and
// every time here when the pool kept no idle buffers, before failed batches
// were abandoned rather than returned to the pool).
TEST_F(RuntimeTest, ABatchPastTheHungDeviceTimeoutKeepsItsMemoryUntilTheQueueIsIdle) {
  ASSERT_EQ(HeldUntilQueuesIdle(), 0);
  RuntimeOptions options;
  options.batch_timeout_ms = 1;
  options.pool_max_idle_bytes = 0;  // a released buffer is destroyed at once
  auto runtime = MakeRuntime(options);
  ASSERT_NE(runtime, nullptr);
  absl::StatusOr<ReadBackBuffers> outputs =
      runtime->Run(SecondsOfWork(UploadBuffer(RandomWords(kHungWords, 21))));
  ASSERT_FALSE(outputs.ok());
  EXPECT_TRUE(absl::IsUnavailable(outputs.status())) << outputs.status();
  EXPECT_THAT(outputs.status().message(), HasSubstr("the device is hung"));
  EXPECT_FALSE(runtime->health().ok());
  // Its memory is still allocated: the upload arena, the output, the
  // readback buffer and the upload ring's staging space, kHungWords each.
  EXPECT_GE(runtime->memory_bytes(), 4 * uint64_t{kHungWords} * sizeof(uint32_t));
  runtime.reset();
  // Still computing after the destructor's short wait for a lost device (on
  // 2 cores, by seconds; a much faster lavapipe may have finished).
  EXPECT_LE(HeldUntilQueuesIdle(), 1);
  // Freed once lavapipe has finished the batch, by the release thread.
  WaitUntilNothingIsHeld();
  EXPECT_EQ(HeldUntilQueuesIdle(), 0);
  // The device itself still serves a new runtime.
  auto fresh = MakeRuntime();
  ASSERT_NE(fresh, nullptr);
  std::vector<uint32_t> b = RandomWords(100, 22);
  absl::StatusOr<ReadBackBuffers> sum = fresh->Run(AddPlan(b, b, 1));
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_EQ(Words((*sum)[2]->view()), AddReference(b, b, 1));
}

// A batch that waits for a resident form another batch is uploading, when
// that uploader passes the hung-device timeout: the waiter is released (and
// fails as the device is lost), rather than waiting for an upload that will
// never be confirmed. The uploader's memory stays with the executor
// (PlanExecutor::Abandon), but its claim on the form must not.
TEST_F(RuntimeTest, AWaiterForAnAbandonedUploadIsReleased) {
  RuntimeOptions options;
  options.batch_timeout_ms = 300;
  options.inflight_batches = 2;
  auto runtime = MakeRuntime(options);
  ASSERT_NE(runtime, nullptr);
  std::vector<uint32_t> weights = RandomWords(kHungWords, 24);
  // The uploader: the form, then seconds of lavapipe work.
  DispatchPlan slow = SecondsOfWork(ResidentBuffer("form", weights));
  // The waiter: the same form, started while the uploader waits for its fence.
  DispatchPlan waiter;
  waiter.buffers = {ResidentBuffer("form", weights), DeviceBuffer(BufferKind::kOutput, kHungWords)};
  waiter.dispatches = {AccumulateDispatch(0, 1, kHungWords)};
  std::thread uploader([&] { EXPECT_FALSE(runtime->Run(slow).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto waited = std::async(std::launch::async, [&] { return runtime->Run(waiter).status(); });
  if (waited.wait_for(std::chrono::minutes(2)) != std::future_status::ready) {
    // Joining would hang the test binary: say why and end it here.
    std::fprintf(stderr, "the waiter never returned: it waits for an abandoned upload\n");
    std::abort();
  }
  uploader.join();
  absl::Status status = waited.get();
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
  EXPECT_FALSE(runtime->health().ok());
  // Leaves nothing held for the next test once lavapipe is done.
  runtime.reset();
  WaitUntilNothingIsHeld();
  EXPECT_EQ(HeldUntilQueuesIdle(), 0);
}

// A process that exits while a hung batch's memory waits for its queue
// (the release thread still polling the fence) exits cleanly: the release
// thread must not poll vkd3d, or free the held runtime, while exit tears
// vkd3d and the Vulkan driver down.
TEST_F(RuntimeTest, ExitingWhileAHungBatchIsHeldIsClean) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run_and_exit = [this] {
    RuntimeOptions options;
    options.batch_timeout_ms = 1;
    auto runtime = MakeRuntime(options);
    if (runtime == nullptr) std::_Exit(3);
    if (runtime->Run(SecondsOfWork(UploadBuffer(RandomWords(kHungWords, 23)))).ok()) {
      std::_Exit(4);
    }
    runtime.reset();
    std::fprintf(stderr, "exiting with %d held\n", HeldUntilQueuesIdle());
    std::exit(0);
  };
  EXPECT_EXIT(run_and_exit(), ::testing::ExitedWithCode(0), "exiting with 1 held");
}

TEST_F(RuntimeTest, FaultInjectionFromTheEnvironment) {
  ASSERT_EQ(setenv(kFailAfterBatchesEnv, "0", 1), 0);
  auto runtime = MakeRuntime();
  unsetenv(kFailAfterBatchesEnv);
  ASSERT_NE(runtime, nullptr);
  std::vector<uint32_t> a = RandomWords(100, 16);
  absl::StatusOr<ReadBackBuffers> failed = runtime->Run(AddPlan(a, a, 0));
  EXPECT_TRUE(absl::IsUnavailable(failed.status())) << failed.status();
  // Other devices are unaffected.
  auto healthy = MakeRuntime();
  ASSERT_NE(healthy, nullptr);
  EXPECT_TRUE(healthy->Run(AddPlan(a, a, 0)).ok());
}

TEST_F(RuntimeTest, BadPlansFailTheBatchNotTheDevice) {
  auto runtime = MakeRuntime();
  ASSERT_NE(runtime, nullptr);
  std::vector<uint32_t> a = RandomWords(64, 17);

  DispatchPlan unaligned = AddPlan(a, a, 0);
  unaligned.buffers[0].size_bytes = 10;
  EXPECT_TRUE(absl::IsInvalidArgument(runtime->Run(unaligned).status()));

  DispatchPlan out_of_range = AddPlan(a, a, 0);
  out_of_range.dispatches[0].srvs[2].buffer = 7;
  EXPECT_TRUE(absl::IsInvalidArgument(runtime->Run(out_of_range).status()));

  DispatchPlan read_and_write = AddPlan(a, a, 0);
  read_and_write.dispatches[0].uavs[0].buffer = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(runtime->Run(read_and_write).status()));

  // A batch's uploads share one resource (read-only), its outputs another
  // (write-only): one copy in, one copy out.
  DispatchPlan writes_upload = AddPlan(a, a, 0);
  writes_upload.dispatches[0].srvs[1].buffer = 0;
  writes_upload.dispatches[0].uavs[0].buffer = 1;
  absl::Status status = runtime->Run(writes_upload).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("writes upload buffer 1"));

  DispatchPlan reads_output = AddPlan(a, a, 0);
  reads_output.buffers.push_back(DeviceBuffer(BufferKind::kScratch, 64));
  reads_output.dispatches.push_back(AddDispatch(2, 0, 3, 64, 0));
  reads_output.dispatches[0].barrier_after = true;
  status = runtime->Run(reads_output).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("reads output buffer 2"));

  DispatchPlan short_host = AddPlan(a, a, 0);
  short_host.buffers[1].host_offset = 8;
  EXPECT_TRUE(absl::IsInvalidArgument(runtime->Run(short_host).status()));

  DispatchPlan too_many_groups = AddPlan(a, a, 0);
  too_many_groups.dispatches[0].groups_x = 70000;
  EXPECT_TRUE(absl::IsInvalidArgument(runtime->Run(too_many_groups).status()));

  DispatchPlan unknown_kernel = AddPlan(a, a, 0);
  unknown_kernel.dispatches[0].kernel = "test/no-such-kernel";
  status = runtime->Run(unknown_kernel).status();
  EXPECT_TRUE(absl::IsInternal(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("test/no-such-kernel"));

  EXPECT_TRUE(runtime->health().ok());
  absl::StatusOr<ReadBackBuffers> good = runtime->Run(AddPlan(a, a, 0));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(Words((*good)[2]->view()), AddReference(a, a, 0));
}

TEST_F(RuntimeTest, LogicalDevicesOnOneAdapterRunSideBySide) {
  auto first = MakeRuntime();
  auto second = MakeRuntime();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  std::vector<uint32_t> a = RandomWords(5000, 18), b = RandomWords(5000, 19);
  absl::StatusOr<ReadBackBuffers> one, two;
  std::thread other([&] { two = second->Run(AddPlan(a, b, 2)); });
  one = first->Run(AddPlan(a, b, 1));
  other.join();
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(Words((*one)[2]->view()), AddReference(a, b, 1));
  EXPECT_EQ(Words((*two)[2]->view()), AddReference(a, b, 2));
  EXPECT_EQ(first->stats().submissions, 1u);
  EXPECT_EQ(second->stats().submissions, 1u);
}

}  // namespace
}  // namespace dmlserve::d3d12

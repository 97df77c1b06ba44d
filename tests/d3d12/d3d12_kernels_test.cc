// The product kernels through the D3D12 backend (planner + runtime) on
// vkd3d + lavapipe: every conformance example exactly, and a large random set
// compared with the CPU backend and the reference (integers identical,
// floats within the spec's tolerance), plus residency of registered weights.

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/d3d12/d3d12_backend.h"
#include "kernels/d3d12/d3d12_device.h"
#include "kernels/d3d12/device_runtime.h"
#include "tests/d3d12/runtime_test_util.h"
#include "tests/reference/conformance.h"
#include "tests/reference/random_operations.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

class D3D12KernelsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<AdapterInfo> adapter = d3d12::testing::TestAdapter();
    ASSERT_TRUE(adapter.ok()) << adapter.status();
    D3D12Options options;
    options.adapter_indices = {adapter->index};
    options.allow_software = true;
    absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices = CreateD3D12Devices(options);
    ASSERT_TRUE(devices.ok()) << devices.status();
    d3d12_ = devices->front().release();
    cpu_ = CreateCpuDevices(1).front().release();
  }
  static void TearDownTestSuite() {
    delete d3d12_;
    delete cpu_;
  }

  // Runs `operations` as one batch; the outputs, or the first failure.
  // `operations` stay intact: the batch runs on copies sharing their inputs
  // (a device may scan an input nobody else holds in place).
  static absl::StatusOr<std::vector<Tensor>> RunBatch(Device* device,
                                                      const std::vector<Operation>& operations) {
    const std::vector<Operation> batch = operations;
    std::vector<WorkItem> items(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) items[i].operation = &batch[i];
    if (absl::Status status = device->Execute(absl::MakeSpan(items)); !status.ok()) {
      return status;
    }
    std::vector<Tensor> outputs;
    for (WorkItem& item : items) {
      if (!item.status.ok()) return item.status;
      outputs.push_back(std::move(item.output));
    }
    return outputs;
  }

  // Both backends agree: integer results bit for bit with the CPU, every
  // result within the spec's rules of the reference.
  static void CompareWithCpu(const std::vector<Operation>& batch, const std::string& what) {
    ASSERT_NE(d3d12_, nullptr);
    absl::StatusOr<std::vector<Tensor>> gpu = RunBatch(d3d12_, batch);
    ASSERT_TRUE(gpu.ok()) << what << ": " << reference::Describe(batch[0]) << ": " << gpu.status();
    absl::StatusOr<std::vector<Tensor>> cpu = RunBatch(cpu_, batch);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    for (size_t i = 0; i < batch.size(); ++i) {
      const Operation& operation = batch[i];
      absl::Status within = reference::CheckOutput(operation, (*gpu)[i]);
      ASSERT_TRUE(within.ok()) << what << " item " << i << ": " << reference::Describe(operation)
                               << ": " << within;
      const auto* scan = std::get_if<ScanOperation>(&operation);
      if (scan != nullptr && scan->input.data_type != DataType::kFloat32 &&
          scan->input.data_type != DataType::kFloat16) {
        absl::Status exact = reference::CheckExact((*cpu)[i], (*gpu)[i]);
        ASSERT_TRUE(exact.ok()) << what << " item " << i << ": " << reference::Describe(operation)
                                << ": " << exact;
      }
    }
  }

  static Device* d3d12_;
  static Device* cpu_;
};

Device* D3D12KernelsTest::d3d12_ = nullptr;

// FLOAT32 scales of `sizes`, each in [0.002, 0.05).
Tensor RandomScales(reference::RandomOperationGenerator& generator, const Shape& sizes) {
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  Tensor t = Tensor::Allocate(DataType::kFloat32, sizes);
  float* values = t.mutable_data_as<float>();
  for (uint64_t i = 0; i < t.element_count(); ++i) values[i] = scale(generator.rng());
  return t;
}

// A random m x k x n product with per-tensor A and output scales and a
// per-column b_scale (and b_zero_point when `zero_point`).
absl::StatusOr<QuantizedMatMulOperation> PerColumnProduct(
    reference::RandomOperationGenerator& generator, DataType a_type, DataType b_type,
    DataType output_type, uint32_t m, uint32_t k, uint32_t n, bool zero_point) {
  constexpr OperatorKind kMatMul = OperatorKind::kQuantizedLinearMatrixMultiply;
  QuantizedMatMulTensors t;
  t.a = generator.RandomTensor(kMatMul, a_type, {1, 1, m, k});
  t.a_scale = RandomScales(generator, {1, 1, 1, 1});
  t.b = generator.RandomTensor(kMatMul, b_type, {1, 1, k, n});
  t.b_scale = RandomScales(generator, {1, 1, 1, n});
  if (zero_point) t.b_zero_point = generator.RandomTensor(kMatMul, b_type, {1, 1, 1, n});
  t.output_scale = RandomScales(generator, {1, 1, 1, 1});
  return MakeQuantizedMatMulOperation(std::move(t), output_type);
}
Device* D3D12KernelsTest::cpu_ = nullptr;

TEST_F(D3D12KernelsTest, EveryConformanceCaseExactly) {
  ASSERT_NE(d3d12_, nullptr);
  absl::StatusOr<std::vector<reference::ConformanceCase>> cases = reference::LoadConformanceCases();
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_FALSE(cases->empty());
  for (const reference::ConformanceCase& c : *cases) {
    absl::StatusOr<std::vector<Tensor>> outputs = RunBatch(d3d12_, {c.operation});
    if (!outputs.ok()) {
      ADD_FAILURE() << c.file << " " << c.name << ": " << outputs.status();
      continue;
    }
    absl::Status exact = reference::CheckExact(c.expected, outputs->front());
    EXPECT_TRUE(exact.ok()) << c.file << " " << c.name << ": " << exact;
  }
}

TEST_F(D3D12KernelsTest, ConformanceCasesAsOneBatchPerOperator) {
  ASSERT_NE(d3d12_, nullptr);
  absl::StatusOr<std::vector<reference::ConformanceCase>> cases = reference::LoadConformanceCases();
  ASSERT_TRUE(cases.ok()) << cases.status();
  // Scans of one operator and type with the same direction and exclusivity
  // may share a batch (scheduler/compatibility_key.h).
  std::map<std::string, std::vector<const reference::ConformanceCase*>> groups;
  for (const reference::ConformanceCase& c : *cases) {
    const auto* scan = std::get_if<ScanOperation>(&c.operation);
    if (scan == nullptr) continue;
    groups[std::to_string(static_cast<int>(scan->kind)) + "/" +
           std::to_string(static_cast<int>(scan->input.data_type)) + "/" +
           std::to_string(static_cast<int>(scan->direction)) + "/" +
           std::to_string(scan->exclusive)]
        .push_back(&c);
  }
  ASSERT_FALSE(groups.empty());
  for (const auto& [key, group] : groups) {
    std::vector<Operation> batch;
    for (const reference::ConformanceCase* c : group) batch.push_back(c->operation);
    absl::StatusOr<std::vector<Tensor>> outputs = RunBatch(d3d12_, batch);
    ASSERT_TRUE(outputs.ok()) << key << ": " << outputs.status();
    for (size_t i = 0; i < group.size(); ++i) {
      absl::Status exact = reference::CheckExact(group[i]->expected, (*outputs)[i]);
      EXPECT_TRUE(exact.ok()) << group[i]->name << " in a batch of " << group.size() << ": "
                              << exact;
    }
  }
}

// Batches of 1-4 random scans that may share a batch: one operator, type,
// direction and exclusivity, any shapes and axes.
TEST_F(D3D12KernelsTest, RandomScansMatchTheCpuBackend) {
  reference::RandomOperationGenerator generator(20250101);
  for (int b = 0; b < 250; ++b) {
    // Mostly small tensors; every fifth batch large enough for the
    // multi-pass (reduce / line / tile) kernels.
    generator.set_max_elements(b % 5 == 4 ? (1u << 17) : 4096);
    ScanOperation first = generator.NextScan();
    std::vector<Operation> batch = {first};
    const int size = 1 + static_cast<int>(generator.rng()() % 4);
    while (static_cast<int>(batch.size()) < size) {
      ScanOperation other = generator.NextScan(first.kind, first.input.data_type);
      absl::StatusOr<ScanOperation> compatible =
          MakeScanOperation(first.kind, other.input, other.axis, first.direction, first.exclusive);
      ASSERT_TRUE(compatible.ok()) << compatible.status();
      batch.push_back(*compatible);
    }
    CompareWithCpu(batch, "batch " + std::to_string(b));
    if (HasFatalFailure()) return;
  }
}

TEST_F(D3D12KernelsTest, RandomMatMulsMatchTheCpuBackend) {
  reference::RandomOperationGenerator generator(20250102);
  for (int b = 0; b < 120; ++b) {
    QuantizedMatMulOperation first = generator.NextMatMul();
    std::vector<Operation> batch = {first};
    // Batches share B (and its quantization); A varies.
    if (b % 3 == 0) {
      QuantizedMatMulOperation second = first;
      second.a = generator.RandomTensor(OperatorKind::kQuantizedLinearMatrixMultiply,
                                        first.a.data_type, first.a.sizes);
      batch.push_back(second);
    }
    CompareWithCpu(batch, "batch " + std::to_string(b));
    if (HasFatalFailure()) return;
  }
}

// M, N and K on both sides of the kernel's tile sizes (64x64 outputs per
// group, K in steps of 32), with per-row and per-column scales and zero
// points: the random generator keeps matrices smaller than one tile.
TEST_F(D3D12KernelsTest, MatMulsAcrossTileBoundariesMatchTheCpuBackend) {
  reference::RandomOperationGenerator generator(20261122);
  auto scales = [&](const Shape& sizes) { return RandomScales(generator, sizes); };
  constexpr OperatorKind kMatMul = OperatorKind::kQuantizedLinearMatrixMultiply;
  for (uint32_t m : {1u, 63u, 64u, 65u}) {
    for (uint32_t n : {1u, 63u, 65u, 130u}) {
      for (uint32_t k : {1u, 31u, 33u, 100u}) {
        QuantizedMatMulTensors t;
        t.a = generator.RandomTensor(kMatMul, DataType::kInt8, {1, 1, m, k});
        t.a_scale = scales({1, 1, m, 1});
        t.a_zero_point = generator.RandomTensor(kMatMul, DataType::kInt8, {1, 1, m, 1});
        t.b = generator.RandomTensor(kMatMul, DataType::kUint8, {1, 1, k, n});
        t.b_scale = scales({1, 1, 1, n});
        t.b_zero_point = generator.RandomTensor(kMatMul, DataType::kUint8, {1, 1, 1, n});
        t.output_scale = scales({1, 1, m, 1});
        absl::StatusOr<QuantizedMatMulOperation> op =
            MakeQuantizedMatMulOperation(std::move(t), DataType::kUint8);
        ASSERT_TRUE(op.ok()) << op.status();
        CompareWithCpu({*op}, absl::StrCat("m=", m, " n=", n, " k=", k));
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_F(D3D12KernelsTest, RegisteredWeightsStayResident) {
  ASSERT_NE(d3d12_, nullptr);
  auto* device = dynamic_cast<d3d12::D3D12Device*>(d3d12_);
  ASSERT_NE(device, nullptr);
  reference::RandomOperationGenerator generator(99);
  QuantizedMatMulOperation first = generator.NextMatMul();
  first.b.set_registered_id("resident-test-weights");
  QuantizedMatMulOperation second = first;
  second.a = generator.RandomTensor(OperatorKind::kQuantizedLinearMatrixMultiply, first.a.data_type,
                                    first.a.sizes);
  EXPECT_FALSE(device->IsResident("resident-test-weights"));
  const uint64_t uploads = device->runtime().stats().resident_uploads;
  CompareWithCpu({first}, "first batch");
  EXPECT_TRUE(device->IsResident("resident-test-weights"));
  const uint64_t after_first = device->runtime().stats().resident_uploads;
  EXPECT_GT(after_first, uploads);
  CompareWithCpu({second}, "second batch");
  EXPECT_EQ(device->runtime().stats().resident_uploads, after_first)
      << "the second batch re-uploaded the registered weights";
  device->Evict("resident-test-weights");
  EXPECT_FALSE(device->IsResident("resident-test-weights"));
}

// Per-column B parameters that come from registered tensors stay on the
// device beside the packed B (uploaded once), also when the zero point is a
// second registered tensor; evicting either tensor drops them, and the next
// batch uploads what it brings (a tensor registered anew under the id, with
// other values). Parameters sent inline are uploaded with every batch.
TEST_F(D3D12KernelsTest, RegisteredColumnParametersStayResident) {
  ASSERT_NE(d3d12_, nullptr);
  auto* device = dynamic_cast<d3d12::D3D12Device*>(d3d12_);
  ASSERT_NE(device, nullptr);
  constexpr OperatorKind kMatMul = OperatorKind::kQuantizedLinearMatrixMultiply;
  reference::RandomOperationGenerator generator(77);
  const uint32_t m = 3, k = 40, n = 70;
  absl::StatusOr<QuantizedMatMulOperation> made = PerColumnProduct(
      generator, DataType::kUint8, DataType::kInt8, DataType::kInt8, m, k, n, /*zero_point=*/true);
  ASSERT_TRUE(made.ok()) << made.status();
  QuantizedMatMulOperation op = *std::move(made);
  op.b.set_registered_id("columns-test-b");
  op.b_scale.set_registered_id("columns-test-scale");
  op.b_zero_point.set_registered_id("columns-test-zp");
  auto uploads = [&] { return device->runtime().stats().resident_uploads; };
  auto next_a = [&](QuantizedMatMulOperation& o) {
    o.a = generator.RandomTensor(kMatMul, DataType::kUint8, {1, 1, m, k});
  };

  const uint64_t start = uploads();
  CompareWithCpu({op}, "first batch");
  EXPECT_EQ(uploads(), start + 2) << "packed B and the column parameters";
  EXPECT_TRUE(device->IsResident("columns-test-scale"));
  EXPECT_TRUE(device->IsResident("columns-test-zp"));
  next_a(op);
  CompareWithCpu({op}, "second batch");
  EXPECT_EQ(uploads(), start + 2) << "the second batch re-uploaded resident parameters";

  // Each parameter tensor unregistered, then registered anew with other
  // values: a stale resident copy would give wrong results.
  for (const char* id : {"columns-test-zp", "columns-test-scale"}) {
    SCOPED_TRACE(id);
    const uint64_t before = uploads();
    device->Evict(id);
    EXPECT_FALSE(device->IsResident(id));
    EXPECT_TRUE(device->IsResident("columns-test-b"));
    if (std::string(id) == "columns-test-zp") {
      op.b_zero_point = generator.RandomTensor(kMatMul, DataType::kInt8, {1, 1, 1, n});
      op.b_zero_point.set_registered_id(id);
    } else {
      op.b_scale = RandomScales(generator, {1, 1, 1, n});
      op.b_scale.set_registered_id(id);
    }
    next_a(op);
    CompareWithCpu({op}, "after re-registering");
    EXPECT_EQ(uploads(), before + 1) << "the column parameters only";
  }

  // A per-column zero point sent with the request: never resident.
  const uint64_t before_inline = uploads();
  for (int i = 0; i < 2; ++i) {
    op.b_zero_point = generator.RandomTensor(kMatMul, DataType::kInt8, {1, 1, 1, n});
    next_a(op);
    CompareWithCpu({op}, "inline zero point " + std::to_string(i));
  }
  EXPECT_EQ(uploads(), before_inline);
  for (const char* id : {"columns-test-b", "columns-test-scale", "columns-test-zp"}) {
    device->Evict(id);
  }
}

// Resident column parameters read by qmm.gemm with split-K and qmm.reduce,
// and by qmm.packb for a B sent with the request; their forms: a registered
// scale alone ("s/qmm-columns"), with an inline per-tensor zero point of 0
// (the same entries, the same key), then with a registered zero point,
// which replaces the first in its slot.
TEST_F(D3D12KernelsTest, ResidentColumnParametersOnEveryKernelPath) {
  ASSERT_NE(d3d12_, nullptr);
  auto* device = dynamic_cast<d3d12::D3D12Device*>(d3d12_);
  ASSERT_NE(device, nullptr);
  constexpr OperatorKind kMatMul = OperatorKind::kQuantizedLinearMatrixMultiply;
  reference::RandomOperationGenerator generator(78);
  const uint32_t m = 70, k = 600, n = 130;  // 128 x 128 tiles, K split in two
  absl::StatusOr<QuantizedMatMulOperation> made =
      PerColumnProduct(generator, DataType::kInt8, DataType::kUint8, DataType::kUint8, m, k, n,
                       /*zero_point=*/false);
  ASSERT_TRUE(made.ok()) << made.status();
  QuantizedMatMulOperation op = *std::move(made);
  op.b_scale.set_registered_id("paths-test-scale");
  auto uploads = [&] { return device->runtime().stats().resident_uploads; };

  const uint64_t start = uploads();
  CompareWithCpu({op}, "scale alone");
  EXPECT_EQ(uploads(), start + 1) << "the column parameters (B is the request's)";
  op.b_zero_point = generator.RandomTensor(kMatMul, DataType::kUint8, {1, 1, 1, 1});
  op.b_zero_point.mutable_data()[0] = 0;
  op.a = generator.RandomTensor(kMatMul, DataType::kInt8, {1, 1, m, k});
  CompareWithCpu({op}, "inline per-tensor zero point 0");
  EXPECT_EQ(uploads(), start + 1) << "the same entries re-uploaded";
  op.b_zero_point = generator.RandomTensor(kMatMul, DataType::kUint8, {1, 1, 1, n});
  op.b_zero_point.set_registered_id("paths-test-zp");
  CompareWithCpu({op}, "registered zero point");
  EXPECT_EQ(uploads(), start + 2);
  EXPECT_TRUE(device->IsResident("paths-test-zp"));
  for (const char* id : {"paths-test-scale", "paths-test-zp"}) device->Evict(id);
  EXPECT_FALSE(device->IsResident("paths-test-scale"));
}

// Valid scales whose product a_scale * b_scale over- or underflows float32
// although a_scale * b_scale / output_scale does not (the kernel once gave
// saturated values, and NaN-derived ones for a zero accumulator).
TEST_F(D3D12KernelsTest, MatMulScalesWhoseProductLeavesFloat32Range) {
  auto floats = [](float value) {
    Tensor t = Tensor::Allocate(DataType::kFloat32, {1, 1, 1, 1});
    std::memcpy(t.mutable_data(), &value, sizeof(value));
    return t;
  };
  struct Scales {
    float a, b, output;
  };
  const Scales cases[] = {
      {4.0f, 1e38f, 1e38f},   // product overflows
      {1e20f, 1e20f, 1e38f},  // product overflows
      {1e30f, 1e30f, 1e30f},  // ratio overflows too
      // Product underflows float32 (2^-148); the output scale is the smallest
      // normal float (subnormal scales are refused: see below).
      {std::ldexp(1.0f, -100), std::ldexp(1.0f, -48), std::numeric_limits<float>::min()},
  };
  for (size_t c = 0; c < std::size(cases); ++c) {
    const Scales& s = cases[c];
    QuantizedMatMulTensors t;
    t.a = Tensor::Allocate(DataType::kInt8, {2, 1});
    const int8_t a[] = {3, -100};
    std::memcpy(t.a.mutable_data(), a, sizeof(a));
    t.b = Tensor::Allocate(DataType::kInt8, {1, 5});
    const int8_t b[] = {0, 1, -1, 2, 90};  // accumulators 0, +-3, 6, 270, -9000
    std::memcpy(t.b.mutable_data(), b, sizeof(b));
    t.a_scale = floats(s.a);
    t.b_scale = floats(s.b);
    t.output_scale = floats(s.output);
    absl::StatusOr<QuantizedMatMulOperation> op =
        MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8);
    ASSERT_TRUE(op.ok()) << op.status();
    const std::string what = "case " + std::to_string(c);
    CompareWithCpu({*op}, what);
    absl::StatusOr<std::vector<Tensor>> gpu = RunBatch(d3d12_, {*op});
    absl::StatusOr<std::vector<Tensor>> cpu = RunBatch(cpu_, {*op});
    ASSERT_TRUE(gpu.ok() && cpu.ok());
    EXPECT_TRUE(reference::CheckExact(cpu->front(), gpu->front()).ok()) << what;
  }
  // A subnormal scale would be used by the CPU and flushed to zero by a GPU:
  // it never reaches a device.
  QuantizedMatMulTensors t;
  t.a = Tensor::Allocate(DataType::kInt8, {1, 1});
  t.b = Tensor::Allocate(DataType::kInt8, {1, 1});
  t.a_scale = floats(1.0f);
  t.b_scale = floats(1.0f);
  t.output_scale = floats(1e-40f);
  EXPECT_EQ(MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dmlserve

// The quantized matrix multiply kernel, run for real (D3D12 runtime on vkd3d +
// lavapipe) and compared with the reference under the spec's exactness rule.

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "kernels/d3d12/shaders/batch_planner.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"
#include "kernels/d3d12/shaders/quantized_matmul_planner.h"
#include "tests/dxbc/kernel_test_runtime.h"
#include "tests/reference/conformance.h"
#include "tests/reference/random_operations.h"
#include "tests/reference/reference.h"

namespace dmlserve::d3d12 {
namespace {

using ::dmlserve::d3d12::testing::KernelTestRuntime;

KernelTestRuntime* Runtime() {
  absl::StatusOr<KernelTestRuntime*> runtime = KernelTestRuntime::Get();
  EXPECT_TRUE(runtime.ok()) << runtime.status();
  return runtime.ok() ? *runtime : nullptr;
}

void RunAndCheck(const std::vector<Operation>& operations, const PlannerOptions& options = {}) {
  KernelTestRuntime* runtime = Runtime();
  ASSERT_NE(runtime, nullptr);
  std::vector<WorkItem> items(operations.size());
  for (size_t i = 0; i < operations.size(); ++i) items[i].operation = &operations[i];
  const absl::Status run = runtime->Run(absl::MakeSpan(items), options);
  ASSERT_TRUE(run.ok()) << run;
  for (size_t i = 0; i < operations.size(); ++i) {
    ASSERT_TRUE(items[i].status.ok()) << items[i].status;
    absl::Status check = reference::CheckOutput(operations[i], items[i].output);
    EXPECT_TRUE(check.ok()) << reference::Describe(operations[i]) << ": " << check;
  }
}

Tensor RandomBytes(DataType type, const Shape& sizes, std::mt19937_64& rng) {
  Tensor t = Tensor::Allocate(type, sizes);
  for (size_t i = 0; i < t.byte_size(); ++i) t.mutable_data()[i] = static_cast<uint8_t>(rng());
  return t;
}

Tensor Scalar(DataType type, double value) {
  Tensor t = Tensor::Allocate(type, {1, 1, 1, 1});
  if (type == DataType::kFloat32) {
    const float f = static_cast<float>(value);
    std::memcpy(t.mutable_data(), &f, 4);
  } else {
    t.mutable_data()[0] = static_cast<uint8_t>(static_cast<int>(value));
  }
  return t;
}

Tensor Floats(const Shape& sizes, std::mt19937_64& rng, float low, float high) {
  Tensor t = Tensor::Allocate(DataType::kFloat32, sizes);
  std::uniform_real_distribution<float> d(low, high);
  for (uint64_t i = 0; i < t.element_count(); ++i) t.mutable_data_as<float>()[i] = d(rng);
  return t;
}

// A job of `rows` random int8 rows against a shared B [1, 1, K, N] with its
// per-column scales (and B zero points, if present), output uint8.
absl::StatusOr<QuantizedMatMulOperation> JobSharingB(uint32_t rows, const Tensor& b,
                                                     const Tensor& b_scale,
                                                     const Tensor& b_zero_point,
                                                     std::mt19937_64& rng) {
  QuantizedMatMulTensors t;
  t.a = RandomBytes(DataType::kInt8, {rows, b.sizes[2]}, rng);
  t.a_scale = Floats({1, 1, rows, 1}, rng, 0.01f, 0.03f);
  t.b = b;
  t.b_scale = b_scale;
  t.b_zero_point = b_zero_point;
  t.output_scale = Scalar(DataType::kFloat32, 0.1);
  return MakeQuantizedMatMulOperation(std::move(t), DataType::kUint8);
}

// The plan of `operations` as one batch, to inspect: its finish must not run
// (the work items it would write to are gone).
absl::StatusOr<DispatchPlan> PlanToInspect(const std::vector<Operation>& operations) {
  std::vector<WorkItem> items(operations.size());
  for (size_t i = 0; i < operations.size(); ++i) items[i].operation = &operations[i];
  return PlanBatch(absl::MakeSpan(items));
}

TEST(QuantizedMatMulKernelTest, ConformanceExamplesAreExact) {
  absl::StatusOr<std::vector<reference::ConformanceCase>> cases = reference::LoadConformanceCases();
  ASSERT_TRUE(cases.ok()) << cases.status();
  KernelTestRuntime* runtime = Runtime();
  ASSERT_NE(runtime, nullptr);
  int matmuls = 0;
  for (const reference::ConformanceCase& c : *cases) {
    if (!std::holds_alternative<QuantizedMatMulOperation>(c.operation)) continue;
    ++matmuls;
    WorkItem item;
    item.operation = &c.operation;
    const absl::Status run = runtime->Run(absl::MakeSpan(&item, 1));
    ASSERT_TRUE(run.ok()) << run;
    ASSERT_TRUE(item.status.ok()) << item.status;
    absl::Status exact = reference::CheckExact(c.expected, item.output);
    EXPECT_TRUE(exact.ok()) << c.file << "/" << c.name << ": " << exact;
  }
  EXPECT_GT(matmuls, 0);
}

TEST(QuantizedMatMulKernelTest, RandomMatMulsOneJobPerBatch) {
  reference::RandomOperationGenerator generator(4242);
  generator.set_max_elements(6000);
  for (int i = 0; i < 60; ++i) RunAndCheck({generator.NextMatMul()});
}

TEST(QuantizedMatMulKernelTest, RandomMatMulsInOneBatch) {
  reference::RandomOperationGenerator generator(77);
  std::vector<Operation> operations;
  for (int i = 0; i < 40; ++i) operations.push_back(generator.NextMatMul());
  RunAndCheck(operations);
}

// Shapes that cut through the 64 x 64 tiles and the 8-word K steps, K not a
// multiple of 4, every signedness, per-row/column parameters.
TEST(QuantizedMatMulKernelTest, TileEdgesAndAllTypeCombinations) {
  std::mt19937_64 rng(5);
  std::vector<Operation> operations;
  // qmm.rows (up to 64 rows: R = 1, 2, 4, 8, 16 with several row tiles,
  // more than one 512-column tile, K past a quad; splits of whole K-loop
  // iterations and remainders that take every block: 15 octs for R = 1 are
  // 8 + 4 + 2 + 1, 6 for R = 2 are 4 + 2, and the last splits of the long
  // K leave 4 + 1) and qmm.gemm (partial 128 x 128 tiles, split K), each
  // with K not a multiple of 16.
  const uint32_t shapes[][3] = {{1, 1, 1},      {65, 33, 130},  {130, 67, 63},  {7, 300, 9},
                                {16, 100, 600}, {64, 257, 513}, {129, 40, 257}, {2, 1000, 1030},
                                {1, 9000, 520}, {3, 9000, 40},  {1, 120, 40},   {2, 48, 40}};
  for (DataType a_type : {DataType::kInt8, DataType::kUint8}) {
    for (DataType b_type : {DataType::kInt8, DataType::kUint8}) {
      for (DataType y_type : {DataType::kInt8, DataType::kUint8}) {
        for (const auto& s : shapes) {
          const uint32_t m = s[0], k = s[1], n = s[2];
          QuantizedMatMulTensors t;
          t.a = RandomBytes(a_type, {1, 1, m, k}, rng);
          t.a_scale = Floats({1, 1, m, 1}, rng, 0.01f, 0.05f);
          t.a_zero_point = RandomBytes(a_type, {1, 1, m, 1}, rng);
          t.b = RandomBytes(b_type, {1, 1, k, n}, rng);
          t.b_scale = Floats({1, 1, 1, n}, rng, 0.01f, 0.05f);
          t.b_zero_point = RandomBytes(b_type, {1, 1, 1, n}, rng);
          t.output_scale = Floats({1, 1, m, 1}, rng, 0.05f, 0.5f);
          t.output_zero_point = RandomBytes(y_type, {1, 1, m, 1}, rng);
          absl::StatusOr<QuantizedMatMulOperation> op =
              MakeQuantizedMatMulOperation(std::move(t), y_type);
          ASSERT_TRUE(op.ok()) << op.status();
          operations.push_back(*std::move(op));
        }
      }
    }
  }
  RunAndCheck(operations);  // qmm.gemm with int32 imad (the default)
  PlannerOptions float32;
  float32.quantized_matmul.gemm_accumulate = QmmAccumulate::kFloat32;
  RunAndCheck(operations, float32);
}

// qmm.gemm's float32 sums: 255 * 255 products over 256 k come within 1%
// of 2^24 between flushes, and two outputs sit exactly on a rounding tie
// (130.5 and 129.5 after scaling by 2^-20: both round to even 130), so a sum
// off by one in either direction changes an output byte. K = 2105 is past a
// multiple of 8 (masked), and the product is split along K. Both
// accumulations.
TEST(QuantizedMatMulKernelTest, GemmSumsAreExactAtRoundingTies) {
  const uint32_t m = 130, k = 2105, n = 130;
  QuantizedMatMulTensors t;
  t.a = Tensor::Allocate(DataType::kUint8, {m, k});
  t.b = Tensor::Allocate(DataType::kUint8, {k, n});
  std::memset(t.a.mutable_data(), 255, t.a.byte_size());
  std::memset(t.b.mutable_data(), 255, t.b.byte_size());
  uint8_t* a = t.a.mutable_data();
  uint8_t* b = t.b.mutable_data();
  // Row 0 x column 0: 65025 * 2104 + 108 * 246 = 130.5 * 2^20.
  a[k - 1] = 108;
  b[uint64_t{k - 1} * n + 0] = 246;
  // Row 1 x column 1: 65025 * 2088 + 76 * 242 = 129.5 * 2^20 (16 zeros,
  // one in each of 16 flush blocks of 256 k).
  for (uint32_t i = 0; i < 16; ++i) a[k + 100 + 128 * i] = 0;
  a[2 * k - 1] = 76;
  b[uint64_t{k - 1} * n + 1] = 242;
  t.a_scale = Scalar(DataType::kFloat32, 1.0 / 1024);
  t.b_scale = Scalar(DataType::kFloat32, 1.0 / 1024);
  t.output_scale = Scalar(DataType::kFloat32, 1.0);
  absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(t), DataType::kUint8);
  ASSERT_TRUE(op.ok()) << op.status();
  std::vector<Operation> operations = {*std::move(op)};
  for (QmmAccumulate accumulate : {QmmAccumulate::kFloat32, QmmAccumulate::kInt32}) {
    PlannerOptions options;
    options.quantized_matmul.gemm_accumulate = accumulate;
    RunAndCheck(operations, options);
    KernelTestRuntime* runtime = Runtime();
    ASSERT_NE(runtime, nullptr);
    WorkItem item;
    item.operation = &operations[0];
    ASSERT_TRUE(runtime->Run(absl::MakeSpan(&item, 1), options).ok());
    ASSERT_TRUE(item.status.ok()) << item.status;
    EXPECT_EQ(item.output.data()[0], 130);      // row 0, column 0
    EXPECT_EQ(item.output.data()[n + 1], 130);  // row 1, column 1
  }
}

// Batch and channel slices with broadcasting on either side.
TEST(QuantizedMatMulKernelTest, BroadcastSlices) {
  std::mt19937_64 rng(6);
  std::vector<Operation> operations;
  const Shape a_shapes[] = {{2, 3, 5, 20}, {1, 3, 5, 20}, {2, 1, 5, 20}, {5, 20}};
  const Shape b_shapes[] = {{2, 3, 20, 7}, {2, 1, 20, 7}, {1, 3, 20, 7}, {3, 20, 7}};
  for (const Shape& a_shape : a_shapes) {
    for (const Shape& b_shape : b_shapes) {
      QuantizedMatMulTensors t;
      t.a = RandomBytes(DataType::kUint8, a_shape, rng);
      t.a_scale = Scalar(DataType::kFloat32, 0.03);
      t.a_zero_point = Scalar(DataType::kUint8, 128);
      t.b = RandomBytes(DataType::kInt8, b_shape, rng);
      t.b_scale = Scalar(DataType::kFloat32, 0.02);
      t.output_scale = Scalar(DataType::kFloat32, 0.25);
      t.output_zero_point = Scalar(DataType::kInt8, -3);
      absl::StatusOr<QuantizedMatMulOperation> op =
          MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8);
      if (!op.ok()) continue;  // incompatible broadcast (2 vs 3 channels...)
      operations.push_back(*std::move(op));
    }
  }
  ASSERT_GE(operations.size(), 8u);
  RunAndCheck(operations);
}

// A {batches, 1, 1, K} x B {1, channels, K, N}: every batch of A with every
// channel of B, planned as ONE product of batches x (channels * N) (qmm.rows
// for few batches, qmm.gemm for many), not a dispatch of batches x channels
// slices; per-column B parameters repeat for each channel. B is packed with
// its channels side by side, by qmm.packb or on the host.
TEST(QuantizedMatMulKernelTest, OuterProductsOfSlicesAreOneProduct) {
  std::mt19937_64 rng(9);
  std::vector<Operation> operations;
  const uint32_t shapes[][4] = {{3, 5, 7, 9}, {70, 3, 20, 5}, {4, 300, 1, 1}, {130, 2, 33, 130}};
  for (const auto& s : shapes) {
    const uint32_t batches = s[0], channels = s[1], k = s[2], n = s[3];
    QuantizedMatMulTensors t;
    t.a = RandomBytes(DataType::kUint8, {batches, 1, 1, k}, rng);
    t.a_scale = Scalar(DataType::kFloat32, 0.03);
    t.a_zero_point = Scalar(DataType::kUint8, 100);
    t.b = RandomBytes(DataType::kInt8, {1, channels, k, n}, rng);
    t.b_scale = Floats({1, 1, 1, n}, rng, 0.01f, 0.05f);
    t.b_zero_point = RandomBytes(DataType::kInt8, {1, 1, 1, n}, rng);
    t.output_scale = Scalar(DataType::kFloat32, 0.25);
    t.output_zero_point = Scalar(DataType::kInt8, -3);
    absl::StatusOr<QuantizedMatMulOperation> op =
        MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8);
    ASSERT_TRUE(op.ok()) << op.status();
    operations.push_back(*std::move(op));
  }
  for (const Operation& operation : operations) {
    WorkItem item;
    item.operation = &operation;
    absl::StatusOr<DispatchPlan> plan = PlanBatch(absl::MakeSpan(&item, 1));
    ASSERT_TRUE(plan.ok()) << plan.status();
    // B packed on the device in the outer product's layout, then one product
    // (and its split-K reduction), whatever the slice count.
    ASSERT_GE(plan->dispatches.size(), 2u);
    ASSERT_LE(plan->dispatches.size(), 3u);
    EXPECT_EQ(plan->dispatches[0].kernel, QuantizedMatMulPackSpec::kKey);
    EXPECT_EQ(plan->dispatches[0].constants[kQmmConstPackOuter], 1u);
    EXPECT_EQ(plan->dispatches[1].constants[kQmmConstChannels], 1u);
  }
  RunAndCheck(operations);
  PlannerOptions on_host;
  on_host.quantized_matmul.pack_b_on_device = false;
  RunAndCheck(operations, on_host);
}

// Jobs sharing B run as one product with stacked A rows; a registered B is
// a resident buffer.
TEST(QuantizedMatMulKernelTest, JobsSharingBAreFusedIntoOneDispatch) {
  std::mt19937_64 rng(8);
  Tensor b = RandomBytes(DataType::kInt8, {1, 1, 45, 19}, rng);
  b.set_registered_id("weights-1");
  Tensor b_scale = Floats({1, 1, 1, 19}, rng, 0.01f, 0.03f);
  std::vector<Operation> operations;
  for (uint32_t m : {1u, 3u, 70u, 2u}) {
    absl::StatusOr<QuantizedMatMulOperation> op = JobSharingB(m, b, b_scale, Tensor(), rng);
    ASSERT_TRUE(op.ok()) << op.status();
    operations.push_back(*std::move(op));
  }
  absl::StatusOr<DispatchPlan> plan = PlanToInspect(operations);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->dispatches.size(), 1u);
  EXPECT_EQ(plan->dispatches[0].constants[0], 1u + 3u + 70u + 2u);  // stacked rows
  int resident = 0;
  for (const BufferSpec& spec : plan->buffers) {
    if (spec.kind == BufferKind::kResident) {
      ++resident;
      EXPECT_EQ(spec.resident_key, "weights-1/qmm-b-packed");
    }
  }
  EXPECT_EQ(resident, 1);
  RunAndCheck(operations);
  RunAndCheck(operations);  // second time with B resident on the device
}

// B's per-column zero points decide fusion by their values, whoever holds
// them: two jobs sending equal ones in buffers of their own share a product,
// a third with other values gets its own (the planner works out each
// buffer's facts once per batch and must not mix them up).
TEST(QuantizedMatMulKernelTest, EqualColumnZeroPointsFuseWhateverBufferHoldsThem) {
  std::mt19937_64 rng(10);
  Tensor b = RandomBytes(DataType::kUint8, {1, 1, 45, 19}, rng);
  b.set_registered_id("weights-2");
  Tensor b_scale = Floats({1, 1, 1, 19}, rng, 0.01f, 0.03f);
  const Tensor same = RandomBytes(DataType::kUint8, {1, 1, 1, 19}, rng);
  Tensor other = RandomBytes(DataType::kUint8, {1, 1, 1, 19}, rng);
  other.mutable_data()[0] = static_cast<uint8_t>(same.data()[0] + 1);
  std::vector<Operation> operations;
  const uint32_t rows[] = {2, 5, 3};
  for (int job = 0; job < 3; ++job) {
    // Jobs 0 and 1: the same values, each in a buffer of its own.
    const Tensor& source = job < 2 ? same : other;
    Tensor zero_point = Tensor::Allocate(DataType::kUint8, {1, 1, 1, 19});
    std::memcpy(zero_point.mutable_data(), source.data(), 19);
    absl::StatusOr<QuantizedMatMulOperation> op =
        JobSharingB(rows[job], b, b_scale, zero_point, rng);
    ASSERT_TRUE(op.ok()) << op.status();
    operations.push_back(*std::move(op));
  }
  absl::StatusOr<DispatchPlan> plan = PlanToInspect(operations);
  ASSERT_TRUE(plan.ok());
  // The products' dispatches (besides them: their split-K reductions).
  std::vector<uint32_t> product_rows;
  for (const Dispatch& d : plan->dispatches) {
    if (d.kernel.rfind("qmm.rows", 0) == 0 || d.kernel.rfind("qmm.gemm", 0) == 0) {
      product_rows.push_back(d.constants[0]);
    }
  }
  EXPECT_EQ(product_rows, (std::vector<uint32_t>{2u + 5u, 3u}));  // jobs 0 and 1 stacked
  RunAndCheck(operations);
}

// Per-tensor A and output parameters: jobs that share them share one row
// parameter entry (a 16M-row product uploads 16 bytes of parameters, not
// 256 MiB); jobs whose per-tensor values differ get an entry per row.
TEST(QuantizedMatMulKernelTest, RowParametersAreSharedWhenEveryRowHasTheSame) {
  std::mt19937_64 rng(9);
  Tensor b = RandomBytes(DataType::kUint8, {1, 1, 13, 7}, rng);
  for (const bool same : {true, false}) {
    SCOPED_TRACE(same ? "same per-tensor parameters" : "different per-tensor parameters");
    std::vector<Operation> operations;
    for (uint32_t m : {5u, 66u, 1u}) {
      QuantizedMatMulTensors t;
      t.a = RandomBytes(DataType::kUint8, {m, 13}, rng);
      t.a_scale = Scalar(DataType::kFloat32, same ? 0.02 : 0.01 * m);
      t.a_zero_point = Scalar(DataType::kUint8, same ? 3 : m % 7);
      t.b = b;
      t.b_scale = Scalar(DataType::kFloat32, 0.03);
      t.output_scale = Scalar(DataType::kFloat32, 0.2);
      t.output_zero_point = Scalar(DataType::kUint8, 9);
      absl::StatusOr<QuantizedMatMulOperation> op =
          MakeQuantizedMatMulOperation(std::move(t), DataType::kUint8);
      ASSERT_TRUE(op.ok()) << op.status();
      operations.push_back(*std::move(op));
    }
    absl::StatusOr<DispatchPlan> plan = PlanToInspect(operations);
    ASSERT_TRUE(plan.ok());
    ASSERT_EQ(plan->dispatches.size(), 2u);  // qmm.packb, then the one product
    const Dispatch& d = plan->dispatches[1];
    EXPECT_EQ(d.constants[kQmmConstRowParamBytes], same ? 0u : 16u);
    EXPECT_EQ(plan->buffers[d.srvs[2].buffer].size_bytes, same ? 16u : 16u * (5 + 66 + 1));
    RunAndCheck(operations);
  }
}

// Per-tensor b_scale and b_zero_point: every column reads one 8-byte entry
// (kQmmConstColumnParamBytes 0) instead of N of them, in every kernel that
// reads them: qmm.packb (the zero point pads K past the last oct), qmm.rows,
// qmm.gemm, qmm.reduce, and an outer product of slices. Per-column
// parameters keep an entry per column.
TEST(QuantizedMatMulKernelTest, ColumnParametersAreOneEntryWhenEveryColumnHasTheSame) {
  std::mt19937_64 rng(21);
  // a slices, b slices, M, K, N: qmm.rows, qmm.gemm, split-K, an outer product.
  const uint32_t shapes[][5] = {
      {1, 1, 3, 13, 300}, {1, 1, 70, 21, 130}, {1, 1, 65, 600, 9}, {4, 3, 1, 13, 10}};
  for (const bool per_tensor : {true, false}) {
    for (const auto& s : shapes) {
      const uint32_t a_slices = s[0], b_slices = s[1], m = s[2], k = s[3], n = s[4];
      SCOPED_TRACE(::testing::Message() << (per_tensor ? "per-tensor" : "per-column") << " M=" << m
                                        << " K=" << k << " N=" << n);
      QuantizedMatMulTensors t;
      t.a = RandomBytes(DataType::kUint8, {a_slices, 1, m, k}, rng);
      t.a_scale = Floats({1, 1, 1, 1}, rng, 0.01f, 0.05f);
      t.a_zero_point = RandomBytes(DataType::kUint8, {1, 1, 1, 1}, rng);
      t.b = RandomBytes(DataType::kInt8, {1, b_slices, k, n}, rng);
      const Shape column_shape = per_tensor ? Shape{1, 1, 1, 1} : Shape{1, 1, 1, n};
      t.b_scale = Floats(column_shape, rng, 0.01f, 0.05f);
      t.b_zero_point = RandomBytes(DataType::kInt8, column_shape, rng);
      t.output_scale = Floats({1, 1, 1, 1}, rng, 0.05f, 0.5f);
      t.output_zero_point = RandomBytes(DataType::kInt8, {1, 1, 1, 1}, rng);
      absl::StatusOr<QuantizedMatMulOperation> op =
          MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8);
      ASSERT_TRUE(op.ok()) << op.status();
      std::vector<Operation> operations = {*std::move(op)};
      std::vector<WorkItem> items(1);
      items[0].operation = &operations[0];
      absl::StatusOr<DispatchPlan> plan = PlanBatch(absl::MakeSpan(items));
      ASSERT_TRUE(plan.ok()) << plan.status();
      for (const Dispatch& d : plan->dispatches) {
        SCOPED_TRACE(d.kernel);
        const int slot = d.kernel == QuantizedMatMulPackSpec::kKey ? 1 : 3;
        EXPECT_EQ(d.constants[kQmmConstColumnParamBytes], per_tensor ? 0u : 8u);
        EXPECT_EQ(plan->buffers[d.srvs[slot].buffer].size_bytes,
                  per_tensor ? 8u : 8u * b_slices * n);
      }
      RunAndCheck(operations);
    }
  }
}

// A request's own B is uploaded as it is and packed on the device by
// qmm.packb in a stage of its own (a registered B is packed once on the
// host and stays resident: JobsSharingBAreFusedIntoOneDispatch). Both
// packings give the reference's results, for every type, K past a whole
// oct (the zero point pads) and B with slices (outer products:
// OuterProductsOfSlicesAreOneProduct).
TEST(QuantizedMatMulKernelTest, RequestBIsPackedOnTheDevice) {
  std::mt19937_64 rng(12);
  std::vector<Operation> operations;
  const uint32_t shapes[][4] = {{1, 5, 13, 7}, {3, 70, 9, 300}, {2, 1, 16, 5}};  // slices, M, K, N
  for (DataType a_type : {DataType::kInt8, DataType::kUint8}) {
    for (DataType b_type : {DataType::kInt8, DataType::kUint8}) {
      for (const auto& s : shapes) {
        const uint32_t slices = s[0], m = s[1], k = s[2], n = s[3];
        QuantizedMatMulTensors t;
        t.a = RandomBytes(a_type, {slices, 1, m, k}, rng);
        t.a_scale = Floats({1, 1, 1, 1}, rng, 0.01f, 0.05f);
        t.a_zero_point = RandomBytes(a_type, {1, 1, 1, 1}, rng);
        t.b = RandomBytes(b_type, {slices, 1, k, n}, rng);
        t.b_scale = Floats({1, 1, 1, n}, rng, 0.01f, 0.05f);
        t.b_zero_point = RandomBytes(b_type, {1, 1, 1, n}, rng);
        t.output_scale = Floats({1, 1, 1, 1}, rng, 0.05f, 0.5f);
        t.output_zero_point = RandomBytes(DataType::kInt8, {1, 1, 1, 1}, rng);
        absl::StatusOr<QuantizedMatMulOperation> op =
            MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8);
        ASSERT_TRUE(op.ok()) << op.status();
        operations.push_back(*std::move(op));
      }
    }
  }
  std::vector<WorkItem> items(1);
  items[0].operation = &operations[0];
  absl::StatusOr<DispatchPlan> plan = PlanBatch(absl::MakeSpan(items));
  ASSERT_TRUE(plan.ok());
  ASSERT_GE(plan->dispatches.size(), 2u);
  EXPECT_EQ(plan->dispatches[0].kernel, QuantizedMatMulPackSpec::kKey);
  EXPECT_TRUE(plan->dispatches[0].barrier_after);
  for (const Operation& operation : operations) RunAndCheck({operation});
  PlannerOptions on_host;
  on_host.quantized_matmul.pack_b_on_device = false;
  for (const Operation& operation : operations) RunAndCheck({operation}, on_host);
}

TEST(QuantizedMatMulPlannerTest, AccumulatorRangeBound) {
  // The validator already caps K at 33025 (= INT32_MAX / 255^2); the planner
  // checks again, per job, because its int32 accumulation relies on it.
  QuantizedMatMulOperation op;
  op.a.data_type = DataType::kUint8;
  op.b.data_type = DataType::kUint8;
  op.k = 33025;
  EXPECT_TRUE(CheckAccumulatorRange(op).ok());
  op.k = 33026;
  EXPECT_TRUE(absl::IsOutOfRange(CheckAccumulatorRange(op)));
  op.a.data_type = DataType::kInt8;  // |a| <= 128 without a zero point
  op.b.data_type = DataType::kInt8;
  op.k = 131071;
  EXPECT_TRUE(CheckAccumulatorRange(op).ok());
}

TEST(QuantizedMatMulPlannerTest, AccumulatorRangeBoundTakesTheWidestZeroPointColumn) {
  // int8 A without a zero point (|a| <= 128) and uint8 B with per-column zero
  // points: 128 in every column but the last bounds |b - z| by 128; a 0 in
  // the last column raises it to 255, and 65794 * 128 * 255 > 2^31 - 1.
  QuantizedMatMulOperation op;
  op.a.data_type = DataType::kInt8;
  op.b.data_type = DataType::kUint8;
  op.b_zero_point = Tensor::Allocate(DataType::kUint8, {1, 1, 1, 4});
  std::memset(op.b_zero_point.mutable_data(), 128, 4);
  op.k = 65794;
  EXPECT_TRUE(CheckAccumulatorRange(op).ok());
  op.b_zero_point.mutable_data()[3] = 0;
  EXPECT_TRUE(absl::IsOutOfRange(CheckAccumulatorRange(op)));
  op.k = 65793;  // 65793 * 128 * 255 = 2147483520
  EXPECT_TRUE(CheckAccumulatorRange(op).ok());
  // Signed zero points: the smallest one (-128) makes |b - z| reach 255.
  op.b.data_type = DataType::kInt8;
  op.b_zero_point = Tensor::Allocate(DataType::kInt8, {1, 1, 1, 3});
  const int8_t zero_points[3] = {0, 5, -128};
  std::memcpy(op.b_zero_point.mutable_data(), zero_points, 3);
  op.k = 65794;
  EXPECT_TRUE(absl::IsOutOfRange(CheckAccumulatorRange(op)));
  op.b_zero_point.mutable_data()[2] = 0;  // now |b - z| <= 128
  EXPECT_TRUE(CheckAccumulatorRange(op).ok());
}

// The largest K the validator accepts, with values and zero points at the
// extremes: |acc| reaches 33025 * 255^2 = 2147450625, just below 2^31, and
// the zero-point folding must still be exact.
TEST(QuantizedMatMulKernelTest, LargestKWithExtremeZeroPointsIsExact) {
  const uint32_t k = 33025;
  std::vector<Operation> operations;
  for (int variant = 0; variant < 3; ++variant) {
    QuantizedMatMulTensors t;
    t.a = Tensor::Allocate(DataType::kUint8, {2, k});
    t.b = Tensor::Allocate(DataType::kUint8, {k, 5});
    std::memset(t.a.mutable_data(), variant == 1 ? 0 : 255, t.a.byte_size());
    std::memset(t.b.mutable_data(), variant == 1 ? 0 : 255, t.b.byte_size());
    if (variant == 2) t.a.mutable_data()[k] = 0;  // second row: one smaller term
    t.a_scale = Scalar(DataType::kFloat32, 1.0 / 1024);
    t.b_scale = Scalar(DataType::kFloat32, 1.0 / 1024);
    t.output_scale = Scalar(DataType::kFloat32, 8192.0);
    if (variant == 1) {
      t.a_zero_point = Scalar(DataType::kUint8, 255);
      t.b_zero_point = Scalar(DataType::kUint8, 255);
    }
    absl::StatusOr<QuantizedMatMulOperation> op =
        MakeQuantizedMatMulOperation(std::move(t), DataType::kUint8);
    ASSERT_TRUE(op.ok()) << op.status();
    operations.push_back(*std::move(op));
  }
  RunAndCheck(operations);
}

}  // namespace
}  // namespace dmlserve::d3d12

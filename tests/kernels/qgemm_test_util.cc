#include "tests/kernels/qgemm_test_util.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/core/data_type.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve::testing {

Tensor RandomBytes(DataType type, Shape sizes, std::mt19937_64& rng) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  for (uint64_t i = 0; i < tensor.element_count(); ++i) {
    tensor.mutable_data()[i] = static_cast<uint8_t>(rng());
  }
  return tensor;
}

namespace {

// `table` with its micro-kernel replaced by `kernel` (the level's few-rows
// kernel and threshold kept): made once per kernel, never destroyed.
const CpuKernels* WithKernel(const CpuKernels& table, const QGemmUkernel* kernel) {
  auto* copy = new QGemmUkernel(*kernel);
  copy->few_rows = table.qgemm->few_rows;
  copy->min_rows = table.qgemm->min_rows;
  auto* built = new CpuKernels(table);
  built->qgemm = copy;
  return built;
}

Tensor Scales(Shape sizes, double typical, std::mt19937_64& rng) {
  Tensor tensor = Tensor::Allocate(DataType::kFloat32, sizes);
  std::uniform_real_distribution<double> factor(0.5, 2.0);
  for (uint64_t i = 0; i < tensor.element_count(); ++i) {
    tensor.mutable_data_as<float>()[i] = static_cast<float>(typical * factor(rng));
  }
  return tensor;
}

}  // namespace

std::vector<const CpuKernels*> SimdTables() {
  std::vector<const CpuKernels*> tables = AvailableCpuKernels();
  tables.erase(tables.begin());
  return tables;
}

const CpuKernels& PortableTable() { return CpuKernelsFor(CpuIsa::kGeneric); }

std::vector<const CpuKernels*> TablesUnderTest() {
  std::vector<const CpuKernels*> tables = AvailableCpuKernels();
  tables.push_back(&AmxModelCpuKernels());
  // The prefetching candidate (qgemm_ukernel.h): on the model everywhere, on
  // the tiles where the CPU has them.
  static const CpuKernels* const model_prefetch =
      WithKernel(AmxModelCpuKernels(), AmxModelPrefetchQGemmUkernel());
  tables.push_back(model_prefetch);
  if (CpuRunsIsa(CpuIsa::kAmx) && AmxPrefetchQGemmUkernel() != nullptr) {
    static const CpuKernels* const prefetch =
        WithKernel(CpuKernelsFor(CpuIsa::kAmx), AmxPrefetchQGemmUkernel());
    tables.push_back(prefetch);
    static const CpuKernels* const far_prefetch =
        WithKernel(CpuKernelsFor(CpuIsa::kAmx), AmxFarPrefetchQGemmUkernel());
    tables.push_back(far_prefetch);
  }
  // The driver's other blockings (QGemmBlocking) the tile kernel's
  // candidates use: several depth blocks (accumulating), tasks of two row
  // blocks and 512 columns, row blocks outside, A copied with an unaliased
  // stride, a B per request streamed into tasks of up to two row blocks; on
  // the model everywhere, on the tiles where the CPU has them. (Each blocked
  // kernel is held in a static of its own: WithKernel copies it.)
  constexpr QGemmBlocking kBlocked = {.depth_block = 512,
                                      .task_rows = 2 * kQGemmRowBlock,
                                      .column_block = 512,
                                      .row_blocks_outer = true,
                                      .copy_a = true,
                                      .stream_b = true};
  static const QGemmUkernel* const model_blocked_kernel =
      QGemmUkernelWithBlocking(*AmxModelQGemmUkernel(), kBlocked, "amx_model_blocked");
  static const CpuKernels* const model_blocked =
      WithKernel(AmxModelCpuKernels(), model_blocked_kernel);
  tables.push_back(model_blocked);
  static const QGemmUkernel* const model_prefetch_copied_a_kernel = QGemmUkernelWithBlocking(
      *AmxModelPrefetchQGemmUkernel(), {.depth_block = 1024, .copy_a = true},
      "amx_model_prefetch_copied_a");
  static const CpuKernels* const model_prefetch_copied_a =
      WithKernel(AmxModelCpuKernels(), model_prefetch_copied_a_kernel);
  tables.push_back(model_prefetch_copied_a);
  if (CpuRunsIsa(CpuIsa::kAmx) && AmxPrefetchQGemmUkernel() != nullptr) {
    static const QGemmUkernel* const blocked_kernel =
        QGemmUkernelWithBlocking(*AmxPrefetchQGemmUkernel(), kBlocked, "amx_prefetch_blocked");
    static const CpuKernels* const blocked =
        WithKernel(CpuKernelsFor(CpuIsa::kAmx), blocked_kernel);
    tables.push_back(blocked);
  }
  // A B per request of any size packed inside tasks of many rows
  // (StreamedBTaskRows; the driver's own threshold is 8 MiB, too large for
  // the reference): the portable kernel and the tile model, whose mr (32)
  // the vector levels do not have; natively the vector levels run it in
  // LargeBPerRequestStreamedIntoTasksIsExact.
  constexpr QGemmBlocking kStreamedB = {.streamed_b_min_bytes = 1};
  static const QGemmUkernel* const generic_streamed_kernel = QGemmUkernelWithBlocking(
      *CpuKernelsFor(CpuIsa::kGeneric).qgemm, kStreamedB, "generic_streamed_b");
  static const CpuKernels* const generic_streamed =
      WithKernel(CpuKernelsFor(CpuIsa::kGeneric), generic_streamed_kernel);
  tables.push_back(generic_streamed);
  static const QGemmUkernel* const model_streamed_kernel =
      QGemmUkernelWithBlocking(*AmxModelQGemmUkernel(), kStreamedB, "amx_model_streamed_b");
  static const CpuKernels* const model_streamed =
      WithKernel(AmxModelCpuKernels(), model_streamed_kernel);
  tables.push_back(model_streamed);
  return tables;
}

QuantizedMatMulOperation RandomProduct(Shape3 s, DataType a_type, DataType b_type,
                                       DataType output_type, bool per_axis, std::mt19937_64& rng) {
  QuantizedMatMulTensors t;
  const Shape rows = per_axis ? Shape{1, 1, s.m, 1} : Shape{1, 1, 1, 1};
  const Shape columns = per_axis ? Shape{1, 1, 1, s.n} : Shape{1, 1, 1, 1};
  t.a = RandomBytes(a_type, {s.m, s.k}, rng);
  t.a_scale = Scales(rows, 0.02, rng);
  t.a_zero_point = RandomBytes(a_type, rows, rng);
  t.b = RandomBytes(b_type, {s.k, s.n}, rng);
  t.b_scale = Scales(columns, 0.01, rng);
  t.b_zero_point = RandomBytes(b_type, columns, rng);
  // |acc| is typically ~ 128 * 128 * sqrt(K / 3) with random zero points:
  // spread it over ~100 output steps.
  t.output_scale = Scales(rows, 0.02 * 0.01 * 16384 * std::sqrt(s.k / 3.0) / 100, rng);
  t.output_zero_point = RandomBytes(output_type, rows, rng);
  absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(t), output_type);
  EXPECT_TRUE(op.ok()) << op.status();
  return *op;
}

QuantizedMatMulOperation SevenBitProduct(Shape3 s, DataType a_type, DataType b_type,
                                         std::mt19937_64& rng) {
  QuantizedMatMulOperation op = RandomProduct(s, a_type, b_type, DataType::kInt8, true, rng);
  const int shift = b_type == DataType::kUint8 ? 128 : 0;
  std::uniform_int_distribution<int> value(-64, 63);
  uint8_t* b = op.b.mutable_data();
  for (uint64_t i = 0; i < op.b.byte_size(); ++i) {
    const int v = i % 11 == 0 ? -64 : i % 13 == 0 ? 63 : value(rng);
    b[i] = static_cast<uint8_t>(v + shift);
  }
  return op;
}

}  // namespace dmlserve::testing

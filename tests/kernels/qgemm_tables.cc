#include "tests/kernels/qgemm_tables.h"

#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_ukernel.h"
#include "kernels/cpu/quantized_matmul_kernels.h"

namespace dmlserve::testing {

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

Tensor ComputeWithTable(const QuantizedMatMulOperation& op, const CpuKernels& table,
                        bool registered) {
  QuantizedMatMulOperation copy = op;
  PackedBCache cache(uint64_t{1} << 30);
  if (registered) copy.b.set_registered_id("weights");
  Tensor output = Tensor::Allocate(copy.output_data_type, copy.output_sizes);
  const QuantizedMatMulOperation* ops[] = {&copy};
  Tensor* outputs[] = {&output};
  ComputeQuantizedMatMuls(ops, outputs, registered ? &cache : nullptr, &table);
  return output;
}

}  // namespace dmlserve::testing

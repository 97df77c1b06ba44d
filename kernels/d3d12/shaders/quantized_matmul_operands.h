#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_OPERANDS_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_OPERANDS_H_

// The buffers of a quantized matrix multiply batch and how they enter its
// plan (plan_builder.h): A's rows, each output row's parameters, B's column
// parameters, B in octs (quantized_matmul_b_forms.h), and the outputs read
// back into the jobs. Layouts are the kernels' (quantized_matmul_kernels.h);
// the planner (quantized_matmul_planner.h) decides which jobs share them,
// the dispatches (quantized_matmul_dispatches.h) bind them.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/backend/device.h"
#include "kernels/core/operation.h"
#include "kernels/d3d12/shaders/plan_builder.h"
#include "kernels/d3d12/shaders/quantized_matmul_planner.h"

namespace dmlserve::d3d12 {

// Stages of a matrix multiply batch: B packed on the device (a B that is not
// registered), the products, split-K's reduction. An empty stage costs
// nothing (PlanBuilder).
constexpr int kPackStage = 0;
constexpr int kProductStage = 1;
constexpr int kReduceStage = 2;

// A rows are K4 = ceil(K/4) words, zero-padded (the kernel masks the values
// past K), so A is uploaded as it is whenever K % 4 == 0.
uint64_t ARowBytes(uint32_t k);

// Appends A's rows (every slice) as rows of K4 words.
void AppendARows(const QuantizedMatMulOperation& op, std::string& out);

// op's A rows as an upload: its own bytes when K % 4 == 0, else padded.
BufferId UploadARows(const QuantizedMatMulOperation& op, PlanBuilder& builder);

// Row parameters (16 bytes each: A's scale bits and zero point, the output's
// scale bits and zero point) for output rows [0, rows): row r is row r % M of
// its slice.
void AppendRowParams(const QuantizedMatMulOperation& op, uint64_t rows, std::string& out);

// Whether every output row of `op` has the same parameters (per-tensor A
// and output scales and zero points): then one entry serves them all.
bool UniformRowParams(const QuantizedMatMulOperation& op);

// The row parameters of `items` stacked: one shared entry when they all
// have the same uniform parameters (the constant kQmmConstRowParamBytes is
// then 0), else an entry per A row. Returns the entry stride in bytes.
uint32_t AppendStackedRowParams(const std::vector<WorkItem*>& items, std::string& out);

// B's column parameters as bound to a dispatch (t3): the buffer and the
// bytes between entries (kQmmConstColumnParamBytes: 8, or 0 for one entry
// that every column shares).
struct ColumnParams {
  BufferId buffer = 0;
  uint32_t stride_bytes = 8;
};

// Adds op's column parameters for a product of `columns` columns (op.n, or
// an outer product's channels x N) to the plan: one shared entry, entries
// resident beside B (made on the host once, DerivedFormCache), or entries
// sent with the batch. Registered per-column parameters stay resident;
// inline ones are sent every batch (each request could bring new ones).
ColumnParams AddColumnParams(const QuantizedMatMulOperation& op, uint64_t columns,
                             const QuantizedMatMulPlannerOptions& options, PlanBuilder& builder);

// How B's slices are laid out in octs: per slice (PackBOcts), or side by
// side as one outer product's columns (PackOuterBOcts).
enum class BLayout { kPerSlice, kOuterProduct };

// op's B in octs (`layout`): a registered B packed once on the host and kept
// resident; a request's own B uploaded as it is and packed by qmm.packb in
// the pack stage (the host would spend longer shuffling bytes than the
// device, and the upload is the same size).
BufferId PackedB(const QuantizedMatMulOperation& op, BLayout layout,
                 const ColumnParams& column_params, const QuantizedMatMulPlannerOptions& options,
                 PlanBuilder& builder);

// Copies output rows [first_row, first_row + rows) (N4 words each) into the
// job's tensor, dropping the padding of each row. When the job is the
// output buffer's `sole_reader` and its rows have no padding (N a multiple
// of 4), the read-back bytes become the tensor's as they are, uncopied.
// `rows` x `n` is the product's view of the job's output (rows of the
// stacked product, or an outer product's batches by channels x N).
absl::Status FinishRows(WorkItem* item, BufferId output, uint64_t first_row, uint64_t rows,
                        uint32_t n, bool sole_reader, ReadBackBuffers& outputs);

// FinishRows for all of a job's output rows, from `first_row` on.
absl::Status FinishJob(WorkItem* item, BufferId output, uint64_t first_row, bool sole_reader,
                       ReadBackBuffers& outputs);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_OPERANDS_H_

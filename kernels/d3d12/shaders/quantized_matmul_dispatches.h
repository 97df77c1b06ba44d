#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_DISPATCHES_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_DISPATCHES_H_

// The dispatches of one quantized matrix multiply product: qmm.gemm's
// 128 x 128 tiles, or qmm.rows for few rows, each split along K when the
// product has too few groups for the device, then qmm.reduce
// (quantized_matmul_kernels.h). The operands they bind come from
// quantized_matmul_operands.h; which jobs form a product is the planner's
// (quantized_matmul_planner.h).

#include <cstdint>

#include "kernels/core/operation.h"
#include "kernels/d3d12/shaders/dispatch_plan.h"
#include "kernels/d3d12/shaders/plan_builder.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"
#include "kernels/d3d12/shaders/quantized_matmul_operands.h"

namespace dmlserve::d3d12 {

inline bool IsSigned(DataType type) { return type == DataType::kInt8; }

// One product's shape and types: a job's own (N = op.n), or an outer
// product's (N = its B channels x op.n, see IsOuterProduct in the planner).
struct Product {
  uint32_t k = 0, n = 0;
  DataType a_type = DataType::kInt8, b_type = DataType::kInt8, output_type = DataType::kInt8;
};
Product ProductOf(const QuantizedMatMulOperation& op, uint32_t n);
Product ProductOf(const QuantizedMatMulOperation& op);

// Products of at most this many rows run on qmm.rows (R <= 16 rows per group)
// rather than 128-row tiles, of which they would use under half.
constexpr uint64_t kRowsKernelMaxRows = 64;

// A one-slice qmm.gemm dispatch of `rows` x p.n x p.k, with an entry of row
// parameters per row (callers with one shared entry set
// kQmmConstRowParamBytes to 0), unbound.
Dispatch GemmDispatch(const Product& p, uint64_t rows, QmmAccumulate accumulate);

// A qmm.gemm dispatch of every output slice of `op` (M rows each), mapping
// slices to A and B slices by broadcast strides; unbound.
Dispatch GemmDispatch(const QuantizedMatMulOperation& op, uint32_t slices,
                      QmmAccumulate accumulate);

// Binds A (t0), B's octs (t1), row parameters (t2), column parameters (t3,
// with their stride) and the output (u0).
void Bind(Dispatch& d, BufferId a, BufferId b, BufferId rows, const ColumnParams& columns,
          BufferId out);

// One product of `total_rows` rows on qmm.gemm into `out`, split along K
// (partials, then qmm.reduce) when it has too few tiles for the device.
void PlanGemmDispatches(const Product& p, uint64_t total_rows, uint32_t row_param_bytes, BufferId a,
                        BufferId b, BufferId rows, const ColumnParams& column_params, BufferId out,
                        QmmAccumulate accumulate, PlanBuilder& builder);

// One product of at most kRowsKernelMaxRows rows on qmm.rows: R rows per
// group (the fewest that hold them, up to 16), split along K into enough
// groups for the device (each split's A staged whole: at most 512 / R
// octs), then qmm.reduce into `out`.
void PlanRowsDispatches(const Product& p, uint64_t total_rows, uint32_t row_param_bytes, BufferId a,
                        BufferId b, BufferId rows, const ColumnParams& column_params, BufferId out,
                        PlanBuilder& builder);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_DISPATCHES_H_

#include "kernels/d3d12/shaders/quantized_matmul_dispatches.h"

#include <algorithm>
#include <utility>

#include "kernels/d3d12/shaders/quantized_matmul_b_forms.h"

namespace dmlserve::d3d12 {
namespace {

using Spec = QuantizedMatMulKernelSpec;

Spec GemmSpec(const Product& p, QmmAccumulate accumulate) {
  Spec spec;
  spec.a_signed = IsSigned(p.a_type);
  spec.b_signed = IsSigned(p.b_type);
  spec.output = IsSigned(p.output_type) ? QmmOutput::kInt8 : QmmOutput::kUint8;
  spec.accumulate = accumulate;
  spec.masked = p.k % 8 != 0;
  return spec;
}

// Split-K (quantized_matmul_kernels.h): a product with fewer 128 x 128 tiles
// than kSplitKTargetGroups is split along K into up to that many groups, so
// that a GPU of 132 SMs (an H100) gets 2 groups per SM; every split keeps at
// least kMinSplitOcts K octs (256 k), so the extra reduce pass and the
// partials' traffic stay small against the multiply-adds.
constexpr uint64_t kSplitKTargetGroups = 2 * 132;
constexpr uint32_t kMinSplitOcts = 32;
// qmm.rows splits keep at least this many K octs (64 k) each, and at least
// one K-loop iteration (QuantizedMatMulRowsSpec::octs_in_flight(): 16 for a
// single row).
constexpr uint64_t kMinRowsSplitOcts = 8;

// The K octs per split of a (rows x N x K) product: 0 when not split.
uint32_t SplitOcts(uint64_t rows, const Product& p) {
  const uint64_t tiles = CeilDiv(rows, Spec::tile_m()) * CeilDiv(p.n, Spec::tile_n());
  const uint32_t ko = DepthOcts(p.k);
  if (tiles >= kSplitKTargetGroups || ko < 2 * kMinSplitOcts) return 0;
  const uint64_t splits =
      std::min<uint64_t>(CeilDiv(kSplitKTargetGroups, tiles), ko / kMinSplitOcts);
  if (splits < 2) return 0;
  return static_cast<uint32_t>(CeilDiv(ko, splits));
}

// The second pass of a split product: partials summed and requantized.
void AddReduce(const Product& p, const Dispatch& product, uint32_t splits, uint64_t total_rows,
               BufferId partials, BufferId rows, const ColumnParams& column_params, BufferId out,
               PlanBuilder& builder) {
  QuantizedMatMulReduceSpec reduce_spec;
  reduce_spec.output_signed = IsSigned(p.output_type);
  Dispatch reduce;
  reduce.kernel = reduce_spec.Key();
  reduce.constants = product.constants;
  reduce.constants[kQmmConstSplits] = splits;
  const uint64_t row_words = (p.n + 3) / 4;
  SetGroupCount(reduce, CeilDiv(total_rows * row_words, QuantizedMatMulReduceSpec::kThreads));
  Bind(reduce, partials, BufferBinding::kUnbound, rows, column_params, out);
  builder.AddDispatch(kReduceStage, std::move(reduce));
}

}  // namespace

Product ProductOf(const QuantizedMatMulOperation& op, uint32_t n) {
  return {op.k, n, op.a.data_type, op.b.data_type, op.output_data_type};
}
Product ProductOf(const QuantizedMatMulOperation& op) { return ProductOf(op, op.n); }

Dispatch GemmDispatch(const Product& p, uint64_t rows, QmmAccumulate accumulate) {
  const Spec spec = GemmSpec(p, accumulate);
  Dispatch d;
  d.kernel = spec.Key();
  const uint64_t tiles_m = CeilDiv(rows, Spec::tile_m());
  const uint64_t tiles_n = CeilDiv(p.n, Spec::tile_n());
  d.constants[kQmmConstRows] = static_cast<uint32_t>(rows);
  d.constants[kQmmConstColumns] = p.n;
  d.constants[kQmmConstDepth] = p.k;
  d.constants[kQmmConstDepthOcts] = DepthOcts(p.k);
  d.constants[kQmmConstTilesN] = static_cast<uint32_t>(tiles_n);
  d.constants[kQmmConstTilesPerSlice] = static_cast<uint32_t>(tiles_m * tiles_n);
  d.constants[kQmmConstOutputWords] = (p.n + 3) / 4;
  d.constants[kQmmConstRowParamBytes] = 16;  // callers with a shared entry set 0
  d.constants[kQmmConstChannels] = 1;
  SetGroupCount(d, tiles_m * tiles_n);
  return d;
}

Dispatch GemmDispatch(const QuantizedMatMulOperation& op, uint32_t slices,
                      QmmAccumulate accumulate) {
  Dispatch d = GemmDispatch(ProductOf(op), op.m, accumulate);
  const uint64_t tiles = d.constants[kQmmConstTilesPerSlice];
  d.constants[kQmmConstChannels] = op.channel;
  d.constants[kQmmConstABatchStride] = op.a_batch == 1 ? 0 : op.a_channel;
  d.constants[kQmmConstAChannelStride] = op.a_channel == 1 ? 0 : 1;
  d.constants[kQmmConstBBatchStride] = op.b_batch == 1 ? 0 : op.b_channel;
  d.constants[kQmmConstBChannelStride] = op.b_channel == 1 ? 0 : 1;
  SetGroupCount(d, uint64_t{slices} * tiles);
  return d;
}

void Bind(Dispatch& d, BufferId a, BufferId b, BufferId rows, const ColumnParams& columns,
          BufferId out) {
  d.srvs[0].buffer = a;
  d.srvs[1].buffer = b;
  d.srvs[2].buffer = rows;
  d.srvs[3].buffer = columns.buffer;
  d.constants[kQmmConstColumnParamBytes] = columns.stride_bytes;
  d.uavs[0].buffer = out;
}

void PlanGemmDispatches(const Product& p, uint64_t total_rows, uint32_t row_param_bytes, BufferId a,
                        BufferId b, BufferId rows, const ColumnParams& column_params, BufferId out,
                        QmmAccumulate accumulate, PlanBuilder& builder) {
  const uint64_t row_words = (p.n + 3) / 4;
  Dispatch d = GemmDispatch(p, total_rows, accumulate);
  d.constants[kQmmConstRowParamBytes] = row_param_bytes;
  const uint32_t split_octs = SplitOcts(total_rows, p);
  if (split_octs == 0) {
    Bind(d, a, b, rows, column_params, out);
    builder.AddDispatch(kProductStage, std::move(d));
  } else {
    // Stage 0: each split's int32 sums into `partials`; stage 1: their sum
    // requantized into `out`.
    const uint32_t splits = static_cast<uint32_t>(CeilDiv(DepthOcts(p.k), split_octs));
    const BufferId partials = builder.AddDeviceBuffer(
        BufferKind::kScratch, uint64_t{splits} * total_rows * row_words * 16);
    const uint64_t tiles = d.constants[kQmmConstTilesPerSlice];
    Spec spec = GemmSpec(p, accumulate);
    spec.output = QmmOutput::kInt32Partial;
    d.kernel = spec.Key();
    d.constants[kQmmConstSplitOcts] = split_octs;
    SetGroupCount(d, tiles * splits);
    Bind(d, a, b, rows, column_params, partials);
    builder.AddDispatch(kProductStage, d);
    AddReduce(p, d, splits, total_rows, partials, rows, column_params, out, builder);
  }
}

void PlanRowsDispatches(const Product& p, uint64_t total_rows, uint32_t row_param_bytes, BufferId a,
                        BufferId b, BufferId rows, const ColumnParams& column_params, BufferId out,
                        PlanBuilder& builder) {
  QuantizedMatMulRowsSpec spec;
  spec.a_signed = IsSigned(p.a_type);
  spec.b_signed = IsSigned(p.b_type);
  spec.rows = 1;
  while (spec.rows < total_rows && spec.rows < 16) spec.rows *= 2;
  const uint64_t tiles_m = CeilDiv(total_rows, spec.rows);
  const uint64_t tiles_n = CeilDiv(p.n, QuantizedMatMulRowsSpec::tile_n());
  const uint64_t tiles = tiles_m * tiles_n;
  const uint32_t ko = DepthOcts(p.k);
  const uint64_t wanted_splits = CeilDiv(kSplitKTargetGroups, tiles);
  // Rounded down, so that the splits make at least the groups wanted, then to
  // whole K-loop iterations (octs_in_flight(), at least one), so that a
  // split's loads are issued together rather than in the kernel's remainder
  // blocks. For R = 1 that is 16 octs (128 k) a split at least, which can
  // make fewer groups than wanted (1 x 4096^2: 256, not 264): on an H100 the
  // GEMV measured 17% faster with 256 groups of 16 octs than with 512 of 8.
  const uint64_t in_flight = spec.octs_in_flight();
  uint64_t split_octs = std::max<uint64_t>(ko / wanted_splits, kMinRowsSplitOcts);
  split_octs = std::max<uint64_t>(split_octs / in_flight * in_flight, in_flight);
  split_octs = std::min<uint64_t>({split_octs, spec.max_split_octs(), ko});
  const uint32_t splits = static_cast<uint32_t>(CeilDiv(ko, split_octs));
  const uint64_t row_words = (p.n + 3) / 4;
  const BufferId partials =
      builder.AddDeviceBuffer(BufferKind::kScratch, uint64_t{splits} * total_rows * row_words * 16);
  Dispatch d;
  d.kernel = spec.Key();
  d.constants[kQmmConstRows] = static_cast<uint32_t>(total_rows);
  d.constants[kQmmConstColumns] = p.n;
  d.constants[kQmmConstDepth] = p.k;
  d.constants[kQmmConstDepthOcts] = ko;
  d.constants[kQmmConstTilesN] = static_cast<uint32_t>(tiles_n);
  d.constants[kQmmConstTilesPerSlice] = static_cast<uint32_t>(tiles);
  d.constants[kQmmConstChannels] = 1;
  d.constants[kQmmConstOutputWords] = static_cast<uint32_t>(row_words);
  d.constants[kQmmConstRowParamBytes] = row_param_bytes;
  d.constants[kQmmConstSplitOcts] = static_cast<uint32_t>(split_octs);
  SetGroupCount(d, tiles * splits);
  Bind(d, a, b, rows, column_params, partials);
  builder.AddDispatch(kProductStage, d);
  AddReduce(p, d, splits, total_rows, partials, rows, column_params, out, builder);
}

}  // namespace dmlserve::d3d12

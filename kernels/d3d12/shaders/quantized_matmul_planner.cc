#include "kernels/d3d12/shaders/quantized_matmul_planner.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/d3d12/shaders/derived_form_cache.h"
#include "kernels/d3d12/shaders/kernel_assembler.h"
#include "kernels/d3d12/shaders/quantized_matmul_b_forms.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

namespace dmlserve::d3d12 {
namespace {

using Spec = QuantizedMatMulKernelSpec;

// Stages of a matrix multiply batch: B packed on the device (a B that is not
// registered), the products, split-K's reduction. An empty stage costs
// nothing (PlanBuilder).
constexpr int kPackStage = 0;
constexpr int kProductStage = 1;
constexpr int kReduceStage = 2;

bool IsSigned(DataType type) { return type == DataType::kInt8; }

uint32_t ScaleBitsAt(const Tensor& t, uint64_t i) {
  const uint64_t index = t.element_count() == 1 ? 0 : i;
  uint32_t bits;
  std::memcpy(&bits, t.data() + 4 * index, 4);
  return bits;
}

void StoreWord(std::string& s, uint64_t word, uint32_t value) {
  std::memcpy(&s[4 * word], &value, 4);
}

// |x - zero_point| over every value x of the type and every zero point given.
uint64_t MaxCentered(DataType type, const Tensor& zero_point) {
  const int32_t low = IsSigned(type) ? -128 : 0, high = IsSigned(type) ? 127 : 255;
  // |v - z| over v in [low, high] peaks at v = low or v = high, and over the
  // zero points at the smallest or the largest: one pass for those two. (A
  // per-column zero point has N elements, and every item of a batch is
  // checked: this ran per element through ZeroPointAt before, which put it
  // among the D3D12 server's hottest functions on a 1 x 1024 x 1024 load.)
  int32_t smallest = 0, largest = 0;
  const uint64_t count = zero_point.present() ? zero_point.element_count() : 0;
  // Byte loops of one type each, which the compiler vectorizes.
  auto extremes = [&](const auto* values) {
    auto low_value = values[0], high_value = values[0];
    for (uint64_t i = 1; i < count; ++i) {
      low_value = std::min(low_value, values[i]);
      high_value = std::max(high_value, values[i]);
    }
    smallest = low_value;
    largest = high_value;
  };
  if (count > 0 && zero_point.data_type == DataType::kInt8) {
    extremes(zero_point.data_as<int8_t>());
  } else if (count > 0) {
    extremes(zero_point.data_as<uint8_t>());
  }
  return static_cast<uint64_t>(std::max({std::abs(low - smallest), std::abs(high - smallest),
                                         std::abs(low - largest), std::abs(high - largest)}));
}

// Jobs that can share one packed B.
struct Group {
  std::vector<WorkItem*> items;
};

// The values of B's column parameters, viewed in place (no copy): equal
// values mean one group, whoever holds them, since requests often send them
// in buffers of their own (a per-tensor zero point beside per-column scales
// is broadcast per request).
struct ColumnParamValues {
  absl::string_view scale, zero_point;  // zero_point empty when absent
  int zero_point_type = -1;             // -1 when absent

  static ColumnParamValues Of(const QuantizedMatMulOperation& op) {
    ColumnParamValues values;
    values.scale = op.b_scale.bytes->view();
    if (op.b_zero_point.present()) {
      values.zero_point = op.b_zero_point.bytes->view();
      values.zero_point_type = static_cast<int>(op.b_zero_point.data_type);
    }
    return values;
  }
  bool operator<(const ColumnParamValues& other) const {
    return std::tie(zero_point_type, scale, zero_point) <
           std::tie(other.zero_point_type, other.scale, other.zero_point);
  }
};

// Products that fuse into one share B (the same buffer), the types, the
// shape of B and B's column parameters: `column_params_id` numbers their
// distinct values within the batch (ColumnParamValues).
std::string GroupKey(const QuantizedMatMulOperation& op, size_t column_params_id) {
  return absl::StrCat(reinterpret_cast<uintptr_t>(op.b.bytes.get()), "/",
                      static_cast<int>(op.a.data_type), "/", static_cast<int>(op.b.data_type), "/",
                      static_cast<int>(op.output_data_type), "/", op.k, "/", op.n, "/", op.b_batch,
                      "/", op.b_channel, "/", column_params_id);
}

// A rows are K4 = ceil(K/4) words, zero-padded (the kernel masks the values
// past K), so A is uploaded as it is whenever K % 4 == 0.
uint64_t ARowBytes(uint32_t k) { return (uint64_t{k} + 3) / 4 * 4; }

// Appends A's rows (every slice) as rows of K4 words.
void AppendARows(const QuantizedMatMulOperation& op, std::string& out) {
  const uint64_t rows = uint64_t{op.a_batch} * op.a_channel * op.m;
  const uint64_t row_bytes = ARowBytes(op.k);
  const size_t start = out.size();
  out.resize(start + rows * row_bytes, '\0');
  for (uint64_t r = 0; r < rows; ++r) {
    std::memcpy(&out[start + r * row_bytes], op.a.data() + r * op.k, op.k);
  }
}

// Row parameters for output rows [0, rows): row r is row r % M of its slice.
void AppendRowParams(const QuantizedMatMulOperation& op, uint64_t rows, std::string& out) {
  const size_t start = out.size() / 4;
  out.resize(out.size() + rows * 16, '\0');
  for (uint64_t r = 0; r < rows; ++r) {
    const uint32_t m = static_cast<uint32_t>(r % op.m);
    StoreWord(out, start + 4 * r + 0, ScaleBitsAt(op.a_scale, m));
    StoreWord(out, start + 4 * r + 1, ScaleBitsAt(op.output_scale, m));
    StoreWord(out, start + 4 * r + 2, static_cast<uint32_t>(ZeroPointAt(op.a_zero_point, m)));
    StoreWord(out, start + 4 * r + 3, static_cast<uint32_t>(ZeroPointAt(op.output_zero_point, m)));
  }
}

// Whether every output row of `op` has the same parameters (per-tensor A
// and output scales and zero points): then one entry serves them all.
bool UniformRowParams(const QuantizedMatMulOperation& op) {
  auto single = [](const Tensor& t) { return !t.present() || t.element_count() == 1; };
  return single(op.a_scale) && single(op.output_scale) && single(op.a_zero_point) &&
         single(op.output_zero_point);
}

// The row parameters of `items` stacked: one shared entry when they all
// have the same uniform parameters (the constant kQmmConstRowParamBytes is
// then 0), else an entry per A row. Returns the entry stride in bytes.
uint32_t AppendStackedRowParams(const std::vector<WorkItem*>& items, std::string& out) {
  bool shared = true;
  std::string first_entry;
  for (WorkItem* item : items) {
    const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
    if (!UniformRowParams(op)) {
      shared = false;
      break;
    }
    std::string entry;
    AppendRowParams(op, 1, entry);
    if (first_entry.empty()) first_entry = entry;
    if (entry != first_entry) {
      shared = false;
      break;
    }
  }
  if (shared) {
    out += first_entry;
    return 0;
  }
  for (WorkItem* item : items) {
    const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
    AppendRowParams(op, uint64_t{op.a_batch} * op.a_channel * op.m, out);
  }
  return 16;
}

// B's column parameters as bound to a dispatch (t3): the buffer and the
// bytes between entries (kQmmConstColumnParamBytes: 8, or 0 for one entry
// that every column shares).
struct ColumnParams {
  BufferId buffer = 0;
  uint32_t stride_bytes = 8;
};

// Whether every column of `op` has the same B parameters (per-tensor b_scale
// and b_zero_point): then one 8-byte entry serves them all.
bool UniformColumnParams(const QuantizedMatMulOperation& op) {
  auto single = [](const Tensor& t) { return !t.present() || t.element_count() == 1; };
  return single(op.b_scale) && single(op.b_zero_point);
}

// `columns` entries of b_scale's float bits and b_zero_point; column c has
// column c % N's parameters (an outer product's columns are B's channels x N).
std::shared_ptr<const Buffer> ColumnParamBytes(const QuantizedMatMulOperation& op,
                                               uint64_t columns) {
  std::string out(columns * 8, '\0');
  // Per element through ScaleBitsAt / ZeroPointAt, each of which counts the
  // tensor's elements again, this cost ~10 ns a column: N entries are made
  // once per tensor for a registered B but once per batch for inline ones.
  const bool one_scale = op.b_scale.element_count() == 1;
  const Tensor& zp = op.b_zero_point;
  const bool one_zero_point = !zp.present() || zp.element_count() == 1;
  for (uint64_t c = 0; c < columns; ++c) {
    const uint64_t column = c % op.n;
    uint32_t scale_bits;
    std::memcpy(&scale_bits, op.b_scale.data() + 4 * (one_scale ? 0 : column), 4);
    StoreWord(out, 2 * c, scale_bits);
    const int32_t zero_point = zp.present() ? ZeroPointValue(zp, one_zero_point ? 0 : column) : 0;
    StoreWord(out, 2 * c + 1, static_cast<uint32_t>(zero_point));
  }
  return Buffer::Adopt(std::move(out));
}

// The resident key of op's per-column parameters, or "" when they are sent
// with every batch. They stay on the device when the registered tensors
// they come from say what they are: a registered b_scale, and a b_zero_point
// that is registered too, absent, or a per-tensor 0 (the same entries as
// absent). The key belongs to the scale's id and names a registered zero
// point's id after a space (ResidentTensors: evicting either drops it).
// Inline per-column parameters are not kept: each request could bring new
// ones, and their entries would pile up on the device.
std::string ColumnParamsKey(const QuantizedMatMulOperation& op) {
  const std::string& scale_id = op.b_scale.registered_id();
  if (scale_id.empty()) return "";
  std::string key = absl::StrCat(scale_id, "/qmm-columns");
  const Tensor& zp = op.b_zero_point;
  if (!zp.present()) return key;
  if (!zp.registered_id().empty()) return absl::StrCat(key, " ", zp.registered_id());
  if (zp.element_count() == 1 && ZeroPointAt(zp, 0) == 0) return key;
  return "";
}

// Adds op's column parameters for a product of `columns` columns (op.n, or
// an outer product's channels x N) to the plan: one shared entry, entries
// resident beside B (made on the host once, DerivedFormCache), or entries
// sent with the batch.
ColumnParams AddColumnParams(const QuantizedMatMulOperation& op, uint64_t columns,
                             const QuantizedMatMulPlannerOptions& options, PlanBuilder& builder) {
  if (UniformColumnParams(op)) {
    std::shared_ptr<const Buffer> entry = ColumnParamBytes(op, 1);
    return {builder.AddUpload(entry, 0, entry->size()), 0};
  }
  const std::string key = columns == op.n ? ColumnParamsKey(op) : "";
  if (key.empty()) {
    std::shared_ptr<const Buffer> entries = ColumnParamBytes(op, columns);
    return {builder.AddUpload(entries, 0, entries->size()), 8};
  }
  DerivedFormCache::Sources sources = {op.b_scale.bytes};
  if (!op.b_zero_point.registered_id().empty()) sources.push_back(op.b_zero_point.bytes);
  const uint64_t cache_bytes = options.packed_weight_cache_bytes;
  return {builder.AddResident(columns * 8, key,
                              [&op, columns, key, sources, cache_bytes] {
                                return DerivedFormCache::Get().FindOrMake(
                                    key, sources, cache_bytes,
                                    [&] { return ColumnParamBytes(op, columns); });
                              }),
          8};
}

// One product's shape and types: a job's own (N = op.n), or an outer
// product's (N = its B channels x op.n, see IsOuterProduct).
struct Product {
  uint32_t k = 0, n = 0;
  DataType a_type = DataType::kInt8, b_type = DataType::kInt8, output_type = DataType::kInt8;
};

Product ProductOf(const QuantizedMatMulOperation& op, uint32_t n) {
  return {op.k, n, op.a.data_type, op.b.data_type, op.output_data_type};
}
Product ProductOf(const QuantizedMatMulOperation& op) { return ProductOf(op, op.n); }

Spec GemmSpec(const Product& p, QmmAccumulate accumulate) {
  Spec spec;
  spec.a_signed = IsSigned(p.a_type);
  spec.b_signed = IsSigned(p.b_type);
  spec.output = IsSigned(p.output_type) ? QmmOutput::kInt8 : QmmOutput::kUint8;
  spec.accumulate = accumulate;
  spec.masked = p.k % 8 != 0;
  return spec;
}

// A one-slice qmm.gemm dispatch of `rows` x p.n x p.k.
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

// A qmm.gemm dispatch of every output slice of `op` (M rows each), mapping
// slices to A and B slices by broadcast strides.
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

// Copies output rows [first_row, first_row + rows) (N4 words each) into the
// job's tensor, dropping the padding of each row. When the job is the
// output buffer's `sole_reader` and its rows have no padding (N a multiple
// of 4), the read-back bytes become the tensor's as they are, uncopied.
// `rows` x `n` is the product's view of the job's output (rows of the
// stacked product, or an outer product's batches by channels x N).
absl::Status FinishRows(WorkItem* item, BufferId output, uint64_t first_row, uint64_t rows,
                        uint32_t n, bool sole_reader, ReadBackBuffers& outputs) {
  const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
  const uint64_t row_bytes = uint64_t{(n + 3) / 4} * 4;
  if (output >= outputs.size() || outputs[output] == nullptr ||
      outputs[output]->size() < (first_row + rows) * row_bytes) {
    return absl::InternalError("matmul output missing from the read-back buffers");
  }
  std::shared_ptr<Buffer> bytes;
  if (sole_reader && first_row == 0 && row_bytes == n && outputs[output]->size() == rows * n) {
    bytes = std::move(outputs[output]);
  } else {
    bytes = Buffer::Uninitialized(rows * n);
    const char* src = outputs[output]->data() + first_row * row_bytes;
    for (uint64_t r = 0; r < rows; ++r) {
      std::memcpy(bytes->data() + r * n, src + r * row_bytes, n);
    }
  }
  item->output.data_type = op.output_data_type;
  item->output.sizes = op.output_sizes;
  item->output.bytes = std::move(bytes);
  item->output.registration.reset();
  return absl::OkStatus();
}

absl::Status FinishJob(WorkItem* item, BufferId output, uint64_t first_row, bool sole_reader,
                       ReadBackBuffers& outputs) {
  const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
  return FinishRows(item, output, first_row, uint64_t{op.batch} * op.channel * op.m, op.n,
                    sole_reader, outputs);
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

// Split-K (quantized_matmul_kernels.h): a product with fewer 128 x 128 tiles
// than kSplitKTargetGroups is split along K into up to that many groups, so
// that a GPU of 132 SMs (an H100) gets 2 groups per SM; every split keeps at
// least kMinSplitOcts K octs (256 k), so the extra reduce pass and the
// partials' traffic stay small against the multiply-adds.
constexpr uint64_t kSplitKTargetGroups = 2 * 132;
constexpr uint32_t kMinSplitOcts = 32;
// Products of at most this many rows run on qmm.rows (R <= 16 rows per group)
// rather than 128-row tiles, of which they would use under half.
constexpr uint64_t kRowsKernelMaxRows = 64;
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

// One product of `total_rows` rows on qmm.gemm, split along K when it has
// too few tiles.
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

// One product of at most kRowsKernelMaxRows rows on qmm.rows: R rows per
// group (the fewest that hold them, up to 16), split along K into enough
// groups for the device (each split's A staged whole: at most 512 / R
// octs), then qmm.reduce.
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

// Jobs whose B is one matrix, as one product of their stacked A rows.
void PlanStackedProduct(const std::vector<WorkItem*>& items, uint64_t total_rows, BufferId b,
                        const ColumnParams& column_params, QmmAccumulate accumulate,
                        PlanBuilder& builder) {
  const auto& first = std::get<QuantizedMatMulOperation>(*items[0]->operation);
  BufferId a;
  if (items.size() == 1 && first.k % 4 == 0) {
    a = builder.AddUpload(first.a.bytes, 0, first.a.byte_size());
  } else {
    std::string stacked;
    stacked.reserve(total_rows * ARowBytes(first.k));
    for (WorkItem* item : items) {
      AppendARows(std::get<QuantizedMatMulOperation>(*item->operation), stacked);
    }
    const uint64_t size = stacked.size();
    a = builder.AddUpload(Buffer::Adopt(std::move(stacked)), 0, size);
  }
  std::string row_params;
  const uint32_t row_param_bytes = AppendStackedRowParams(items, row_params);
  const uint64_t row_params_size = row_params.size();
  const BufferId rows = builder.AddUpload(Buffer::Adopt(std::move(row_params)), 0, row_params_size);
  const uint64_t row_words = (first.n + 3) / 4;
  const BufferId out = builder.AddDeviceBuffer(BufferKind::kOutput, total_rows * row_words * 4);
  if (total_rows <= kRowsKernelMaxRows) {
    PlanRowsDispatches(ProductOf(first), total_rows, row_param_bytes, a, b, rows, column_params,
                       out, builder);
  } else {
    PlanGemmDispatches(ProductOf(first), total_rows, row_param_bytes, a, b, rows, column_params,
                       out, accumulate, builder);
  }
  uint64_t first_row = 0;
  for (WorkItem* item : items) {
    const bool sole_reader = items.size() == 1;
    builder.AddFinisher([item, out, first_row, sole_reader](ReadBackBuffers& outputs) {
      return FinishJob(item, out, first_row, sole_reader, outputs);
    });
    const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
    first_row += uint64_t{op.a_batch} * op.a_channel * op.m;
  }
}

// A packed form of op's B (`form` names it: "qmm-b-packed", "qmm-b-outer"),
// resident when B is registered (and the host repack cached).
BufferId AddPackedB(const QuantizedMatMulOperation& op, const std::string& form,
                    std::shared_ptr<const Buffer> (*pack)(const QuantizedMatMulOperation&),
                    const QuantizedMatMulPlannerOptions& options, PlanBuilder& builder) {
  const std::string& id = op.b.registered_id();
  if (id.empty()) {
    std::shared_ptr<const Buffer> packed = pack(op);
    return builder.AddUpload(packed, 0, packed->size());
  }
  // Both layouts hold every slice's KO x N octs.
  const uint64_t size = uint64_t{op.b_batch} * op.b_channel * DepthOcts(op.k) * op.n * 8;
  const uint64_t cache_bytes = options.packed_weight_cache_bytes;
  std::string key = id + "/" + form;
  return builder.AddResident(size, key, [&op, pack, key, cache_bytes] {
    return DerivedFormCache::Get().FindOrMake(key, {op.b.bytes}, cache_bytes,
                                              [&] { return pack(op); });
  });
}

// A product whose output slices pair every batch of A with every channel of
// B, one row by N each: A {a_batch, 1, 1, K} (a_channel == 1, M == 1), B
// {1, b_channel, K, N}. Output (batch, channel, 0, n) is row `batch`, column
// channel * N + n of ONE product of a_batch x (b_channel * N) x K, whose
// output rows are already the tensor's layout. Planned slice by slice, such
// a product (4096 x 4096 slices of 1 x 1 x 1 in a hostile test) would be 16M
// groups of one multiply-add each.
bool IsOuterProduct(const QuantizedMatMulOperation& op) {
  return op.m == 1 && op.a_channel == 1 && op.b_batch == 1 && op.b_channel > 1 &&
         uint64_t{op.b_channel} * op.n <= UINT32_MAX / 8;
}

// How B's slices are laid out in octs: per slice (PackBOcts), or side by side as
// one outer product's columns (PackOuterBOcts).
enum class BLayout { kPerSlice, kOuterProduct };

// op's B in octs (`layout`): a registered B packed once on the host and kept
// resident; a request's own B uploaded as it is and packed by qmm.packb in
// the pack stage (the host would spend longer shuffling bytes than the
// device, and the upload is the same size).
BufferId PackedB(const QuantizedMatMulOperation& op, BLayout layout,
                 const ColumnParams& column_params, const QuantizedMatMulPlannerOptions& options,
                 PlanBuilder& builder) {
  const bool outer = layout == BLayout::kOuterProduct;
  if (!op.b.registered_id().empty() || !options.pack_b_on_device) {
    return outer ? AddPackedB(op, "qmm-b-outer", PackOuterBOcts, options, builder)
                 : AddPackedB(op, "qmm-b-packed", PackBOcts, options, builder);
  }
  const uint64_t slices = uint64_t{op.b_batch} * op.b_channel;
  const uint32_t ko = DepthOcts(op.k);
  const BufferId raw = builder.AddUpload(op.b.bytes, 0, op.b.byte_size());
  const BufferId packed = builder.AddDeviceBuffer(BufferKind::kScratch, slices * ko * op.n * 8);
  Dispatch d;
  d.kernel = QuantizedMatMulPackSpec::kKey;
  d.constants[kQmmConstColumns] = op.n;
  d.constants[kQmmConstDepth] = op.k;
  d.constants[kQmmConstDepthOcts] = ko;
  d.constants[kQmmConstChannels] = static_cast<uint32_t>(slices);
  d.constants[kQmmConstPackOuter] = outer ? 1 : 0;
  d.srvs[0].buffer = raw;
  d.srvs[1].buffer = column_params.buffer;
  d.constants[kQmmConstColumnParamBytes] = column_params.stride_bytes;
  d.uavs[0].buffer = packed;
  SetGroupCount(d, CeilDiv(slices * ko * op.n, QuantizedMatMulPackSpec::kThreads));
  builder.AddDispatch(kPackStage, std::move(d));
  return packed;
}

BufferId UploadARows(const QuantizedMatMulOperation& op, PlanBuilder& builder) {
  if (op.k % 4 == 0) return builder.AddUpload(op.a.bytes, 0, op.a.byte_size());
  std::string rows_bytes;
  AppendARows(op, rows_bytes);
  const uint64_t size = rows_bytes.size();
  return builder.AddUpload(Buffer::Adopt(std::move(rows_bytes)), 0, size);
}

void PlanOuterProduct(WorkItem* item, const QuantizedMatMulPlannerOptions& options,
                      PlanBuilder& builder) {
  const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
  const uint32_t columns = op.b_channel * op.n;
  const uint64_t rows = op.a_batch;
  const ColumnParams column_params = AddColumnParams(op, columns, options, builder);
  const BufferId b = PackedB(op, BLayout::kOuterProduct, column_params, options, builder);
  const BufferId a = UploadARows(op, builder);
  // M == 1: every output row has row 0's parameters, one shared entry.
  std::string row_params;
  AppendRowParams(op, 1, row_params);
  const uint64_t row_params_size = row_params.size();
  const BufferId row_params_id =
      builder.AddUpload(Buffer::Adopt(std::move(row_params)), 0, row_params_size);
  const BufferId out =
      builder.AddDeviceBuffer(BufferKind::kOutput, rows * ((uint64_t{columns} + 3) / 4) * 4);
  const Product p = ProductOf(op, columns);
  if (rows <= kRowsKernelMaxRows) {
    PlanRowsDispatches(p, rows, 0, a, b, row_params_id, column_params, out, builder);
  } else {
    PlanGemmDispatches(p, rows, 0, a, b, row_params_id, column_params, out, options.gemm_accumulate,
                       builder);
  }
  builder.AddFinisher([item, out, rows, columns](ReadBackBuffers& outputs) {
    return FinishRows(item, out, 0, rows, columns, /*sole_reader=*/true, outputs);
  });
}

void PlanGroup(const Group& group, const QuantizedMatMulPlannerOptions& options,
               PlanBuilder& builder) {
  const auto& first = std::get<QuantizedMatMulOperation>(*group.items[0]->operation);
  const uint64_t row_bytes_in = ARowBytes(first.k);
  const uint32_t b_slices = first.b_batch * first.b_channel;

  if (b_slices == 1) {
    const ColumnParams column_params = AddColumnParams(first, first.n, options, builder);
    const BufferId b = PackedB(first, BLayout::kPerSlice, column_params, options, builder);
    // One product: the jobs' A rows stacked, one output row per A row. Jobs
    // are split over several products only where the stacked buffers would
    // pass 32-bit addressing.
    const uint64_t row_bytes = std::max<uint64_t>({row_bytes_in, 16, (first.n + 3) / 4 * 4});
    const uint64_t max_rows = kMaxKernelBufferBytes / row_bytes;
    std::vector<WorkItem*> chunk;
    uint64_t chunk_rows = 0;
    auto flush = [&] {
      if (chunk.empty()) return;
      PlanStackedProduct(chunk, chunk_rows, b, column_params, options.gemm_accumulate, builder);
      chunk.clear();
      chunk_rows = 0;
    };
    for (WorkItem* item : group.items) {
      const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
      const uint64_t rows = uint64_t{op.a_batch} * op.a_channel * op.m;
      if (chunk_rows + rows > max_rows) flush();
      chunk.push_back(item);
      chunk_rows += rows;
    }
    flush();
    return;
  }

  // B has slices: one dispatch per job, slices mapped by broadcast strides
  // (or one product, for an outer product of slices). B is packed slice by
  // slice once, for the jobs that need it.
  std::optional<BufferId> b;
  std::optional<ColumnParams> column_params;
  for (WorkItem* item : group.items) {
    const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
    if (IsOuterProduct(op)) {
      PlanOuterProduct(item, options, builder);
      continue;
    }
    if (!b.has_value()) {
      column_params = AddColumnParams(first, first.n, options, builder);
      b = PackedB(first, BLayout::kPerSlice, *column_params, options, builder);
    }
    const BufferId a = UploadARows(op, builder);
    const uint32_t slices = op.batch * op.channel;
    std::string row_params;
    const bool uniform = UniformRowParams(op);
    AppendRowParams(op, uniform ? 1 : uint64_t{slices} * op.m, row_params);
    const uint64_t row_params_size = row_params.size();
    const BufferId rows =
        builder.AddUpload(Buffer::Adopt(std::move(row_params)), 0, row_params_size);
    const BufferId out = builder.AddDeviceBuffer(BufferKind::kOutput,
                                                 uint64_t{slices} * op.m * ((op.n + 3) / 4) * 4);
    Dispatch d = GemmDispatch(op, slices, options.gemm_accumulate);
    if (uniform) d.constants[kQmmConstRowParamBytes] = 0;
    Bind(d, a, *b, rows, *column_params, out);
    builder.AddDispatch(kProductStage, std::move(d));
    builder.AddFinisher([item, out](ReadBackBuffers& outputs) {
      return FinishJob(item, out, 0, /*sole_reader=*/true, outputs);
    });
  }
}

absl::Status CheckAddressable(const QuantizedMatMulOperation& op) {
  const uint64_t ko_bytes = uint64_t{DepthOcts(op.k)} * 8;
  const uint64_t out_rows = uint64_t{op.batch} * op.channel * op.m;
  const uint64_t a_rows = uint64_t{op.a_batch} * op.a_channel * op.m;
  const uint64_t b_columns = uint64_t{op.b_batch} * op.b_channel * op.n;
  if (a_rows * ARowBytes(op.k) > kMaxKernelBufferBytes ||
      b_columns * ko_bytes > kMaxKernelBufferBytes ||
      out_rows * ((op.n + 3) / 4) * 4 > kMaxKernelBufferBytes ||
      (!UniformRowParams(op) && out_rows * 16 > kMaxKernelBufferBytes)) {
    return absl::ResourceExhaustedError(
        "the D3D12 matmul kernel addresses at most 4 GiB per buffer");
  }
  return absl::OkStatus();
}

}  // namespace

QmmAccumulate DefaultGemmAccumulate() {
  const char* value = std::getenv("DMLSERVE_D3D12_QMM_ACCUMULATE");
  return value != nullptr && std::string(value) == "float32" ? QmmAccumulate::kFloat32
                                                             : QmmAccumulate::kInt32;
}

uint64_t QuantizedMatMulWorkingBytes(const QuantizedMatMulOperation& op) {
  const uint64_t ko_bytes = uint64_t{DepthOcts(op.k)} * 8;
  const uint64_t n4_bytes = (uint64_t{op.n} + 3) / 4 * 4;
  const uint64_t a_rows = uint64_t{op.a_batch} * op.a_channel * op.m;
  const uint64_t out_rows = uint64_t{op.batch} * op.channel * op.m;
  const uint64_t b_columns = uint64_t{op.b_batch} * op.b_channel * op.n;
  // A and packed B: a host copy and its upload staging; row parameters (one
  // shared entry or one per row) likewise; the output on the device, in
  // read-back staging and copied out of it.
  const uint64_t row_params = UniformRowParams(op) ? 16 : out_rows * 16;
  return 2 * (a_rows * ARowBytes(op.k) + b_columns * ko_bytes + row_params) +
         3 * out_rows * n4_bytes;
}

namespace {

// `b_max_centered` is MaxCentered(op.b.data_type, op.b_zero_point).
absl::Status CheckAccumulatorRangeWith(const QuantizedMatMulOperation& op,
                                       uint64_t b_max_centered) {
  const uint64_t bound =
      uint64_t{op.k} * MaxCentered(op.a.data_type, op.a_zero_point) * b_max_centered;
  if (bound > uint64_t{INT32_MAX}) {
    return absl::OutOfRangeError(absl::StrCat(
        "K = ", op.k,
        " is too large for the D3D12 backend's exact 32-bit accumulation with "
        "these types and zero points (K * max|a - a_zero_point| * max|b - b_zero_point| = ",
        bound, " > 2^31 - 1)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckAccumulatorRange(const QuantizedMatMulOperation& op) {
  return CheckAccumulatorRangeWith(op, MaxCentered(op.b.data_type, op.b_zero_point));
}

void PlanQuantizedMatMuls(const std::vector<WorkItem*>& items,
                          const QuantizedMatMulPlannerOptions& options, PlanBuilder& builder) {
  std::map<std::string, Group> groups;
  std::vector<std::string> order;
  // What depends on B's column parameters alone (their largest centred
  // value, which values they are) is worked out once per buffer that holds
  // them, not once per item: a batch's items normally share them, and per
  // column they are N values each. On the shared-B load's batch (16 items,
  // N = 1024) this, done per item and by copies, took most of the planner's
  // 73-75 us; 11.5 us now (BM_D3D12PlanBatch).
  struct ColumnParamsFacts {
    uint64_t b_max_centered = 0;
    size_t values_id = 0;  // equal values, equal id (whoever holds them)
  };
  std::map<std::tuple<const Buffer*, const Buffer*, DataType>, ColumnParamsFacts> facts_by_buffers;
  std::map<ColumnParamValues, size_t> values_ids;
  for (WorkItem* item : items) {
    const auto& op = std::get<QuantizedMatMulOperation>(*item->operation);
    auto [facts, made] = facts_by_buffers.try_emplace(
        std::make_tuple(op.b_scale.bytes.get(), op.b_zero_point.bytes.get(), op.b.data_type));
    if (made) {
      facts->second.b_max_centered = MaxCentered(op.b.data_type, op.b_zero_point);
      facts->second.values_id =
          values_ids.try_emplace(ColumnParamValues::Of(op), values_ids.size()).first->second;
    }
    absl::Status status = CheckAccumulatorRangeWith(op, facts->second.b_max_centered);
    if (status.ok()) status = CheckAddressable(op);
    if (!status.ok()) {
      item->status = status;
      continue;
    }
    const std::string key = GroupKey(op, facts->second.values_id);
    auto [it, inserted] = groups.try_emplace(key);
    if (inserted) order.push_back(key);
    it->second.items.push_back(item);
  }
  for (const std::string& key : order) PlanGroup(groups[key], options, builder);
}

}  // namespace dmlserve::d3d12

#include "kernels/d3d12/shaders/quantized_matmul_planner.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/d3d12/shaders/quantized_matmul_b_forms.h"
#include "kernels/d3d12/shaders/quantized_matmul_dispatches.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"
#include "kernels/d3d12/shaders/quantized_matmul_operands.h"

namespace dmlserve::d3d12 {
namespace {

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

#include "kernels/cpu/quantized_matmul_kernels.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/int16_dot_kernels.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/parallel_for.h"

namespace dmlserve {
namespace {

// Tile of the output one task computes; its int32 accumulators (32 KiB) and
// the B columns it reads (kTileCols * K * 2 bytes) stay in L1/L2.
constexpr size_t kTileRows = 64;
constexpr size_t kTileCols = 128;
// Depth block and column group of the L1 blocking in ComputeTile.
constexpr size_t kDepthBlock = 1024;
constexpr size_t kGroupCols = 8;
// Products smaller than this many multiply-adds run on the calling thread.
constexpr int64_t kMinMacsPerTask = 1 << 20;

int32_t ReadInteger(const Tensor& tensor, uint64_t index) {
  if (tensor.data_type == DataType::kInt8) return tensor.data_as<int8_t>()[index];
  return tensor.data_as<uint8_t>()[index];
}

// A zero point (absent means 0) for row or column `index`.
int32_t ZeroPointAt(const Tensor& zero_point, QuantizationAxis axis, uint32_t index) {
  if (!zero_point.present()) return 0;
  return ReadInteger(zero_point, axis == QuantizationAxis::kPerTensor ? 0 : index);
}

float ScaleAt(const Tensor& scale, QuantizationAxis axis, uint32_t index) {
  float value;
  std::memcpy(&value, scale.data_as<float>() + (axis == QuantizationAxis::kPerTensor ? 0 : index),
              sizeof(value));
  return value;
}

// One row of the stacked A and where its results go.
struct RowJob {
  const uint8_t* a;  // K elements of A's type
  bool a_signed;
  int32_t a_zero_point;
  float a_scale;
  float output_scale;
  int32_t output_zero_point;
  int32_t low, high;  // output type range
  uint8_t* out;       // N elements of the output type
};

void PackARow(const RowJob& row, size_t k, int16_t* packed) {
  if (row.a_signed) {
    const auto* a = reinterpret_cast<const int8_t*>(row.a);
    for (size_t i = 0; i < k; ++i) packed[i] = static_cast<int16_t>(a[i] - row.a_zero_point);
  } else {
    for (size_t i = 0; i < k; ++i) packed[i] = static_cast<int16_t>(row.a[i] - row.a_zero_point);
  }
}

// Requantizes one row of accumulators (columns [first, first + count)).
void RequantizeRow(const RowJob& row, const int32_t* acc, const float* column_scales, size_t first,
                   size_t count) {
  const double a_scale = row.a_scale;
  const double output_scale = row.output_scale;
  // Values beyond these bounds saturate anyway; bounding first keeps the
  // rounding trick below in range.
  const double low = static_cast<double>(row.low - row.output_zero_point) - 1.0;
  const double high = static_cast<double>(row.high - row.output_zero_point) + 1.0;
  // Adding and subtracting 1.5 * 2^52 rounds a double of magnitude < 2^51 to
  // an integer in the current rounding mode (nearest, ties to even) and,
  // unlike nearbyint, vectorises.
  constexpr double kRounder = 6755399441055744.0;
  uint8_t* out = row.out + first;
  for (size_t j = 0; j < count; ++j) {
    const double multiplier =
        a_scale * static_cast<double>(column_scales[first + j]) / output_scale;
    double value = static_cast<double>(acc[j]) * multiplier;
    value = std::min(std::max(value, low), high);
    const double rounded = (value + kRounder) - kRounder;
    int32_t result = static_cast<int32_t>(rounded) + row.output_zero_point;
    result = std::min(std::max(result, row.low), row.high);
    out[j] = static_cast<uint8_t>(result);
  }
}

// int32 products of `tile_rows` packed A rows with `tile_cols` packed B
// columns from col0, into acc (row stride kTileCols). Blocked so that one
// depth block of a column group (kGroupCols * kDepthBlock * 2 bytes) and of a
// row panel stay in L1 while the panel sweeps the group.
void ComputeTile(Int16DotPanelFn dot, const int16_t* a, size_t tile_rows, const PackedB& b,
                 size_t col0, size_t tile_cols, int32_t* acc) {
  const size_t stride = PackedStride(b.depth);
  std::fill(acc, acc + kTileRows * kTileCols, 0);
  for (size_t k0 = 0; k0 < b.depth; k0 += kDepthBlock) {
    const size_t block = std::min(kDepthBlock, b.depth - k0);
    for (size_t c = 0; c < tile_cols; c += kGroupCols) {
      const size_t cols = std::min(kGroupCols, tile_cols - c);
      for (size_t i = 0; i < tile_rows; i += kDotPanelRows) {
        const int panel_rows = static_cast<int>(std::min<size_t>(kDotPanelRows, tile_rows - i));
        dot(a + i * stride + k0, stride, panel_rows, b.column(col0 + c) + k0, b.stride, cols, block,
            acc + i * kTileCols + c, kTileCols);
      }
    }
  }
}

// out = requantize((A - za) x (B - zb)) for every row of `rows`.
void RunGemm(const PackedB& b, size_t k, const std::vector<RowJob>& rows) {
  if (rows.empty()) return;
  const size_t depth = b.depth;
  const size_t stride = PackedStride(depth);
  const size_t row_count = rows.size();
  std::vector<int16_t> a(row_count * stride, 0);
  ParallelFor(row_count, std::max<int64_t>(1, (1 << 18) / depth), [&](int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) PackARow(rows[r], k, a.data() + r * stride);
  });

  const Int16DotPanelFn dot = BestInt16DotPanel().fn;
  const size_t row_tiles = (row_count + kTileRows - 1) / kTileRows;
  const size_t col_tiles = (b.n + kTileCols - 1) / kTileCols;
  const int64_t macs_per_task = int64_t{kTileRows} * kTileCols * depth;
  ParallelFor(row_tiles * col_tiles, std::max<int64_t>(1, kMinMacsPerTask / macs_per_task),
              [&](int64_t first, int64_t last) {
                std::vector<int32_t> acc(kTileRows * kTileCols);
                for (int64_t task = first; task < last; ++task) {
                  // Column-major task order: neighbouring tasks share B columns.
                  const size_t row0 = (task % row_tiles) * kTileRows;
                  const size_t col0 = (task / row_tiles) * kTileCols;
                  ComputeTile(dot, a.data() + row0 * stride, std::min(kTileRows, row_count - row0),
                              b, col0, std::min(kTileCols, b.n - col0), acc.data());
                  for (size_t i = 0; i < std::min(kTileRows, row_count - row0); ++i) {
                    RequantizeRow(rows[row0 + i], acc.data() + i * kTileCols,
                                  b.column_scales.data(), col0, std::min(kTileCols, b.n - col0));
                  }
                }
              });
}

// Appends the rows of A slice `a_slice` of `op`, writing to output slice
// `out_slice` of `output`.
void AddRows(const QuantizedMatMulOperation& op, uint64_t a_slice, Tensor& output,
             uint64_t out_slice, std::vector<RowJob>& rows) {
  const bool output_signed = op.output_data_type == DataType::kInt8;
  const uint8_t* a = op.a.data() + a_slice * op.m * op.k;
  uint8_t* out = output.mutable_data() + out_slice * op.m * op.n;
  for (uint32_t m = 0; m < op.m; ++m) {
    RowJob row;
    row.a = a + uint64_t{m} * op.k;
    row.a_signed = op.a.data_type == DataType::kInt8;
    row.a_zero_point = ZeroPointAt(op.a_zero_point, op.a_quantization, m);
    row.a_scale = ScaleAt(op.a_scale, op.a_quantization, m);
    row.output_scale = ScaleAt(op.output_scale, op.output_quantization, m);
    row.output_zero_point = ZeroPointAt(op.output_zero_point, op.output_quantization, m);
    row.low = output_signed ? -128 : 0;
    row.high = output_signed ? 127 : 255;
    row.out = out + uint64_t{m} * op.n;
    rows.push_back(row);
  }
}

bool SameBytes(const Tensor& x, const Tensor& y) {
  if (x.data_type != y.data_type || x.sizes != y.sizes) return false;
  if (x.bytes == y.bytes) return true;
  return x.byte_size() == y.byte_size() &&
         (x.byte_size() == 0 || std::memcmp(x.data(), y.data(), x.byte_size()) == 0);
}

bool HasSharedB(const QuantizedMatMulOperation& op) { return op.b_batch == 1 && op.b_channel == 1; }

bool SameB(const QuantizedMatMulOperation& x, const QuantizedMatMulOperation& y) {
  return x.k == y.k && x.n == y.n && x.b_quantization == y.b_quantization && SameBytes(x.b, y.b) &&
         SameBytes(x.b_scale, y.b_scale) && SameBytes(x.b_zero_point, y.b_zero_point);
}

// An operation whose B has several slices: each B slice is packed once and
// multiplied with every A slice it pairs with.
void ComputeBatchedB(const QuantizedMatMulOperation& op, Tensor& output, PackedBCache* cache) {
  for (uint32_t bb = 0; bb < op.b_batch; ++bb) {
    for (uint32_t bc = 0; bc < op.b_channel; ++bc) {
      std::vector<RowJob> rows;
      for (uint32_t batch = 0; batch < op.batch; ++batch) {
        if (op.b_batch != 1 && batch != bb) continue;
        for (uint32_t channel = 0; channel < op.channel; ++channel) {
          if (op.b_channel != 1 && channel != bc) continue;
          const uint64_t a_slice = uint64_t{op.a_batch == 1 ? 0 : batch} * op.a_channel +
                                   (op.a_channel == 1 ? 0 : channel);
          AddRows(op, a_slice, output, uint64_t{batch} * op.channel + channel, rows);
        }
      }
      const uint64_t slice = uint64_t{bb} * op.b_channel + bc;
      RunGemm(cache != nullptr ? *cache->Get(op, slice) : *PackB(op, slice), op.k, rows);
    }
  }
}

}  // namespace

void ComputeQuantizedMatMuls(absl::Span<const QuantizedMatMulOperation* const> ops,
                             absl::Span<Tensor* const> outputs, PackedBCache* cache) {
  std::vector<bool> done(ops.size(), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (done[i]) continue;
    const QuantizedMatMulOperation& op = *ops[i];
    if (!HasSharedB(op)) {
      ComputeBatchedB(op, *outputs[i], cache);
      continue;
    }
    // With one B slice, every A slice of every operation that shares this B
    // is just more rows of one product.
    std::vector<RowJob> rows;
    for (size_t j = i; j < ops.size(); ++j) {
      if (done[j] || !HasSharedB(*ops[j]) || (j != i && !SameB(op, *ops[j]))) continue;
      done[j] = true;
      const QuantizedMatMulOperation& member = *ops[j];
      const uint64_t slices = uint64_t{member.a_batch} * member.a_channel;
      for (uint64_t slice = 0; slice < slices; ++slice) {
        AddRows(member, slice, *outputs[j], slice, rows);
      }
    }
    RunGemm(cache != nullptr ? *cache->Get(op, 0) : *PackB(op, 0), op.k, rows);
  }
}

}  // namespace dmlserve

#include "tests/kernels/kernel_case.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "kernels/core/data_type.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/scan_kernels.h"
#include "tests/kernels/qgemm_tables.h"
#include "tests/reference/reference.h"

namespace dmlserve::testing {
namespace {

// Reads choices from the front of the bytes; past their end every read is
// zero (the smallest choice).
class ByteReader {
 public:
  explicit ByteReader(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}

  uint8_t Byte() { return next_ < bytes_.size() ? bytes_[next_++] : 0; }
  bool Bool() { return (Byte() & 1) != 0; }
  // Eight bytes, little-endian.
  uint64_t Word() {
    uint64_t word = 0;
    for (int i = 0; i < 8; ++i) word |= uint64_t{Byte()} << (8 * i);
    return word;
  }
  // A value in [0, count): as many bytes as count needs, modulo count.
  uint32_t InRange(size_t count) {
    uint64_t value = 0;
    for (size_t span = count - 1; span != 0; span >>= 8) value = (value << 8) | Byte();
    return static_cast<uint32_t>(value % count);
  }

 private:
  absl::Span<const uint8_t> bytes_;
  size_t next_ = 0;
};

// How an operand's elements are chosen: most inputs get random bytes, some
// the ends of the type's range, where zero points, sums and saturation meet
// their limits.
enum class Fill { kRandom, kLowest, kHighest, kAlternating };

// A small, fast generator seeded by the input: the values follow the input
// without needing as many input bytes as there are elements.
class Bits {
 public:
  explicit Bits(uint64_t seed) : state_(seed | 1) {}
  uint64_t Next() {  // xorshift64*
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return state_ * 0x2545F4914F6CDD1Dull;
  }

 private:
  uint64_t state_;
};

// An INT8 or UINT8 tensor filled as `fill` says.
Tensor Bytes(DataType type, Shape sizes, Fill fill, Bits& bits) {
  Tensor tensor = Tensor::Allocate(type, std::move(sizes));
  const bool is_signed = type == DataType::kInt8;
  const uint8_t lowest = is_signed ? 0x80 : 0x00, highest = is_signed ? 0x7F : 0xFF;
  uint8_t* data = tensor.mutable_data();
  for (uint64_t i = 0; i < tensor.byte_size(); ++i) {
    switch (fill) {
      case Fill::kRandom:
        data[i] = static_cast<uint8_t>(bits.Next());
        break;
      case Fill::kLowest:
        data[i] = lowest;
        break;
      case Fill::kHighest:
        data[i] = highest;
        break;
      case Fill::kAlternating:
        data[i] = (i + bits.Next() % 2) % 2 ? lowest : highest;
        break;
    }
  }
  return tensor;
}

// Positive FLOAT32 scales around `typical` (x0.5 to x2), or powers of two
// (exact requantization, so ties are exact and must round half to even).
Tensor Scales(Shape sizes, double typical, bool powers_of_two, Bits& bits) {
  Tensor tensor = Tensor::Allocate(DataType::kFloat32, std::move(sizes));
  for (uint64_t i = 0; i < tensor.element_count(); ++i) {
    const double unit = static_cast<double>(bits.Next() >> 11) * 0x1p-53;  // [0, 1)
    const double scale =
        powers_of_two
            ? std::exp2(std::round(std::log2(typical)) + static_cast<double>(bits.Next() % 3) - 1)
            : typical * (0.5 + 1.5 * unit);
    tensor.mutable_data_as<float>()[i] = static_cast<float>(scale);
  }
  return tensor;
}

DataType Int8Type(bool is_signed) { return is_signed ? DataType::kInt8 : DataType::kUint8; }

absl::Status CheckMatMul(ByteReader& in) {
  static const std::vector<const CpuKernels*> tables = TablesUnderTest();
  const CpuKernels& table = *tables[in.InRange(tables.size())];
  // Shapes up to several row and column blocks (tasks of whole blocks, not
  // only the smaller ones a small product is split into), K past a depth
  // block; K shrinks to keep each input's multiply-adds (the reference's
  // float64 time) within a budget. The scalar model of the tiles is about a
  // thousand times slower than the tiles: a smaller budget.
  const bool model = std::string(table.qgemm->name).rfind("amx_model", 0) == 0;
  const uint64_t budget = model ? uint64_t{128} << 10 : uint64_t{2} << 20;
  const uint32_t m = 1 + in.InRange(model ? 100 : 400);
  const uint32_t n = 1 + in.InRange(model ? 100 : 800);
  const uint32_t k = static_cast<uint32_t>(std::min<uint64_t>(
      1 + in.InRange(model ? 600 : 2100), std::max<uint64_t>(1, budget / (uint64_t{m} * n))));
  // Batch and channel: A's and B's each 1 or 2, a 1 broadcasting.
  const uint32_t a_batch = in.Bool() ? 2 : 1, b_batch = in.Bool() ? 2 : 1;
  const uint32_t a_channel = in.Bool() ? 2 : 1, b_channel = in.Bool() ? 2 : 1;
  const bool a_signed = in.Bool(), b_signed = in.Bool(), out_signed = in.Bool();
  const bool per_row_a = in.Bool(), per_column_b = in.Bool(), per_row_out = in.Bool();
  const bool a_zero = in.Bool(), b_zero = in.Bool(), out_zero = in.Bool();
  const bool seven_bit_b = in.Bool(), powers_of_two = in.Bool();
  const auto fill = [&in] { return static_cast<Fill>(in.InRange(4)); };
  const Fill a_fill = fill(), b_fill = fill(), zero_fill = fill();
  Bits bits(in.Word());

  const Shape rows = per_row_a ? Shape{1, 1, m, 1} : Shape{1, 1, 1, 1};
  const Shape columns = per_column_b ? Shape{1, 1, 1, n} : Shape{1, 1, 1, 1};
  const Shape out_rows = per_row_out ? Shape{1, 1, m, 1} : Shape{1, 1, 1, 1};
  QuantizedMatMulTensors t;
  t.a = Bytes(Int8Type(a_signed), {a_batch, a_channel, m, k}, a_fill, bits);
  t.a_scale = Scales(rows, 0.02, powers_of_two, bits);
  if (a_zero) t.a_zero_point = Bytes(Int8Type(a_signed), rows, zero_fill, bits);
  t.b = Bytes(Int8Type(b_signed), {b_batch, b_channel, k, n}, b_fill, bits);
  if (seven_bit_b) {
    // B - 128 (UINT8) or B (INT8) in [-64, 63]: the AVX2 level's 7-bit kernel.
    for (uint64_t i = 0; i < t.b.byte_size(); ++i) {
      const int v = static_cast<int>(bits.Next() % 128) - 64;
      t.b.mutable_data()[i] = static_cast<uint8_t>(b_signed ? v : v + 128);
    }
  }
  t.b_scale = Scales(columns, 0.01, powers_of_two, bits);
  if (b_zero) t.b_zero_point = Bytes(Int8Type(b_signed), columns, zero_fill, bits);
  // |acc| is typically ~ 128 * 128 * sqrt(K / 3): spread it over ~100 output
  // steps (extreme fills saturate, which is tested too).
  t.output_scale =
      Scales(out_rows, 0.02 * 0.01 * 16384 * std::sqrt(k / 3.0) / 100, powers_of_two, bits);
  if (out_zero) t.output_zero_point = Bytes(Int8Type(out_signed), out_rows, Fill::kRandom, bits);
  absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(t), Int8Type(out_signed));
  if (!op.ok()) {
    return absl::InternalError(
        absl::StrCat("the case made an invalid product: ", op.status().message()));
  }

  const Tensor expected = reference::ComputeQuantizedMatMul(*op);
  for (const bool registered : {false, true}) {
    const absl::Status exact =
        reference::CheckExact(expected, ComputeWithTable(*op, table, registered));
    if (!exact.ok()) {
      return absl::InternalError(
          absl::StrCat(reference::Describe(*op), " on ", table.qgemm->name,
                       registered ? ", B registered: " : ", B per request: ", exact.message()));
    }
  }
  return absl::OkStatus();
}

// Element `i` of a scan's input: integers any bits (they wrap), floats
// finite and moderate (sums of up to thousands stay far from overflow;
// products near 1 neither overflow nor vanish at once).
void StoreScanValue(Tensor& tensor, uint64_t i, OperatorKind kind, Bits& bits) {
  const DataType type = tensor.data_type;
  if (type != DataType::kFloat32 && type != DataType::kFloat16 && type != DataType::kFloat64) {
    reference::StoreBits(tensor, i, bits.Next());
    return;
  }
  const double unit = static_cast<double>(bits.Next() >> 11) * 0x1p-53;  // [0, 1)
  reference::StoreFloat(
      tensor, i,
      kind == OperatorKind::kCumulativeSummation ? 64.0 * unit - 32.0 : 0.9 + 0.2 * unit);
}

absl::Status CheckScan(ByteReader& in) {
  static const std::vector<const CpuKernels*> levels = AvailableCpuKernels();
  const CpuIsa isa = levels[in.InRange(levels.size())]->isa;
  const OperatorKind kind =
      in.Bool() ? OperatorKind::kCumulativeSummation : OperatorKind::kCumulativeProduct;
  const auto type = static_cast<DataType>(1 + in.InRange(11));
  const int rank = static_cast<int>(1 + in.InRange(4));
  Shape sizes;
  uint64_t elements = 1;
  for (int d = 0; d < rank; ++d) {
    // Mostly short dimensions, some long ones: up to 64 Ki elements in all.
    const uint32_t size = in.Bool() ? 1 + in.InRange(9) : 1 + in.InRange(300);
    sizes.push_back(elements * size <= (uint64_t{1} << 16) ? size : 1);
    elements *= sizes.back();
  }
  const auto axis = in.InRange(static_cast<uint32_t>(rank));
  const AxisDirection direction =
      in.Bool() ? AxisDirection::kDecreasing : AxisDirection::kIncreasing;
  const bool exclusive = in.Bool(), in_place = in.Bool();
  Bits bits(in.Word());

  Tensor input = Tensor::Allocate(type, sizes);
  for (uint64_t i = 0; i < elements; ++i) StoreScanValue(input, i, kind, bits);
  // The reference reads an untouched copy: in place, the kernel overwrites
  // its input.
  Tensor pristine = Tensor::Allocate(type, sizes);
  std::copy(input.data(), input.data() + input.byte_size(), pristine.mutable_data());
  absl::StatusOr<ScanOperation> op = MakeScanOperation(kind, input, axis, direction, exclusive);
  if (!op.ok()) return absl::OkStatus();  // a type the operator does not take
  absl::StatusOr<ScanOperation> check =
      MakeScanOperation(kind, std::move(pristine), axis, direction, exclusive);
  if (!check.ok()) {
    return absl::InternalError(absl::StrCat("the same scan was refused once and accepted once: ",
                                            check.status().message()));
  }

  SetCpuIsaForTesting(isa);
  Tensor output = in_place ? op->input : Tensor::Allocate(type, sizes);
  ComputeScan(*op, output);
  SetCpuIsaForTesting(std::nullopt);
  const absl::Status within = reference::CheckOutput(Operation(*check), output);
  if (!within.ok()) {
    return absl::InternalError(absl::StrCat(reference::Describe(*check), " at ", CpuIsaName(isa),
                                            in_place ? ", in place: " : ": ", within.message()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckKernelCase(absl::Span<const uint8_t> bytes) {
  ByteReader in(bytes);
  return in.Bool() ? CheckMatMul(in) : CheckScan(in);
}

}  // namespace dmlserve::testing

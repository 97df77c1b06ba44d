#include "tests/reference/random_operations.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/status/statusor.h"
#include "tests/reference/reference.h"

namespace dmlserve::reference {
namespace {

template <typename T>
T Unwrap(absl::StatusOr<T> value) {
  if (!value.ok()) {
    // A generator bug: every generated operation is meant to be valid.
    std::fprintf(stderr, "RandomOperationGenerator made an invalid operation: %s\n",
                 value.status().ToString().c_str());
    std::abort();
  }
  return *std::move(value);
}

bool IsSigned(DataType type) {
  return type == DataType::kInt8 || type == DataType::kInt16 || type == DataType::kInt32 ||
         type == DataType::kInt64;
}

Tensor FloatTensor(const Shape& sizes, const std::vector<float>& values) {
  Tensor tensor = Tensor::Allocate(DataType::kFloat32, sizes);
  std::memcpy(tensor.mutable_data(), values.data(), values.size() * sizeof(float));
  return tensor;
}

}  // namespace

uint32_t RandomOperationGenerator::Uniform(uint32_t low, uint32_t high) {
  return std::uniform_int_distribution<uint32_t>(low, high)(rng_);
}

bool RandomOperationGenerator::Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

Shape RandomOperationGenerator::RandomShape(int rank, uint64_t max_elements) {
  Shape sizes(rank, 1);
  uint64_t elements = 1;
  // Visit dimensions in random order so no position is always the small one.
  std::vector<int> order(rank);
  for (int i = 0; i < rank; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng_);
  for (int i : order) {
    const uint64_t budget = max_elements / elements;
    if (budget <= 1) break;
    const uint32_t scale = 1u << Uniform(0, 7);  // sizes up to 128, mostly small
    const uint32_t size = Uniform(1, static_cast<uint32_t>(std::min<uint64_t>(scale, budget)));
    sizes[i] = size;
    elements *= size;
  }
  return sizes;
}

Tensor RandomOperationGenerator::RandomTensor(OperatorKind kind, DataType type,
                                              const Shape& sizes) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  const uint64_t count = tensor.element_count();
  const bool sum = kind == OperatorKind::kCumulativeSummation;
  if (type == DataType::kFloat32 || type == DataType::kFloat16) {
    const bool integers = Chance(0.2);
    std::uniform_real_distribution<double> spread(-8.0, 8.0);
    std::uniform_real_distribution<double> factor(std::log(0.7), std::log(1.4));
    for (uint64_t i = 0; i < count; ++i) {
      double value;
      if (sum) {
        value = integers ? std::round(spread(rng_)) : spread(rng_);
      } else {
        value = Chance(0.005) ? 0.0 : std::exp(factor(rng_));
        if (Chance(0.3)) value = -value;
      }
      StoreFloat(tensor, i, value);
    }
    return tensor;
  }
  const size_t bits = DataTypeSize(type) * 8;
  const bool full_range = Chance(0.5);
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t value;
    if (full_range) {
      value = rng_();
    } else if (sum) {
      const int64_t small = static_cast<int64_t>(Uniform(0, 200)) - (IsSigned(type) ? 100 : 0);
      value = static_cast<uint64_t>(small);
    } else {
      value = Uniform(1, 5);
    }
    if (bits < 64) value &= (uint64_t{1} << bits) - 1;
    StoreBits(tensor, i, value);
  }
  return tensor;
}

ScanOperation RandomOperationGenerator::NextScan(OperatorKind kind, DataType type) {
  // Mostly low ranks, where shapes have room to be interesting.
  const int rank = Chance(0.75) ? static_cast<int>(Uniform(1, 4)) : static_cast<int>(Uniform(5, 8));
  Shape sizes = RandomShape(rank, max_elements_);
  const uint32_t axis = Uniform(0, rank - 1);
  // Long axes stress accumulation; give the axis a fair chance to be one.
  if (Chance(0.2)) {
    const uint64_t others = ElementCount(sizes) / sizes[axis];
    sizes[axis] = static_cast<uint32_t>(std::max<uint64_t>(1, max_elements_ / others));
  }
  Tensor input = RandomTensor(kind, type, sizes);
  return Unwrap(MakeScanOperation(
      kind, std::move(input), axis,
      Chance(0.5) ? AxisDirection::kDecreasing : AxisDirection::kIncreasing, Chance(0.5)));
}

ScanOperation RandomOperationGenerator::NextScan() {
  const OperatorKind kind =
      Chance(0.5) ? OperatorKind::kCumulativeSummation : OperatorKind::kCumulativeProduct;
  const absl::Span<const DataType> types = SupportedDataTypes(kind);
  return NextScan(kind, types[Uniform(0, static_cast<uint32_t>(types.size()) - 1)]);
}

QuantizedMatMulOperation RandomOperationGenerator::NextMatMul() {
  auto quantized_type = [&] { return Chance(0.5) ? DataType::kInt8 : DataType::kUint8; };
  const DataType a_type = quantized_type();
  const DataType b_type = quantized_type();
  const DataType output_type = quantized_type();

  const uint32_t batch = Chance(0.6) ? 1 : Uniform(2, 3);
  const uint32_t channel = Chance(0.6) ? 1 : Uniform(2, 3);
  // A dimension of A or B is the full one or, sometimes, broadcast (1).
  auto leading = [&](uint32_t full, bool available) {
    return (!available || (full > 1 && Chance(0.3))) ? 1u : full;
  };
  const int a_rank = static_cast<int>(Uniform(2, 4));
  const int b_rank = static_cast<int>(Uniform(2, 4));
  uint32_t a_batch = leading(batch, a_rank >= 4), a_channel = leading(channel, a_rank >= 3);
  uint32_t b_batch = leading(batch, b_rank >= 4), b_channel = leading(channel, b_rank >= 3);

  uint32_t m = Chance(0.2) ? 1 : Uniform(1, 24);
  uint32_t n = Chance(0.2) ? 1 : Uniform(1, 24);
  uint32_t k = Chance(0.15) ? Uniform(200, 1200) : Uniform(1, 80);
  const uint64_t slices = uint64_t{std::max(a_batch, b_batch)} * std::max(a_channel, b_channel);
  while (slices * std::max<uint64_t>({uint64_t{m} * k, uint64_t{k} * n, uint64_t{m} * n}) >
             max_elements_ &&
         (m > 1 || n > 1 || k > 1)) {
    m = std::max(1u, m / 2);
    n = std::max(1u, n / 2);
    k = std::max(1u, k / 2);
  }

  auto shape = [](int rank, uint32_t d0, uint32_t d1, uint32_t rows, uint32_t cols) {
    Shape full{d0, d1, rows, cols};
    return Shape(full.end() - rank, full.end());
  };
  QuantizedMatMulTensors t;
  // Extreme values (the ends of the type's range) now and then, so the
  // accumulator's bounds get exercised.
  auto fill = [&](DataType type, const Shape& sizes) {
    Tensor tensor = Tensor::Allocate(type, sizes);
    const bool extremes = Chance(0.1);
    for (uint64_t i = 0; i < tensor.element_count(); ++i) {
      uint8_t value = static_cast<uint8_t>(rng_());
      if (extremes) {
        const bool high = Chance(0.5);
        if (type == DataType::kInt8) {
          value = high ? 0x7f : 0x80;  // 127 or -128
        } else {
          value = high ? 0xff : 0x00;
        }
      }
      tensor.mutable_data()[i] = value;
    }
    return tensor;
  };
  t.a = fill(a_type, shape(a_rank, a_batch, a_channel, m, k));
  t.b = fill(b_type, shape(b_rank, b_batch, b_channel, k, n));

  // Scales: powers of two (exact arithmetic, true ties) or arbitrary floats.
  const bool exact_scales = Chance(0.4);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto scale_value = [&](double typical) {
    if (exact_scales) return std::ldexp(1.0, static_cast<int>(std::round(std::log2(typical))));
    return typical * std::exp((unit(rng_) - 0.5) * 2.0);
  };
  // The granularity: 0 per tensor, 1 per row/column.
  auto scales = [&](uint32_t count, bool row, double typical) {
    const bool per_slice = Chance(0.5);
    const uint32_t values = per_slice ? count : 1;
    std::vector<float> data(values);
    for (float& v : data) {
      v = static_cast<float>(scale_value(typical));
      if (!exact_scales && Chance(0.05)) v = -v;
    }
    const Shape sizes = per_slice ? (row ? Shape{1, 1, count, 1} : Shape{1, 1, 1, count})
                                  : (Chance(0.3) ? Shape{1} : Shape{1, 1, 1, 1});
    return FloatTensor(sizes, data);
  };
  auto zero_point = [&](DataType type, uint32_t count, bool row) {
    Tensor tensor;
    if (Chance(0.3)) return tensor;  // absent
    const bool per_slice = Chance(0.5);
    const Shape sizes =
        per_slice ? (row ? Shape{1, 1, count, 1} : Shape{1, 1, 1, count}) : Shape{1, 1, 1, 1};
    return fill(type, sizes);
  };
  const double a_scale = std::ldexp(1.0, -static_cast<int>(Uniform(0, 8)));
  const double b_scale = std::ldexp(1.0, -static_cast<int>(Uniform(0, 8)));
  t.a_scale = scales(m, true, a_scale);
  t.a_zero_point = zero_point(a_type, m, true);
  t.b_scale = scales(n, false, b_scale);
  t.b_zero_point = zero_point(b_type, n, false);
  // Typical |acc| is ~5500 * sqrt(K) for random operands; aim the outputs at
  // the type's range, sometimes well past it (saturation).
  const double typical_acc = 5500.0 * std::sqrt(static_cast<double>(k));
  const double spread = std::ldexp(1.0, static_cast<int>(Uniform(0, 6)) - 2);
  t.output_scale = scales(m, true, a_scale * b_scale * typical_acc / (64.0 * spread));
  DataType requested_type = output_type;
  if (Chance(0.6)) {
    t.output_zero_point = zero_point(output_type, m, true);
    if (t.output_zero_point.present() && Chance(0.5)) requested_type = DataType::kUnknown;
  }
  return Unwrap(MakeQuantizedMatMulOperation(std::move(t), requested_type));
}

Operation RandomOperationGenerator::Next() {
  if (Chance(1.0 / 3.0)) return NextMatMul();
  return NextScan();
}

}  // namespace dmlserve::reference

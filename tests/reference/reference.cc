#include "tests/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/core/overloaded.h"

namespace dmlserve::reference {
namespace {

bool IsFloat(DataType type) { return type == DataType::kFloat32 || type == DataType::kFloat16; }

// Integer element, sign-extended (signed types) or zero-extended to 64 bits.
uint64_t ElementBits(const Tensor& tensor, uint64_t index) {
  const uint8_t* p = tensor.data() + index * DataTypeSize(tensor.data_type);
  switch (tensor.data_type) {
    case DataType::kInt8: {
      int8_t v;
      std::memcpy(&v, p, 1);
      return static_cast<uint64_t>(int64_t{v});
    }
    case DataType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<uint64_t>(int64_t{v});
    }
    case DataType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<uint64_t>(int64_t{v});
    }
    case DataType::kInt64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<uint64_t>(v);
    }
    case DataType::kUint8:
      return p[0];
    case DataType::kUint16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case DataType::kUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DataType::kUint64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    default:
      return 0;
  }
}

// What the checker needs about one float scan output: the exact (float64)
// value before rounding to the type, and the size of the prefix behind it.
struct ScanElement {
  double exact = 0;
  double magnitude = 0;  // sum of |x| (sums) or |product| (products)
  uint64_t count = 0;    // elements combined
};

Tensor RunScan(const ScanOperation& op, std::vector<ScanElement>* details) {
  Tensor out = Tensor::Allocate(op.input.data_type, op.input.sizes);
  const bool sum = op.kind == OperatorKind::kCumulativeSummation;
  const bool is_float = IsFloat(op.input.data_type);
  if (details != nullptr) details->assign(out.element_count(), ScanElement{});
  for (uint64_t o = 0; o < op.outer; ++o) {
    for (uint64_t n = 0; n < op.inner; ++n) {
      double acc = sum ? 0.0 : 1.0;
      double magnitude = sum ? 0.0 : 1.0;
      uint64_t bits = sum ? 0 : 1;
      uint64_t count = 0;
      for (uint64_t p = 0; p < op.axis_size; ++p) {
        const uint64_t i = op.direction == AxisDirection::kDecreasing ? op.axis_size - 1 - p : p;
        const uint64_t index = (o * op.axis_size + i) * op.inner + n;
        auto write = [&] {
          if (is_float) {
            StoreFloat(out, index, acc);
            if (details != nullptr) (*details)[index] = {acc, magnitude, count};
          } else {
            StoreBits(out, index, bits);
          }
        };
        if (op.exclusive) write();
        if (is_float) {
          const double x = ElementAsDouble(op.input, index);
          acc = sum ? acc + x : acc * x;
          magnitude = sum ? magnitude + std::fabs(x) : std::fabs(acc);
        } else {
          const uint64_t x = ElementBits(op.input, index);
          bits = sum ? bits + x : bits * x;  // unsigned: wraps modulo 2^64
        }
        ++count;
        if (!op.exclusive) write();
      }
    }
  }
  return out;
}

// Per output element of a matrix multiply.
struct MatMulElement {
  int64_t acc = 0;
  double real = 0;            // acc * multiplier, float64
  bool exact_float32 = true;  // the same computation is exact in float32
};

double ValueAt(const Tensor& tensor, uint32_t index) {
  if (!tensor.present()) return 0;
  return ElementAsDouble(tensor, tensor.element_count() == 1 ? 0 : index);
}

bool FitsFloat32(double value) { return static_cast<double>(static_cast<float>(value)) == value; }

Tensor RunMatMul(const QuantizedMatMulOperation& op, std::vector<MatMulElement>* details) {
  Tensor out = Tensor::Allocate(op.output_data_type, op.output_sizes);
  const bool output_signed = op.output_data_type == DataType::kInt8;
  const double low = output_signed ? -128 : 0;
  const double high = output_signed ? 127 : 255;
  if (details != nullptr) details->assign(out.element_count(), MatMulElement{});
  for (uint32_t batch = 0; batch < op.batch; ++batch) {
    for (uint32_t channel = 0; channel < op.channel; ++channel) {
      const uint64_t a_slice =
          uint64_t{op.a_batch == 1 ? 0 : batch} * op.a_channel + (op.a_channel == 1 ? 0 : channel);
      const uint64_t b_slice =
          uint64_t{op.b_batch == 1 ? 0 : batch} * op.b_channel + (op.b_channel == 1 ? 0 : channel);
      const uint64_t out_slice = uint64_t{batch} * op.channel + channel;
      for (uint32_t m = 0; m < op.m; ++m) {
        for (uint32_t n = 0; n < op.n; ++n) {
          const int64_t za = static_cast<int64_t>(ValueAt(op.a_zero_point, m));
          const int64_t zb = static_cast<int64_t>(ValueAt(op.b_zero_point, n));
          int64_t acc = 0;
          for (uint32_t k = 0; k < op.k; ++k) {
            const int64_t a =
                static_cast<int64_t>(ElementBits(op.a, (a_slice * op.m + m) * op.k + k));
            const int64_t b =
                static_cast<int64_t>(ElementBits(op.b, (b_slice * op.k + k) * op.n + n));
            acc += (a - za) * (b - zb);
          }
          const double a_scale = ValueAt(op.a_scale, m);
          const double b_scale = ValueAt(op.b_scale, n);
          const double output_scale = ValueAt(op.output_scale, m);
          const double scale_product = a_scale * b_scale;  // exact: two floats
          const double multiplier = scale_product / output_scale;
          const double real = static_cast<double>(acc) * multiplier;
          const double zero_point = ValueAt(op.output_zero_point, m);
          double q = std::nearbyint(real) + zero_point;  // FE_TONEAREST: half to even
          q = std::min(std::max(q, low), high);
          const uint64_t index = (out_slice * op.m + m) * op.n + n;
          StoreBits(out, index, static_cast<uint64_t>(static_cast<int64_t>(q)));
          if (details != nullptr) {
            MatMulElement& e = (*details)[index];
            e.acc = acc;
            e.real = real;
            e.exact_float32 = FitsFloat32(scale_product) &&
                              std::fma(multiplier, output_scale, -scale_product) == 0 &&
                              FitsFloat32(multiplier) && FitsFloat32(static_cast<double>(acc)) &&
                              std::fma(static_cast<double>(acc), multiplier, -real) == 0 &&
                              FitsFloat32(real);
          }
        }
      }
    }
  }
  return out;
}

// Spacing of the type's representable values around |value|.
double UnitInLastPlace(DataType type, double value) {
  const bool half = type == DataType::kFloat16;
  const int mantissa_bits = half ? 10 : 23;
  const int min_exponent = half ? -14 : -126;
  const int max_exponent = half ? 15 : 127;
  const double magnitude = std::fabs(value);
  int exponent = magnitude > 0 ? std::ilogb(magnitude) : min_exponent;
  exponent = std::clamp(exponent, min_exponent, max_exponent);
  return std::ldexp(1.0, exponent - mantissa_bits);
}

// Magnitude from which round-to-nearest gives infinity.
double OverflowThreshold(DataType type) {
  return type == DataType::kFloat16 ? 65520.0 : std::ldexp(2.0 - std::ldexp(1.0, -24), 127);
}

std::string ElementText(const Tensor& tensor, uint64_t index) {
  return absl::StrCat(ElementAsDouble(tensor, index));
}

absl::Status CheckShape(const Tensor& expected, const Tensor& actual) {
  if (actual.data_type != expected.data_type) {
    return absl::InternalError(absl::StrCat("data type ", DataTypeName(actual.data_type),
                                            ", expected ", DataTypeName(expected.data_type)));
  }
  if (actual.sizes != expected.sizes) {
    return absl::InternalError(absl::StrCat("sizes ", ShapeToString(actual.sizes), ", expected ",
                                            ShapeToString(expected.sizes)));
  }
  if (actual.byte_size() != expected.byte_size()) {
    return absl::InternalError(
        absl::StrCat(actual.byte_size(), " bytes, expected ", expected.byte_size()));
  }
  return absl::OkStatus();
}

absl::Status MismatchError(uint64_t mismatches, const std::string& first) {
  return absl::InternalError(absl::StrCat(mismatches, " element(s) differ; first: ", first));
}

absl::Status CheckScan(const ScanOperation& op, const Tensor& actual) {
  std::vector<ScanElement> details;
  const Tensor expected = RunScan(op, &details);
  if (absl::Status status = CheckShape(expected, actual); !status.ok()) return status;
  const DataType type = op.input.data_type;
  const size_t size = DataTypeSize(type);
  uint64_t mismatches = 0;
  std::string first;
  for (uint64_t i = 0; i < expected.element_count(); ++i) {
    if (!IsFloat(type)) {
      if (std::memcmp(expected.data() + i * size, actual.data() + i * size, size) == 0) continue;
      if (mismatches++ == 0) {
        first = absl::StrCat("[", i, "] = ", ElementText(actual, i), ", expected ",
                             ElementText(expected, i), " (integers must match exactly)");
      }
      continue;
    }
    const ScanElement& e = details[i];
    const double got = ElementAsDouble(actual, i);
    // One unit in the last place for the final rounding, float32 rounding
    // per operation relative to the prefix, and an absolute float32
    // subnormal step per operation for products that underflow.
    const double allowed =
        UnitInLastPlace(type, e.exact) +
        static_cast<double>(e.count + 1) * (std::ldexp(e.magnitude, -24) + std::ldexp(1.0, -149));
    bool ok;
    if (std::isnan(got)) {
      ok = std::isnan(e.exact);
    } else if (std::isinf(got)) {
      ok = std::signbit(got) == std::signbit(e.exact) &&
           std::fabs(e.exact) + allowed >= OverflowThreshold(type);
    } else {
      ok = std::fabs(got - e.exact) <= allowed;
    }
    if (ok) continue;
    if (mismatches++ == 0) {
      first = absl::StrCat("[", i, "] = ", got, ", expected ", e.exact, " +- ", allowed, " (",
                           e.count, " elements, magnitude ", e.magnitude, ")");
    }
  }
  return mismatches == 0 ? absl::OkStatus() : MismatchError(mismatches, first);
}

absl::Status CheckMatMul(const QuantizedMatMulOperation& op, const Tensor& actual) {
  std::vector<MatMulElement> details;
  const Tensor expected = RunMatMul(op, &details);
  if (absl::Status status = CheckShape(expected, actual); !status.ok()) return status;
  uint64_t mismatches = 0;
  std::string first;
  for (uint64_t i = 0; i < expected.element_count(); ++i) {
    const double want = ElementAsDouble(expected, i);
    const double got = ElementAsDouble(actual, i);
    if (want == got) continue;
    const MatMulElement& e = details[i];
    const double tie = std::floor(e.real) + 0.5;
    const bool near_tie = std::fabs(e.real - tie) <= 1e-5 * std::fabs(e.real);
    if (near_tie && !e.exact_float32 && std::fabs(want - got) == 1) continue;
    if (mismatches++ == 0) {
      first = absl::StrCat("[", i, "] = ", got, ", expected ", want, " (accumulator ", e.acc,
                           ", unrounded ", e.real, near_tie ? ", near a tie" : "",
                           e.exact_float32 ? ", exact in float32" : "", ")");
    }
  }
  return mismatches == 0 ? absl::OkStatus() : MismatchError(mismatches, first);
}

std::string TensorText(const Tensor& tensor) {
  return absl::StrCat(DataTypeName(tensor.data_type), ShapeToString(tensor.sizes));
}

}  // namespace

double HalfToDouble(uint16_t half) {
  const int exponent = (half >> 10) & 0x1f;
  const int mantissa = half & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return (half & 0x8000) ? -magnitude : magnitude;
}

uint16_t DoubleToHalf(double value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  const double magnitude = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7e00;
  if (magnitude >= 65520.0) return sign | 0x7c00;  // rounds to infinity
  // Scale so that one unit is the half ulp at this magnitude, round half to
  // even on the integer, and rebuild.
  int exponent = magnitude > 0 ? std::ilogb(magnitude) : -15;
  if (exponent < -14) exponent = -14;  // subnormals share the smallest spacing
  const double units = std::nearbyint(std::ldexp(magnitude, 10 - exponent));
  // Rounding may carry into the next binade (units == 2048).
  const double rounded = std::ldexp(units, exponent - 10);
  if (rounded == 0) return sign;
  if (rounded < std::ldexp(1.0, -14)) {
    return sign | static_cast<uint16_t>(std::ldexp(rounded, 24));
  }
  const int e = std::ilogb(rounded);
  const int mantissa = static_cast<int>(std::ldexp(rounded, 10 - e)) - 1024;
  return sign | static_cast<uint16_t>(((e + 15) << 10) | mantissa);
}

double ElementAsDouble(const Tensor& tensor, uint64_t index) {
  switch (tensor.data_type) {
    case DataType::kFloat32: {
      float v;
      std::memcpy(&v, tensor.data() + index * 4, 4);
      return v;
    }
    case DataType::kFloat64: {
      double v;
      std::memcpy(&v, tensor.data() + index * 8, 8);
      return v;
    }
    case DataType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, tensor.data() + index * 2, 2);
      return HalfToDouble(v);
    }
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
      return static_cast<double>(static_cast<int64_t>(ElementBits(tensor, index)));
    default:
      return static_cast<double>(ElementBits(tensor, index));
  }
}

Tensor ComputeScan(const ScanOperation& op) { return RunScan(op, nullptr); }

Tensor ComputeQuantizedMatMul(const QuantizedMatMulOperation& op) { return RunMatMul(op, nullptr); }

Tensor Compute(const Operation& operation) {
  return std::visit(
      Overloaded{
          [](const ScanOperation& scan) { return ComputeScan(scan); },
          [](const QuantizedMatMulOperation& op) { return ComputeQuantizedMatMul(op); },
      },
      operation);
}

absl::Status CheckOutput(const Operation& operation, const Tensor& actual) {
  return std::visit(
      Overloaded{
          [&actual](const ScanOperation& scan) { return CheckScan(scan, actual); },
          [&actual](const QuantizedMatMulOperation& op) { return CheckMatMul(op, actual); },
      },
      operation);
}

absl::Status CheckExact(const Tensor& expected, const Tensor& actual) {
  if (absl::Status status = CheckShape(expected, actual); !status.ok()) return status;
  const size_t size = DataTypeSize(expected.data_type);
  uint64_t mismatches = 0;
  std::string first;
  for (uint64_t i = 0; i < expected.element_count(); ++i) {
    if (std::memcmp(expected.data() + i * size, actual.data() + i * size, size) == 0) continue;
    if (mismatches++ == 0) {
      first = absl::StrCat("[", i, "] = ", ElementText(actual, i), ", expected ",
                           ElementText(expected, i));
    }
  }
  return mismatches == 0 ? absl::OkStatus() : MismatchError(mismatches, first);
}

std::string Describe(const Operation& operation) {
  return std::visit(Overloaded{
                        [](const ScanOperation& scan) { return Describe(scan); },
                        [](const QuantizedMatMulOperation& op) { return Describe(op); },
                    },
                    operation);
}

std::string Describe(const ScanOperation& scan) {
  return absl::StrCat(OperatorName(scan.kind), " ", TensorText(scan.input), " axis=", scan.axis,
                      scan.direction == AxisDirection::kDecreasing ? " decreasing" : " increasing",
                      scan.exclusive ? " exclusive" : " inclusive");
}

std::string Describe(const QuantizedMatMulOperation& op) {
  auto optional = [](const Tensor& tensor) {
    return tensor.present() ? TensorText(tensor) : std::string("none");
  };
  return absl::StrCat(
      "quantized_linear_matrix_multiply a=", TensorText(op.a), " a_scale=", TensorText(op.a_scale),
      " a_zero_point=", optional(op.a_zero_point), " b=", TensorText(op.b),
      " b_scale=", TensorText(op.b_scale), " b_zero_point=", optional(op.b_zero_point),
      " output_scale=", TensorText(op.output_scale),
      " output_zero_point=", optional(op.output_zero_point),
      " output=", DataTypeName(op.output_data_type), ShapeToString(op.output_sizes));
}

void StoreBits(Tensor& tensor, uint64_t index, uint64_t bits) {
  const size_t size = DataTypeSize(tensor.data_type);
  uint8_t* p = tensor.mutable_data() + index * size;
  for (size_t i = 0; i < size; ++i) p[i] = static_cast<uint8_t>(bits >> (8 * i));
}

void StoreFloat(Tensor& tensor, uint64_t index, double value) {
  if (tensor.data_type == DataType::kFloat32) {
    const float f = static_cast<float>(value);
    std::memcpy(tensor.mutable_data() + index * 4, &f, 4);
  } else if (tensor.data_type == DataType::kFloat64) {
    std::memcpy(tensor.mutable_data() + index * 8, &value, 8);
  } else {
    StoreBits(tensor, index, DoubleToHalf(value));
  }
}

Tensor TensorFromValues(DataType type, const Shape& sizes, const std::vector<double>& values) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  // A test that gives the wrong number of values has a bug: stop rather than
  // compare against a half-filled tensor.
  if (values.size() != tensor.element_count()) std::abort();
  for (uint64_t i = 0; i < values.size(); ++i) {
    const double value = values[i];
    if (IsFloat(type) || type == DataType::kFloat64) {
      StoreFloat(tensor, i, value);
    } else {
      // Through int64 for negative values, so that they wrap to the type's
      // two's complement; directly for UINT64 values beyond 2^63.
      StoreBits(tensor, i,
                value < 0 ? static_cast<uint64_t>(static_cast<int64_t>(value))
                          : static_cast<uint64_t>(value));
    }
  }
  return tensor;
}

std::vector<double> TensorToValues(const Tensor& tensor) {
  std::vector<double> values(tensor.element_count());
  for (uint64_t i = 0; i < values.size(); ++i) values[i] = ElementAsDouble(tensor, i);
  return values;
}

}  // namespace dmlserve::reference

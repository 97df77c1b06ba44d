#include "bench/load_generator/workload.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cpp/request_builders.h"
#include "client/cpp/tensor_codec.h"

namespace dmlserve::load {
namespace {

using client::MakeTensor;

struct ScanLayout {
  uint64_t outer = 1;
  uint64_t length = 1;
  uint64_t inner = 1;
};

ScanLayout LayoutOf(const std::vector<uint32_t>& sizes, uint32_t axis) {
  ScanLayout layout;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (d < axis) layout.outer *= sizes[d];
    if (d == axis) layout.length = sizes[d];
    if (d > axis) layout.inner *= sizes[d];
  }
  return layout;
}

// The scan in T's own arithmetic (unsigned types wrap, as the spec says the
// hardware does), widened to double for comparison.
template <typename T>
std::vector<double> ReferenceScan(const std::vector<T>& input, const ScanLayout& layout,
                                  bool product, bool reverse, bool exclusive) {
  std::vector<double> output(input.size());
  for (uint64_t o = 0; o < layout.outer; ++o) {
    for (uint64_t i = 0; i < layout.inner; ++i) {
      T accumulator = product ? T(1) : T(0);
      for (uint64_t step = 0; step < layout.length; ++step) {
        const uint64_t a = reverse ? layout.length - 1 - step : step;
        const uint64_t index = (o * layout.length + a) * layout.inner + i;
        if (exclusive) output[index] = static_cast<double>(accumulator);
        accumulator = product ? static_cast<T>(accumulator * input[index])
                              : static_cast<T>(accumulator + input[index]);
        if (!exclusive) output[index] = static_cast<double>(accumulator);
      }
    }
  }
  return output;
}

PooledRequest MakeScanRequest(OperatorChoice op, const WorkloadOptions& options,
                              std::mt19937_64& rng) {
  const bool product = op == OperatorChoice::kCumprod;
  client::ScanOptions scan;
  scan.axis = options.scan_axis;
  if (options.mixed_scan_attributes) {
    scan.reverse = rng() & 1;
    scan.exclusive = rng() & 2;
  }
  uint64_t count = 1;
  for (uint32_t size : options.scan_sizes) count *= size;
  const ScanLayout layout = LayoutOf(options.scan_sizes, options.scan_axis);

  PooledRequest pooled;
  pooled.op = op;
  v1::Tensor input;
  switch (options.scan_type) {
    case v1::UINT32:
    case v1::INT32: {
      // Products of odd numbers never collapse to 0 modulo 2^32, so every
      // element of a long cumprod still depends on all before it.
      std::vector<uint32_t> values(count);
      for (uint32_t& value : values) value = static_cast<uint32_t>(rng()) | (product ? 1u : 0u);
      pooled.expected =
          ReferenceScan<uint32_t>(values, layout, product, scan.reverse, scan.exclusive);
      if (options.scan_type == v1::INT32) {
        std::vector<int32_t> signed_values(values.begin(), values.end());
        for (double& expected : pooled.expected) {
          expected = static_cast<int32_t>(static_cast<uint32_t>(expected));
        }
        input = MakeTensor<int32_t>(options.scan_sizes, signed_values);
      } else {
        input = MakeTensor<uint32_t>(options.scan_sizes, values);
      }
      break;
    }
    case v1::FLOAT32:
    case v1::FLOAT16: {
      // Near 1, so that sums and products stay finite over long lines.
      std::uniform_real_distribution<float> near_one(0.9f, 1.1f);
      std::vector<float> values(count);
      for (float& value : values) value = near_one(rng);
      if (options.scan_type == v1::FLOAT32) {
        input = MakeTensor<float>(options.scan_sizes, values);
        std::vector<double> wide(values.begin(), values.end());
        pooled.expected =
            ReferenceScan<double>(wide, layout, product, scan.reverse, scan.exclusive);
        pooled.tolerance = 1e-4;
        pooled.relative_tolerance = true;
      } else {
        input = client::MakeFloat16Tensor(options.scan_sizes, values);
      }
      break;
    }
    default: {
      // Sent as raw bytes, unchecked: a way to load other types.
      input.set_data_type(options.scan_type);
      input.mutable_sizes()->Add(options.scan_sizes.begin(), options.scan_sizes.end());
      std::string* data = input.mutable_data();
      data->resize(count * client::DataTypeByteSize(options.scan_type));
      for (char& byte : *data) byte = static_cast<char>(rng() % 3);
    }
  }
  pooled.request = product ? client::CumulativeProductRequest(input, scan)
                           : client::CumulativeSummationRequest(input, scan);
  return pooled;
}

double RoundHalfToEven(double value) {
  const double floor = std::floor(value);
  const double fraction = value - floor;
  if (fraction > 0.5) return floor + 1;
  if (fraction < 0.5) return floor;
  return std::fmod(floor, 2.0) == 0 ? floor : floor + 1;
}

// Inputs of the shared-B matrix multiply and its float64 reference.
struct MatMulData {
  std::vector<uint8_t> b;
  std::vector<float> b_scale;
  uint8_t b_zero_point = 128;
  // b - b_zero_point, row-major K x N: the reference's inner loop runs along
  // a row of it, so that it vectorizes as 16-bit products.
  std::vector<int16_t> b_centered;
};

// Rows [first, last) of the exact integer product (A - a_zero_point) x
// (B - b_zero_point), requantized as the spec says, into `expected`. The
// accumulator is Accumulator-wide: int32 holds K products of |A - z| <= 138
// and |B - z| <= 255 up to K = 61,000; int64 beyond.
template <typename Accumulator>
void ReferenceRows(const std::vector<int8_t>& a, int8_t a_zero_point, float a_scale,
                   float output_scale, const MatMulData& shared, uint32_t k, uint32_t n,
                   uint32_t first, uint32_t last, std::vector<double>& expected) {
  std::vector<Accumulator> row_sums(n);
  for (uint32_t row = first; row < last; ++row) {
    std::fill(row_sums.begin(), row_sums.end(), Accumulator{0});
    for (uint32_t i = 0; i < k; ++i) {
      const Accumulator a_value = static_cast<Accumulator>(a[size_t{row} * k + i]) - a_zero_point;
      const int16_t* b_row = shared.b_centered.data() + size_t{i} * n;
      for (uint32_t column = 0; column < n; ++column) {
        row_sums[column] += a_value * static_cast<Accumulator>(b_row[column]);
      }
    }
    for (uint32_t column = 0; column < n; ++column) {
      const double scaled =
          static_cast<double>(row_sums[column]) * a_scale * shared.b_scale[column] / output_scale;
      expected[size_t{row} * n + column] =
          std::min(127.0, std::max(-128.0, RoundHalfToEven(scaled)));
    }
  }
}

// The whole reference product, its rows split over the machine's cores: a
// pool of 4096^3 products is checked on every answer, and a single-threaded
// reference would take minutes to build it.
std::vector<double> ReferenceMatMul(const std::vector<int8_t>& a, int8_t a_zero_point,
                                    float a_scale, float output_scale, const MatMulData& shared,
                                    uint32_t m, uint32_t k, uint32_t n) {
  std::vector<double> expected(size_t{m} * n);
  const uint64_t work = uint64_t{m} * k * n;
  const uint32_t threads = static_cast<uint32_t>(std::clamp<uint64_t>(
      std::min<uint64_t>(std::max(1u, std::thread::hardware_concurrency()), work >> 24), 1, m));
  std::vector<std::thread> workers;
  for (uint32_t t = 0; t < threads; ++t) {
    const uint32_t first = static_cast<uint32_t>(uint64_t{m} * t / threads);
    const uint32_t last = static_cast<uint32_t>(uint64_t{m} * (t + 1) / threads);
    auto rows = [&, first, last] {
      if (k <= 61000) {
        ReferenceRows<int32_t>(a, a_zero_point, a_scale, output_scale, shared, k, n, first, last,
                               expected);
      } else {
        ReferenceRows<int64_t>(a, a_zero_point, a_scale, output_scale, shared, k, n, first, last,
                               expected);
      }
    };
    if (t + 1 == threads) {
      rows();
    } else {
      workers.emplace_back(rows);
    }
  }
  for (std::thread& worker : workers) worker.join();
  return expected;
}

PooledRequest MakeMatMulRequest(const WorkloadOptions& options, const MatMulData& shared,
                                const v1::Tensor& b, const v1::Tensor& b_scale,
                                std::mt19937_64& rng) {
  const uint32_t m = options.m, k = options.k, n = options.n;
  std::vector<int8_t> a(static_cast<size_t>(m) * k);
  for (int8_t& value : a) value = static_cast<int8_t>(rng());
  const int8_t a_zero_point = static_cast<int8_t>(static_cast<int>(rng() % 21) - 10);
  const float a_scale = 0.02f;
  // About 40 output steps per standard deviation of the accumulator
  // (elements spread as uniform bytes, about 74 each), so outputs use the
  // int8 range with some saturation.
  double mean_b_scale = 0;
  for (float scale : shared.b_scale) mean_b_scale += scale;
  mean_b_scale /= n;
  const float output_scale =
      static_cast<float>(a_scale * mean_b_scale * std::sqrt(static_cast<double>(k)) * 74 * 74 / 40);

  client::QuantizedMatMulInputs inputs;
  inputs.a = MakeTensor<int8_t>({m, k}, a);
  inputs.a_scale = MakeTensor<float>({1, 1, 1, 1}, {a_scale});
  inputs.a_zero_point = MakeTensor<int8_t>({1, 1, 1, 1}, {a_zero_point});
  inputs.b = b;
  inputs.b_scale = b_scale;
  inputs.b_zero_point = MakeTensor<uint8_t>({1, 1, 1, 1}, {shared.b_zero_point});
  inputs.output_scale = MakeTensor<float>({1, 1, 1, 1}, {output_scale});
  inputs.output_zero_point = MakeTensor<int8_t>({1, 1, 1, 1}, {0});

  PooledRequest pooled;
  pooled.op = OperatorChoice::kQMatMul;
  pooled.request = client::QuantizedLinearMatrixMultiplyRequest(inputs);
  pooled.expected = ReferenceMatMul(a, a_zero_point, a_scale, output_scale, shared, m, k, n);
  // The server may requantize in float32: a near-tie may round either way.
  pooled.tolerance = 1;
  pooled.expected_int8.resize(pooled.expected.size());
  for (size_t i = 0; i < pooled.expected.size(); ++i) {
    pooled.expected_int8[i] = static_cast<char>(static_cast<int8_t>(pooled.expected[i]));
  }
  return pooled;
}

}  // namespace

const char* OperatorChoiceName(OperatorChoice choice) {
  switch (choice) {
    case OperatorChoice::kCumsum:
      return "cumsum";
    case OperatorChoice::kCumprod:
      return "cumprod";
    case OperatorChoice::kQMatMul:
      return "qmatmul";
  }
  return "?";
}

absl::StatusOr<Workload> Workload::Create(const WorkloadOptions& options) {
  if (options.cumsum_weight < 0 || options.cumprod_weight < 0 || options.qmatmul_weight < 0 ||
      options.cumsum_weight + options.cumprod_weight + options.qmatmul_weight == 0) {
    return absl::InvalidArgumentError("the operator mix needs a positive weight");
  }
  if (options.scan_axis >= options.scan_sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("scan axis ", options.scan_axis,
                                                   " is out of range for sizes [",
                                                   absl::StrJoin(options.scan_sizes, ","), "]"));
  }
  if (options.m == 0 || options.k == 0 || options.n == 0 || options.pool_size <= 0) {
    return absl::InvalidArgumentError("matrix sizes and the pool size must be positive");
  }
  Workload workload;
  workload.weights_[0] = options.cumsum_weight;
  workload.weights_[1] = options.cumprod_weight;
  workload.weights_[2] = options.qmatmul_weight;
  std::mt19937_64 rng(options.seed);

  MatMulData shared;
  if (options.qmatmul_weight > 0) {
    shared.b.resize(static_cast<size_t>(options.k) * options.n);
    for (uint8_t& value : shared.b) value = static_cast<uint8_t>(rng());
    std::uniform_real_distribution<float> scales(0.005f, 0.01f);
    shared.b_scale.resize(options.n);
    for (float& scale : shared.b_scale) scale = scales(rng);
    shared.b_centered.assign(shared.b.begin(), shared.b.end());
    for (int16_t& value : shared.b_centered) value -= shared.b_zero_point;
  }
  v1::Tensor b = MakeTensor<uint8_t>({options.k, options.n}, shared.b);
  v1::Tensor b_scale = MakeTensor<float>({1, 1, 1, options.n}, shared.b_scale);
  if (options.qmatmul_weight > 0 && !options.registered_b_id.empty()) {
    const std::string scale_id = absl::StrCat(options.registered_b_id, "-scale");
    workload.registrations_.emplace_back(options.registered_b_id, std::move(b));
    workload.registrations_.emplace_back(scale_id, std::move(b_scale));
    b = client::MakeTensorReference(options.registered_b_id);
    b_scale = client::MakeTensorReference(scale_id);
  }
  for (int i = 0; i < options.pool_size; ++i) {
    if (options.cumsum_weight > 0) {
      workload.pools_[0].push_back(MakeScanRequest(OperatorChoice::kCumsum, options, rng));
    }
    if (options.cumprod_weight > 0) {
      workload.pools_[1].push_back(MakeScanRequest(OperatorChoice::kCumprod, options, rng));
    }
    if (options.qmatmul_weight > 0) {
      workload.pools_[2].push_back(MakeMatMulRequest(options, shared, b, b_scale, rng));
    }
  }
  return workload;
}

std::vector<const PooledRequest*> Workload::All() const {
  std::vector<const PooledRequest*> all;
  for (const std::vector<PooledRequest>& pool : pools_) {
    for (const PooledRequest& request : pool) all.push_back(&request);
  }
  return all;
}

const PooledRequest& Workload::Pick(std::mt19937_64& rng) const {
  int draw = static_cast<int>(rng() % (weights_[0] + weights_[1] + weights_[2]));
  int op = 0;
  while (draw >= weights_[op]) draw -= weights_[op++];
  const std::vector<PooledRequest>& pool = pools_[op];
  return pool[rng() % pool.size()];
}

namespace {

// Element i of an 8-bit output, as Check compares it.
template <typename T>
double ByteElement(const std::string& data, size_t i) {
  return static_cast<T>(data[i]);
}

// Checks an 8-bit output in one pass over its bytes, without decoding it to a
// vector first: the quantized matrix multiply's answers are checked on every
// response (--verify_every=1), and the checker's CPU is taken from the same
// two cores the server runs on.
template <typename T>
absl::Status CheckBytes(const PooledRequest& request, const std::string& data) {
  if (data.size() != request.expected.size()) {
    return absl::DataLossError(
        absl::StrCat("output has ", data.size(), " elements, expected ", request.expected.size()));
  }
  for (size_t i = 0; i < data.size(); ++i) {
    const double value = ByteElement<T>(data, i);
    if (!(std::abs(value - request.expected[i]) <= request.tolerance)) {
      return absl::DataLossError(
          absl::StrCat("element ", i, " is ", value, ", expected ", request.expected[i]));
    }
  }
  return absl::OkStatus();
}

// Whether every int8 of `data` is within `tolerance` of `expected`'s: one
// branch-free pass the compiler vectorizes.
bool WithinBytes(const std::string& expected, const std::string& data, double tolerance) {
  if (data.size() != expected.size()) return false;
  const auto* x = reinterpret_cast<const int8_t*>(data.data());
  const auto* y = reinterpret_cast<const int8_t*>(expected.data());
  int worst = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    const int difference = int{x[i]} - int{y[i]};
    worst = std::max(worst, difference < 0 ? -difference : difference);
  }
  return worst <= tolerance;
}

}  // namespace

absl::Status Workload::Check(const PooledRequest& request, const v1::Tensor& output) {
  if (request.expected.empty()) return absl::OkStatus();
  uint64_t elements = 1;
  for (const uint32_t size : output.sizes()) elements *= size;
  if (!request.relative_tolerance && elements == request.expected.size() &&
      output.data().size() == request.expected.size()) {
    if (output.data_type() == v1::INT8 && !request.expected_int8.empty() &&
        WithinBytes(request.expected_int8, output.data(), request.tolerance)) {
      return absl::OkStatus();
    }
    // Otherwise (or to name the wrong element), element by element.
    if (output.data_type() == v1::INT8) return CheckBytes<int8_t>(request, output.data());
    if (output.data_type() == v1::UINT8) return CheckBytes<uint8_t>(request, output.data());
  }
  absl::StatusOr<std::vector<double>> values = client::DecodeTensorAsDouble(output);
  if (!values.ok()) return values.status();
  if (values->size() != request.expected.size()) {
    return absl::DataLossError(absl::StrCat("output has ", values->size(), " elements, expected ",
                                            request.expected.size()));
  }
  for (size_t i = 0; i < values->size(); ++i) {
    const double expected = request.expected[i];
    const double allowed = request.relative_tolerance
                               ? request.tolerance * std::max(1.0, std::abs(expected))
                               : request.tolerance;
    if (!(std::abs((*values)[i] - expected) <= allowed)) {
      return absl::DataLossError(
          absl::StrCat("element ", i, " is ", (*values)[i], ", expected ", expected));
    }
  }
  return absl::OkStatus();
}

}  // namespace dmlserve::load

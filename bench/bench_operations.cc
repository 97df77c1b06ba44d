#include "bench/bench_operations.h"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dmlserve::bench {
namespace {

std::mt19937_64& Rng() {
  static std::mt19937_64 rng(42);
  return rng;
}

uint16_t HalfOf(float value) {
  // Values here are in [0.5, 2): normal halves, so truncating the mantissa is
  // enough for benchmark data.
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint32_t exponent = ((bits >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(((bits >> 16) & 0x8000) | (exponent << 10) | ((bits >> 13) & 0x3ff));
}

Tensor RandomTensor(DataType type, const Shape& sizes) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  std::uniform_real_distribution<float> near_one(0.9f, 1.1f);
  const uint64_t count = tensor.element_count();
  if (type == DataType::kFloat32) {
    for (uint64_t i = 0; i < count; ++i) tensor.mutable_data_as<float>()[i] = near_one(Rng());
  } else if (type == DataType::kFloat16) {
    for (uint64_t i = 0; i < count; ++i) {
      tensor.mutable_data_as<uint16_t>()[i] = HalfOf(near_one(Rng()));
    }
  } else {
    // Integers: uniform bytes, 8 per draw (a 256 MiB weight in a fraction
    // of a second).
    const uint64_t size = count * DataTypeSize(type);
    for (uint64_t i = 0; i < size; i += 8) {
      const uint64_t bits = Rng()();
      std::memcpy(tensor.mutable_data() + i, &bits, std::min<uint64_t>(8, size - i));
    }
  }
  return tensor;
}

Tensor Floats(const Shape& sizes, float low, float high) {
  Tensor tensor = Tensor::Allocate(DataType::kFloat32, sizes);
  std::uniform_real_distribution<float> values(low, high);
  for (uint64_t i = 0; i < tensor.element_count(); ++i) {
    tensor.mutable_data_as<float>()[i] = values(Rng());
  }
  return tensor;
}

template <typename T>
T Check(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::fprintf(stderr, "benchmark operation is invalid: %s\n", value.status().ToString().c_str());
    std::abort();
  }
  return *std::move(value);
}

}  // namespace

Operation MakeScan(OperatorKind kind, DataType type, const Shape& sizes, uint32_t axis,
                   AxisDirection direction, bool exclusive) {
  return Check(MakeScanOperation(kind, RandomTensor(type, sizes), axis, direction, exclusive));
}

std::vector<Operation> MakeMatMulsSharingB(int count, uint32_t m, uint32_t k, uint32_t n,
                                           const std::string& registered_id,
                                           bool per_column_b_zero_point) {
  Tensor b = RandomTensor(DataType::kUint8, {k, n});
  b.set_registered_id(registered_id);
  const Tensor b_scale = Floats({1, 1, 1, n}, 0.005f, 0.01f);
  const Tensor b_zero_point =
      per_column_b_zero_point ? RandomTensor(DataType::kUint8, {1, 1, 1, n}) : Tensor();
  std::vector<Operation> operations;
  for (int i = 0; i < count; ++i) {
    QuantizedMatMulTensors t;
    t.a = RandomTensor(DataType::kInt8, {m, k});
    t.a_scale = Floats({1, 1, m, 1}, 0.01f, 0.02f);
    t.a_zero_point = RandomTensor(DataType::kInt8, {1, 1, m, 1});
    t.b = b;
    t.b_scale = b_scale;
    if (b_zero_point.present()) {
      t.b_zero_point = Tensor::Allocate(b_zero_point.data_type, b_zero_point.sizes);
      std::memcpy(t.b_zero_point.mutable_data(), b_zero_point.data(), b_zero_point.byte_size());
    }
    t.output_scale = Floats({1, 1, 1, 1}, 0.5f, 1.0f);
    operations.push_back(Check(MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8)));
  }
  return operations;
}

namespace {

Tensor Filled(DataType type, const Shape& sizes, int value) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  std::memset(tensor.mutable_data(), value, tensor.byte_size());
  return tensor;
}

}  // namespace

namespace {

long MinorPageFaults() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// A "Vm...:   123 kB" line of /proc/self/status, in MiB (0 if absent).
double ProcStatusMib(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(status, line)) {
    if (line.rfind(prefix, 0) == 0) return std::atof(line.c_str() + prefix.size()) / 1024.0;
  }
  return 0;
}

}  // namespace

MemoryProbe::MemoryProbe() {
  std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to VmRSS
  resident_mib_ = ProcStatusMib("VmRSS");
  faults_ = MinorPageFaults();
}

void MemoryProbe::Report(benchmark::State& state) const {
  state.counters["faults/iter"] = benchmark::Counter(
      static_cast<double>(MinorPageFaults() - faults_), benchmark::Counter::kAvgIterations);
  state.counters["peak_extra_MiB"] = ProcStatusMib("VmHWM") - resident_mib_;
}

Operation MakeQGemm(const QGemmCase& c) {
  QuantizedMatMulTensors t;
  const bool batched = c.a_batch != 1 || c.b_channel != 1;
  t.a = RandomTensor(c.a_type, batched ? Shape{c.a_batch, 1, c.m, c.k} : Shape{c.m, c.k});
  t.a_scale = Floats({1, 1, 1, 1}, 0.02f, 0.02f);
  t.a_zero_point = Filled(c.a_type, {1, 1, 1, 1}, c.a_type == DataType::kInt8 ? 3 : 128);
  t.b = RandomTensor(c.b_type, batched ? Shape{1, c.b_channel, c.k, c.n} : Shape{c.k, c.n});
  if (c.seven_bit_b) {
    const int shift = c.b_type == DataType::kUint8 ? 128 : 0;
    for (uint64_t i = 0; i < t.b.byte_size(); ++i) {
      t.b.mutable_data()[i] =
          static_cast<uint8_t>((static_cast<int8_t>(t.b.data()[i]) >> 1) + shift);
    }
  }
  const Shape b_quantization = c.per_column ? Shape{1, 1, 1, c.n} : Shape{1, 1, 1, 1};
  t.b_scale = Floats(b_quantization, 0.005f, 0.01f);
  t.b_zero_point = Filled(c.b_type, b_quantization, 1);
  if (c.registered_b) {
    t.b.set_registered_id(kQGemmRegisteredIds[0]);
    if (c.per_column) {
      t.b_scale.set_registered_id(kQGemmRegisteredIds[1]);
      t.b_zero_point.set_registered_id(kQGemmRegisteredIds[2]);
    }
  }
  // Random operands give |acc| around 128 * 128 * sqrt(K / 3): an output
  // scale that maps that to ~50 output steps keeps outputs spread out.
  const float typical = 0.02f * 0.0075f * 16384.0f * std::sqrt(c.k / 3.0f);
  t.output_scale = Floats({1, 1, 1, 1}, typical / 50, typical / 50);
  t.output_zero_point = Filled(c.output_type, {1, 1, 1, 1}, 0);
  return Check(MakeQuantizedMatMulOperation(std::move(t), c.output_type));
}

void RunBatches(benchmark::State& state, Device& device, const std::vector<Operation>& operations,
                double multiply_adds) {
  uint64_t bytes = 0;
  for (const Operation& operation : operations) bytes += OperationBytes(operation);
  std::vector<WorkItem> items(operations.size());
  for (auto _ : state) {
    for (size_t i = 0; i < operations.size(); ++i) items[i] = WorkItem{&operations[i], {}, {}};
    const absl::Status status = device.Execute(absl::MakeSpan(items));
    if (!status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      break;
    }
    benchmark::DoNotOptimize(items.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * operations.size()));
  if (multiply_adds > 0) {
    state.counters["MAC/s"] = benchmark::Counter(
        multiply_adds * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  }
}

}  // namespace dmlserve::bench

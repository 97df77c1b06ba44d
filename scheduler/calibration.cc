#include "scheduler/calibration.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dmlserve {
namespace {

Tensor Filled(DataType type, const Shape& sizes, int8_t value) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  std::memset(tensor.mutable_data(), value, tensor.byte_size());
  return tensor;
}

Tensor OneFloat(float value) {
  Tensor tensor = Tensor::Allocate(DataType::kFloat32, {1});
  std::memcpy(tensor.mutable_data(), &value, sizeof(value));
  return tensor;
}

absl::StatusOr<Operation> Scan(OperatorKind kind, uint32_t elements) {
  // Ones: a product that stays finite, a sum that stays exact.
  Tensor input = Tensor::Allocate(DataType::kFloat32, {1, elements});
  std::vector<float> ones(elements, 1.0f);
  std::memcpy(input.mutable_data(), ones.data(), elements * sizeof(float));
  absl::StatusOr<ScanOperation> scan =
      MakeScanOperation(kind, std::move(input), 1, AxisDirection::kIncreasing, false);
  if (!scan.ok()) return scan.status();
  return Operation(*std::move(scan));
}

absl::StatusOr<Operation> MatMul(uint32_t m, uint32_t k, uint32_t n) {
  QuantizedMatMulTensors tensors;
  tensors.a = Filled(DataType::kInt8, {m, k}, 1);
  tensors.a_scale = OneFloat(1.0f);
  tensors.b = Filled(DataType::kInt8, {k, n}, 1);
  tensors.b_scale = OneFloat(1.0f);
  tensors.output_scale = OneFloat(1024.0f);
  absl::StatusOr<QuantizedMatMulOperation> matmul =
      MakeQuantizedMatMulOperation(std::move(tensors), DataType::kInt8);
  if (!matmul.ok()) return matmul.status();
  return Operation(*std::move(matmul));
}

// The faster of two runs after a warm-up, in seconds.
absl::StatusOr<double> Time(Device& device, const Operation& operation) {
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    WorkItem item;
    item.operation = &operation;
    const absl::Time start = absl::Now();
    absl::Status status = device.Execute(absl::MakeSpan(&item, 1));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    if (status.ok()) status = item.status;
    if (!status.ok()) return status;
    if (run == 1 || (run == 2 && seconds < best)) best = seconds;
  }
  return best;
}

}  // namespace

absl::Status Calibrate(Device& device, CostModel& model) {
  for (int i = 0; i < kOperatorKindCount; ++i) {
    const auto kind = static_cast<OperatorKind>(i);
    if (!device.Supports(kind)) continue;
    const bool matmul = kind == OperatorKind::kQuantizedLinearMatrixMultiply;
    absl::StatusOr<Operation> small = matmul ? MatMul(1, 64, 64) : Scan(kind, 256);
    absl::StatusOr<Operation> large = matmul ? MatMul(64, 512, 512) : Scan(kind, 1u << 18);
    if (!small.ok()) return small.status();
    if (!large.ok()) return large.status();
    absl::StatusOr<double> small_seconds = Time(device, *small);
    absl::StatusOr<double> large_seconds =
        small_seconds.ok() ? Time(device, *large) : small_seconds;
    if (!large_seconds.ok()) {
      return absl::Status(large_seconds.status().code(),
                          absl::StrCat("calibrating ", device.description().name, " on ",
                                       OperatorName(kind), ": ", large_seconds.status().message()));
    }
    const double small_units = JobWorkUnits(*small) + SharedWorkUnits(*small);
    const double large_units = JobWorkUnits(*large) + SharedWorkUnits(*large);
    const double rate =
        std::max(0.0, (*large_seconds - *small_seconds) / (large_units - small_units));
    model.Seed(kind, std::max(0.0, *small_seconds - rate * small_units), rate);
  }
  return absl::OkStatus();
}

void CalibratePool(DevicePool& pool) {
  if (pool.placement() != Placement::kCost || pool.size() < 2) return;
  for (size_t i = 0; i < pool.size(); ++i) {
    DevicePool::Slot& slot = pool.at(i);
    if (absl::Status calibrated = Calibrate(*slot.device, slot.cost); !calibrated.ok()) {
      pool.MarkFailed(slot, calibrated);
    }
  }
}

}  // namespace dmlserve

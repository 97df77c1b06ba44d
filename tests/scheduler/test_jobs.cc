#include "tests/scheduler/test_jobs.h"

#include <cstdlib>
#include <variant>

namespace dmlserve::testing {

Operation ScanOf(DataType type, Shape sizes, float first, uint32_t axis, OperatorKind kind,
                 AxisDirection direction, bool exclusive) {
  Tensor input = Tensor::Allocate(type, sizes);
  const uint64_t count = input.element_count();
  for (uint64_t i = 0; i < count; ++i) {
    if (type == DataType::kFloat32) {
      input.mutable_data_as<float>()[i] = first + static_cast<float>(i);
    } else if (type == DataType::kInt32) {
      input.mutable_data_as<int32_t>()[i] = static_cast<int32_t>(first) + static_cast<int32_t>(i);
    } else {
      std::abort();
    }
  }
  absl::StatusOr<ScanOperation> scan =
      MakeScanOperation(kind, std::move(input), axis, direction, exclusive);
  if (!scan.ok()) std::abort();
  return *std::move(scan);
}

float TagOf(const Operation& operation) {
  const Tensor& input = std::get<ScanOperation>(operation).input;
  if (input.data_type == DataType::kFloat32) return input.data_as<float>()[0];
  return static_cast<float>(input.data_as<int32_t>()[0]);
}

Tensor WeightB(int8_t first, std::string registered_id) {
  std::vector<int8_t> values;
  for (int i = 0; i < 6; ++i) values.push_back(static_cast<int8_t>(first + i));
  Tensor b = MakeTensor(DataType::kInt8, {3, 2}, values);
  b.set_registered_id(std::move(registered_id));
  return b;
}

Tensor Scale(float value) { return Float32({1, 1, 1, 1}, {value}); }

Operation MatMulOf(Tensor b, Tensor b_scale, Tensor b_zero_point, uint32_t m) {
  std::vector<int8_t> a_values(m * 3);
  for (size_t i = 0; i < a_values.size(); ++i) a_values[i] = static_cast<int8_t>(i);
  QuantizedMatMulTensors tensors;
  tensors.a = MakeTensor(DataType::kInt8, {m, 3}, a_values);
  tensors.a_scale = Scale(0.5f);
  tensors.b = std::move(b);
  tensors.b_scale = std::move(b_scale);
  tensors.b_zero_point = std::move(b_zero_point);
  tensors.output_scale = Scale(1.0f);
  absl::StatusOr<QuantizedMatMulOperation> matmul =
      MakeQuantizedMatMulOperation(std::move(tensors), DataType::kInt8);
  if (!matmul.ok()) std::abort();
  return *std::move(matmul);
}

std::shared_ptr<Submitted> NewJob(Operation operation, absl::Time deadline) {
  auto submitted = std::make_shared<Submitted>();
  submitted->operation = operation;
  submitted->job->operation = std::move(operation);
  submitted->job->deadline = deadline;
  // Weak: Submitted owns the job, and so the callback.
  submitted->job->done = [weak = std::weak_ptr<Submitted>(submitted)](JobResult result) {
    if (std::shared_ptr<Submitted> submitted = weak.lock()) {
      submitted->result = std::move(result);
      submitted->finished.Notify();
    }
  };
  return submitted;
}

}  // namespace dmlserve::testing

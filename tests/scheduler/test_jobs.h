#ifndef DMLSERVE_TESTS_SCHEDULER_TEST_JOBS_H_
#define DMLSERVE_TESTS_SCHEDULER_TEST_JOBS_H_

// Building operations and jobs for scheduler tests.

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "scheduler/job.h"

namespace dmlserve::testing {

template <typename T>
Tensor MakeTensor(DataType type, Shape sizes, const std::vector<T>& values) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  std::memcpy(tensor.mutable_data(), values.data(), values.size() * sizeof(T));
  return tensor;
}

inline Tensor Float32(Shape sizes, const std::vector<float>& values) {
  return MakeTensor(DataType::kFloat32, std::move(sizes), values);
}

// A scan whose input counts up from `first` (the first element tags the job).
Operation ScanOf(DataType type, Shape sizes, float first, uint32_t axis = 0,
                 OperatorKind kind = OperatorKind::kCumulativeSummation,
                 AxisDirection direction = AxisDirection::kIncreasing, bool exclusive = false);

// The first input element of a scan made by ScanOf.
float TagOf(const Operation& operation);

// An INT8 x INT8 -> INT8 multiply of a {m, 3} A by `b` ({3, 2} INT8) with a
// per-tensor `b_scale`.
Operation MatMulOf(Tensor b, Tensor b_scale, Tensor b_zero_point = Tensor(), uint32_t m = 2);
Tensor WeightB(int8_t first, std::string registered_id = "");
Tensor Scale(float value);

// A job and what became of it.
struct Submitted {
  std::shared_ptr<Job> job = std::make_shared<Job>();
  // What was submitted: the job's own operation is released once it ran.
  Operation operation;
  absl::Notification finished;
  JobResult result;

  // Guards against a hang, not a timing assertion.
  bool Await() { return finished.WaitForNotificationWithTimeout(absl::Seconds(60)); }
};

std::shared_ptr<Submitted> NewJob(Operation operation,
                                  absl::Time deadline = absl::InfiniteFuture());

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SCHEDULER_TEST_JOBS_H_

#include "scheduler/cost_model.h"

#include <algorithm>
#include <cmath>
#include <variant>

namespace dmlserve {

double JobWorkUnits(const Operation& operation) {
  if (const auto* scan = std::get_if<ScanOperation>(&operation)) {
    return static_cast<double>(scan->outer) * scan->axis_size * scan->inner;
  }
  if (const auto* matmul = std::get_if<QuantizedMatMulOperation>(&operation)) {
    return static_cast<double>(matmul->batch) * matmul->channel * matmul->m * matmul->n * matmul->k;
  }
  // An operator this model has no measure for yet: its bytes, which scale
  // with its work for any elementwise or streaming operator.
  return static_cast<double>(OperationBytes(operation));
}

double BatchWorkUnits(const Batch& batch) {
  if (batch.jobs.empty()) return 0;
  double units = SharedWorkUnits(batch.jobs.front()->operation);
  for (const auto& job : batch.jobs) units += JobWorkUnits(job->operation);
  return units;
}

double SharedWorkUnits(const Operation& operation) {
  const auto* matmul = std::get_if<QuantizedMatMulOperation>(&operation);
  return matmul == nullptr ? 0.0 : static_cast<double>(matmul->b.byte_size());
}

void CostModel::Seed(OperatorKind kind, double fixed_seconds, double seconds_per_unit) {
  CostLine& seed = seeds_[Index(kind)];
  seed.fixed_seconds = std::max(0.0, fixed_seconds);
  seed.seconds_per_unit = std::max(0.0, seconds_per_unit);
  CostLine& line = lines_[Index(kind)];
  line.fixed_seconds = seed.fixed_seconds;
  line.seconds_per_unit = seed.seconds_per_unit;
}

CostLine CostModel::LineAt(OperatorKind kind, absl::Time now) const {
  CostLine line = lines_[Index(kind)];
  if (line.observations == 0 || now <= line.last_observed) return line;
  const CostLine& seed = seeds_[Index(kind)];
  const double kept = std::exp2(-absl::FDivDuration(now - line.last_observed, kFadeHalfLife));
  line.fixed_seconds = seed.fixed_seconds + kept * (line.fixed_seconds - seed.fixed_seconds);
  line.seconds_per_unit =
      seed.seconds_per_unit + kept * (line.seconds_per_unit - seed.seconds_per_unit);
  return line;
}

void CostModel::Observe(OperatorKind kind, double units, absl::Duration took, absl::Time at) {
  // Learning starts from what the line has faded to by now.
  CostLine& line = lines_[Index(kind)];
  line = LineAt(kind, at);
  const double seconds = absl::ToDoubleSeconds(took);
  const double variable = line.seconds_per_unit * units;
  const double estimate = line.fixed_seconds + variable;
  ++line.observations;
  line.last_observed = at;
  if (estimate <= 0) {
    // Nothing known yet: all of it is the fixed cost until sizes differ.
    line.fixed_seconds = seconds;
    return;
  }
  const double step = kLearningRate * (seconds - estimate);
  // The error is shared in proportion to each part's share of the estimate,
  // so a device twice as slow becomes twice as slow in both.
  line.fixed_seconds = std::max(0.0, line.fixed_seconds + step * (line.fixed_seconds / estimate));
  if (units > 0) {
    line.seconds_per_unit =
        std::max(0.0, line.seconds_per_unit + step * (variable / estimate) / units);
  }
}

}  // namespace dmlserve

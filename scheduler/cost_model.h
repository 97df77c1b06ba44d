#ifndef DMLSERVE_SCHEDULER_COST_MODEL_H_
#define DMLSERVE_SCHEDULER_COST_MODEL_H_

// What a batch costs on one device: per operator, a fixed cost per batch
// plus a rate per unit of work, seeded by a calibration at start-up
// (calibration.h) and learned online from every batch the device runs.
//
// Units of work (JobWorkUnits, SharedWorkUnits): a scan's elements; a matrix
// multiply's MACs plus the bytes of B it streams once per batch (a lone GEMV
// row is bound by B's bytes, a 256-row product by its MACs; both show up in
// one linear model); any other operator's bytes (OperationBytes).
//
// Learning: each measured batch moves the estimate toward what it took, by
// kLearningRate of the error, shared between the fixed cost and the rate in
// proportion to their parts of the estimate. A device that slows down (a
// thermal limit, a neighbour on the GPU) thus loses work within a few
// batches, and the split between fixed cost and rate that calibration found
// stays as it was where the observed sizes cannot tell them apart (a steady
// load of one size).
//
// Forgetting: a device that lost its work is no longer measured, so what it
// learned while slow would keep it out for good once it is fast again. The
// learned line therefore fades back toward the calibrated one as it ages
// (half of the difference every kFadeHalfLife without a batch): a recovered
// device gets work again, and one still slow is measured once and learned
// again.
//
// Confidence: an estimate is *confirmed* while a batch measured it within
// the last kConfirmedFor. A calibration alone does not confirm it: measured
// on an idle machine, lavapipe's took 100x its estimate under a load that
// kept the CPU busy. DevicePool therefore places one batch at a
// time on an unconfirmed estimate (a trial, device_pool.h). Not thread-safe:
// DevicePool guards it.

#include <array>
#include <cstdint>

#include "absl/time/time.h"
#include "kernels/core/operation.h"
#include "scheduler/batch.h"

namespace dmlserve {

// Units of work of one job (see above), without B's bytes.
double JobWorkUnits(const Operation& operation);
// Units of work of B, read once per batch (0 for scans).
double SharedWorkUnits(const Operation& operation);
// A batch's: its operands shared once, plus each job's own.
double BatchWorkUnits(const Batch& batch);

struct CostLine {
  double fixed_seconds = 0;     // per batch
  double seconds_per_unit = 0;  // per unit of work
  uint64_t observations = 0;    // batches learned from (calibration excluded)
  absl::Time last_observed = absl::InfinitePast();

  double Estimate(double units) const { return fixed_seconds + seconds_per_unit * units; }
};

class CostModel {
 public:
  static constexpr double kLearningRate = 0.25;
  static constexpr absl::Duration kFadeHalfLife = absl::Seconds(5);
  // How long a measurement vouches for the estimate (see above): while the
  // line has faded by less than half.
  static constexpr absl::Duration kConfirmedFor = kFadeHalfLife;

  // The learned line (before calibration every estimate is zero: an untried
  // device is tried).
  const CostLine& line(OperatorKind kind) const { return lines_[Index(kind)]; }
  // The line at `now`: the learned one, faded toward the calibrated one by
  // its age (see above).
  CostLine LineAt(OperatorKind kind, absl::Time now) const;
  absl::Duration Estimate(OperatorKind kind, double units, absl::Time now) const {
    return absl::Seconds(LineAt(kind, now).Estimate(units));
  }
  // Whether a batch measured `kind` within kConfirmedFor of `now` (see
  // above).
  bool Confirmed(OperatorKind kind, absl::Time now) const {
    const CostLine& line = lines_[Index(kind)];
    return line.observations > 0 && now - line.last_observed < kConfirmedFor;
  }
  // Sets the calibrated line (and the learned one with it): calibration, or
  // a test's device of known cost.
  void Seed(OperatorKind kind, double fixed_seconds, double seconds_per_unit);
  // A batch of `units` took `took`, ending at `at`.
  void Observe(OperatorKind kind, double units, absl::Duration took, absl::Time at);

 private:
  static size_t Index(OperatorKind kind) { return static_cast<size_t>(kind); }
  std::array<CostLine, kOperatorKindCount> lines_;
  std::array<CostLine, kOperatorKindCount> seeds_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_COST_MODEL_H_

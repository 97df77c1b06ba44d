#ifndef DMLSERVE_SCHEDULER_CALIBRATION_H_
#define DMLSERVE_SCHEDULER_CALIBRATION_H_

// The start-up calibration that seeds a device's CostModel (cost_model.h)
// when batches are placed by cost: per operator, one small and one large
// batch (each run three times: the first warms up pipelines, uploads and
// caches, the faster of the other two counts), through the device's own
// Execute. The line through the two points is the seed: its fixed cost and
// rate per unit of work. Sizes: a 256-element and a 1 MiB scan; a 1x64x64 and
// a 64x512x512 matrix multiply (16.8 M MACs). About 50 ms on a CPU, about a
// second on lavapipe.

#include "absl/status/status.h"
#include "kernels/backend/device.h"
#include "scheduler/cost_model.h"
#include "scheduler/device_pool.h"

namespace dmlserve {

// Seeds `model` for every operator `device` supports. A failed batch fails
// the calibration (the device is not fit to serve).
absl::Status Calibrate(Device& device, CostModel& model);

// With Placement::kCost among several devices, calibrates each device of
// `pool` in turn (call it before any worker runs, so that each has its
// device to itself). A device whose calibration fails is not fit to serve:
// it is out of rotation from the start, and probed as any failed device.
// Does nothing otherwise (one device, or no placement by cost).
void CalibratePool(DevicePool& pool);

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_CALIBRATION_H_

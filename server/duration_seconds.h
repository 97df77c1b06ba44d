#ifndef DMLSERVE_SERVER_DURATION_SECONDS_H_
#define DMLSERVE_SERVER_DURATION_SECONDS_H_

// Seconds as a double for the durations every request reports (its
// latency, queue wait and compute time, to the metrics and the response).
// absl::ToDoubleSeconds divides two Durations exactly, about 80
// instructions a call; whole nanoseconds scaled cost a few, and a
// nanosecond is below anything these figures resolve.

#include <cstdint>

#include "absl/time/time.h"

namespace dmlserve {

// `duration` must be finite (a difference of two finite times).
inline double DurationSeconds(absl::Duration duration) {
  return static_cast<double>(absl::ToInt64Nanoseconds(duration)) * 1e-9;
}

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_DURATION_SECONDS_H_

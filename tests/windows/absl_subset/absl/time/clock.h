// Windows cross-build stand-in for Abseil (see ../../README.md).
#ifndef DMLSERVE_ABSL_SUBSET_TIME_CLOCK_H_
#define DMLSERVE_ABSL_SUBSET_TIME_CLOCK_H_

#include <chrono>
#include <cstdint>
#include <thread>

#include "absl/time/time.h"

namespace absl {

// The wall clock, as Abseil's Now() (deadlines are absolute Times).
inline Time Now() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return FromUnixNanos(std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count());
}

// Sleeps at least `d`; zero or negative returns at once, InfiniteDuration()
// never does (both as Abseil).
inline void SleepFor(Duration d) {
  // In bounded steps, so that no chrono or timespec conversion of a
  // centuries-long (or infinite) Duration can overflow.
  const Duration kMaxStep = Hours(1);
  while (d > ZeroDuration()) {
    const Duration step = d < kMaxStep ? d : kMaxStep;
    std::this_thread::sleep_for(std::chrono::nanoseconds(ToInt64Nanoseconds(step)));
    if (d != InfiniteDuration()) d -= step;
  }
}

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_TIME_CLOCK_H_

#include "scheduler/clock.h"

namespace dmlserve {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

const Clock* Clock::Real() {
  static const RealClock* const clock = new RealClock;
  return clock;
}

}  // namespace dmlserve

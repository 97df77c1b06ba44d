#ifndef DMLSERVE_SCHEDULER_BATCH_LIMITS_H_
#define DMLSERVE_SCHEDULER_BATCH_LIMITS_H_

#include <cstdint>

#include "absl/time/time.h"

namespace dmlserve {

// How large a batch grows and how long a job waits for company: the batching
// policy's parameters (see batch_queue.h for what each bounds), part of
// SchedulerOptions and set by --max_batch_size, --max_batch_bytes and
// --max_queue_delay_us.
struct BatchLimits {
  int max_batch_size = 64;                                   // jobs; at least 1
  uint64_t max_batch_bytes = 64ull << 20;                    // own bytes of its jobs; at least 1
  absl::Duration max_queue_delay = absl::Microseconds(200);  // not negative
};

}  // namespace dmlserve

#endif  // DMLSERVE_SCHEDULER_BATCH_LIMITS_H_

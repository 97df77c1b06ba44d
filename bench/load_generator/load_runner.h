#ifndef DMLSERVE_BENCH_LOAD_GENERATOR_LOAD_RUNNER_H_
#define DMLSERVE_BENCH_LOAD_GENERATOR_LOAD_RUNNER_H_

// Client threads that send unary Execute calls to a server, closed loop (each
// thread sends its next request when the last is answered) or open loop (a
// fixed schedule at a target rate, latencies measured from the scheduled send
// time so that a slow server cannot hide its queueing).

#include <cstdint>

#include "absl/time/time.h"
#include "bench/load_generator/load_stats.h"
#include "bench/load_generator/workload.h"
#include "client/cpp/client.h"

namespace dmlserve::load {

struct RunOptions {
  int threads = 8;
  // Measured phase: ends after `duration` or `max_requests`, whichever comes
  // first (zero means no limit of that kind; not both zero).
  absl::Duration duration = absl::Seconds(10);
  uint64_t max_requests = 0;
  // Sent before the measured phase and not recorded (kernel builds, resident
  // uploads, connection setup).
  absl::Duration warmup = absl::Seconds(1);
  double target_rate = 0;  // requests/s over all threads; 0 is a closed loop
  int verify_every = 100;  // check every n-th response; 0 never
  absl::Duration timeout = absl::Seconds(30);
  uint64_t seed = 1;
};

struct RunResult {
  LoadStats stats;
  absl::Duration elapsed;  // of the measured phase
};

RunResult RunLoad(client::Client& client, const Workload& workload, const RunOptions& options);

}  // namespace dmlserve::load

#endif  // DMLSERVE_BENCH_LOAD_GENERATOR_LOAD_RUNNER_H_

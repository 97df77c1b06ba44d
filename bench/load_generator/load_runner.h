#ifndef DMLSERVE_BENCH_LOAD_GENERATOR_LOAD_RUNNER_H_
#define DMLSERVE_BENCH_LOAD_GENERATOR_LOAD_RUNNER_H_

// Sends unary Execute calls to a server over `channels` separate connections
// with gRPC's callback API, closed loop (each of `calls_per_channel` slots per
// channel sends its next request from the completion of the last) or open
// loop (one pacing thread sends on a fixed schedule at a target rate, however
// many calls are outstanding; latencies are measured from the scheduled send
// time so that a slow server cannot hide its queueing).
//
// Requests are serialized once, before the run, and sent as bytes through a
// generic stub, so the client spends its share of the (shared) CPU on gRPC
// and on parsing the answers, the same work for every server it drives.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/load_generator/load_stats.h"
#include "bench/load_generator/workload.h"
#include "grpcpp/channel.h"

namespace dmlserve::load {

struct RunOptions {
  int channels = 1;
  int calls_per_channel = 8;  // closed loop: calls in flight on each channel
  // Measured phase: ends after `duration` or `max_requests`, whichever comes
  // first (zero means no limit of that kind; not both zero).
  absl::Duration duration = absl::Seconds(10);
  uint64_t max_requests = 0;
  // Sent before the measured phase and not recorded (kernel builds, resident
  // uploads, connection setup).
  absl::Duration warmup = absl::Seconds(1);
  double target_rate = 0;  // requests/s over all channels; 0 is a closed loop
  int verify_every = 100;  // check every n-th response; 0 never
  absl::Duration timeout = absl::Seconds(30);
  uint64_t seed = 1;
};

struct RunResult {
  LoadStats stats;
  absl::Duration elapsed;  // of the measured phase
};

// `count` channels to `address`, each on its own TCP connection, without
// message size limits, connected before this returns.
absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> OpenChannels(
    const std::string& address, int count, absl::Duration connect_timeout);

// Drives `channels` (at least options.channels of them) with `workload`.
RunResult RunLoad(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                  const Workload& workload, const RunOptions& options);

}  // namespace dmlserve::load

#endif  // DMLSERVE_BENCH_LOAD_GENERATOR_LOAD_RUNNER_H_

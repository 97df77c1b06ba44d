#ifndef DMLSERVE_BENCH_LOAD_GENERATOR_ECHO_COMPARISON_H_
#define DMLSERVE_BENCH_LOAD_GENERATOR_ECHO_COMPARISON_H_

// dmlserve against its ceiling: the same workload sent to dmlserve-echo (a
// bare gRPC server that answers without computing, echo_server.cc) and to
// dmlserve, interleaved round by round at each load, and printed as a table of
// dmlserve's throughput and latency next to echo's and as ratios to them.
// This machine is shared and noisy, so only ratios from one run mean much.

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "bench/load_generator/load_runner.h"
#include "bench/load_generator/workload.h"
#include "grpcpp/channel.h"

namespace dmlserve::load {

// A closed-loop load: `channels` connections with `calls_per_channel` calls
// in flight on each, written "CxK".
struct LoadLevel {
  int channels = 1;
  int calls_per_channel = 1;
};

absl::StatusOr<std::vector<LoadLevel>> ParseLoadLevels(const std::string& text);

struct ComparisonTarget {
  std::string name;
  std::vector<std::shared_ptr<grpc::Channel>> channels;  // as many as the largest level needs
  bool verify = true;  // echo's answers are its inputs: not checked
};

// Runs `rounds` rounds of echo and dmlserve back to back (echo first in odd
// rounds, dmlserve in even ones) at every level with `base`'s duration,
// warm-up and checking, prints each run's line and then two tables: each
// round's dmlserve/echo ratios (median, lowest and highest), and the best
// round of each side (highest throughput, lowest p50 and p99). Returns the
// merged dmlserve stats so the caller can report wrong answers.
LoadStats CompareWithEcho(const ComparisonTarget& echo, const ComparisonTarget& dmlserve,
                          const Workload& workload, const RunOptions& base,
                          const std::vector<LoadLevel>& levels, int rounds, std::ostream& out);

}  // namespace dmlserve::load

#endif  // DMLSERVE_BENCH_LOAD_GENERATOR_ECHO_COMPARISON_H_

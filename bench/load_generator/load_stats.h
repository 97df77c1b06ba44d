#ifndef DMLSERVE_BENCH_LOAD_GENERATOR_LOAD_STATS_H_
#define DMLSERVE_BENCH_LOAD_GENERATOR_LOAD_STATS_H_

// What the load generator saw: one LoadStats per call slot, merged at the
// end and printed as a report.

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace dmlserve::load {

struct LoadStats {
  // Seconds from the intended send time to the answer, successes only.
  std::vector<double> latencies;
  uint64_t requests = 0;  // answered, successfully or not
  uint64_t successes = 0;
  uint64_t request_bytes = 0;   // serialized requests sent
  uint64_t response_bytes = 0;  // serialized successful responses
  std::map<std::string, uint64_t> by_operator;
  std::map<uint32_t, uint64_t> batch_sizes;  // ExecutionInfo.batch_size
  std::map<std::string, uint64_t> devices;   // ExecutionInfo.device
  std::map<absl::StatusCode, uint64_t> errors;
  std::vector<std::string> error_examples;  // a few distinct messages
  double queue_seconds = 0;                 // sums of ExecutionInfo's times
  double compute_seconds = 0;
  uint64_t checked = 0;  // responses compared with their reference
  uint64_t wrong = 0;    // ... that did not match
  std::vector<std::string> wrong_examples;
  uint64_t late_sends = 0;  // open loop: sent behind schedule by over 1 ms

  void RecordError(const absl::Status& status);
  void RecordWrong(const std::string& what);
  void Merge(const LoadStats& other);
};

struct ReportContext {
  absl::Duration elapsed;
  double target_rate = 0;  // requests/s, 0 for a closed loop
};

// Nearest-rank percentile (0-100) of sorted values; 0 when there are none.
double Percentile(const std::vector<double>& sorted, double percent);

void PrintReport(const LoadStats& stats, const ReportContext& context, std::ostream& out);

}  // namespace dmlserve::load

#endif  // DMLSERVE_BENCH_LOAD_GENERATOR_LOAD_STATS_H_

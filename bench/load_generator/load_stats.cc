#include "bench/load_generator/load_stats.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dmlserve::load {
namespace {

constexpr size_t kMaxExamples = 5;

// Keeps a few distinct messages: one failure repeated thousands of times
// should not hide a second kind.
void AddExample(const std::string& example, std::vector<std::string>& examples) {
  if (examples.size() >= kMaxExamples) return;
  if (std::find(examples.begin(), examples.end(), example) != examples.end()) return;
  examples.push_back(example);
}

std::string Milliseconds(double seconds) { return absl::StrFormat("%.3f ms", seconds * 1e3); }

// Batch sizes in power-of-two buckets 1, 2, 3-4, 5-8, ..., named by their
// largest size.
uint32_t BucketOf(uint32_t size) {
  if (size <= 2) return size;
  uint32_t high = 4;
  while (high < size) high *= 2;
  return high;
}

std::string BucketName(uint32_t high) {
  return high <= 2 ? absl::StrCat(high) : absl::StrCat(high / 2 + 1, "-", high);
}

}  // namespace

double Percentile(const std::vector<double>& sorted, double percent) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(percent / 100.0 * sorted.size()));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

void LoadStats::RecordError(const absl::Status& status) {
  ++errors[status.code()];
  AddExample(status.ToString(), error_examples);
}

void LoadStats::RecordWrong(const std::string& what) {
  ++wrong;
  AddExample(what, wrong_examples);
}

void LoadStats::Merge(const LoadStats& other) {
  latencies.insert(latencies.end(), other.latencies.begin(), other.latencies.end());
  requests += other.requests;
  successes += other.successes;
  request_bytes += other.request_bytes;
  response_bytes += other.response_bytes;
  for (const auto& [key, count] : other.by_operator) by_operator[key] += count;
  for (const auto& [key, count] : other.batch_sizes) batch_sizes[key] += count;
  for (const auto& [key, count] : other.devices) devices[key] += count;
  for (const auto& [key, count] : other.errors) errors[key] += count;
  for (const std::string& example : other.error_examples) AddExample(example, error_examples);
  queue_seconds += other.queue_seconds;
  compute_seconds += other.compute_seconds;
  checked += other.checked;
  wrong += other.wrong;
  for (const std::string& example : other.wrong_examples) AddExample(example, wrong_examples);
  late_sends += other.late_sends;
}

void PrintReport(const LoadStats& stats, const ReportContext& context, std::ostream& out) {
  const double seconds = absl::ToDoubleSeconds(context.elapsed);
  out << absl::StrFormat("requests:    %d answered in %.2f s (%d ok, %d failed)\n", stats.requests,
                         seconds, stats.successes, stats.requests - stats.successes);
  out << absl::StrFormat("throughput:  %.1f req/s (ok), sent %.2f MB/s, received %.2f MB/s\n",
                         stats.successes / seconds, stats.request_bytes / seconds / 1e6,
                         stats.response_bytes / seconds / 1e6);
  if (context.target_rate > 0) {
    out << absl::StrFormat("open loop:   target %.1f req/s, %d sends more than 1 ms late\n",
                           context.target_rate, stats.late_sends);
  }
  out << "operators:  ";
  for (const auto& [name, count] : stats.by_operator) out << " " << name << "=" << count;
  out << "\n";

  std::vector<double> sorted = stats.latencies;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty()) {
    double sum = 0;
    for (double latency : sorted) sum += latency;
    out << "latency:     p50 " << Milliseconds(Percentile(sorted, 50)) << ", p90 "
        << Milliseconds(Percentile(sorted, 90)) << ", p99 " << Milliseconds(Percentile(sorted, 99))
        << ", max " << Milliseconds(sorted.back()) << ", mean " << Milliseconds(sum / sorted.size())
        << "\n";
  }
  if (stats.successes > 0) {
    out << "server:      mean queue " << Milliseconds(stats.queue_seconds / stats.successes)
        << ", mean batch compute " << Milliseconds(stats.compute_seconds / stats.successes) << "\n";
  }

  // Requests per bucket, so the shares say what fraction of the traffic ran
  // in batches of that size.
  std::map<uint32_t, uint64_t> buckets;
  double size_sum = 0;
  for (const auto& [size, count] : stats.batch_sizes) {
    buckets[BucketOf(size)] += count;
    size_sum += static_cast<double>(size) * count;
  }
  if (stats.successes > 0) {
    out << absl::StrFormat("batch size:  mean %.2f as seen by requests;",
                           size_sum / stats.successes);
    for (const auto& [high, count] : buckets) {
      out << absl::StrFormat(" [%s] %.1f%%", BucketName(high), 100.0 * count / stats.successes);
    }
    out << "\n";
  }
  out << "devices:    ";
  for (const auto& [device, count] : stats.devices) out << " " << device << "=" << count;
  out << "\n";
  out << "errors:     ";
  if (stats.errors.empty()) out << " none";
  for (const auto& [code, count] : stats.errors) {
    out << " " << absl::StatusCodeToString(code) << "=" << count;
  }
  out << "\n";
  for (const std::string& example : stats.error_examples) out << "  e.g. " << example << "\n";
  out << absl::StrFormat("checked:     %d responses against the reference, %d wrong\n",
                         stats.checked, stats.wrong);
  for (const std::string& example : stats.wrong_examples) out << "  WRONG " << example << "\n";
}

}  // namespace dmlserve::load

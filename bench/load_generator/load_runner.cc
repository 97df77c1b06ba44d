#include "bench/load_generator/load_runner.h"

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace dmlserve::load {
namespace {

struct SharedState {
  absl::Time start;
  absl::Time measure_start;
  absl::Time deadline;
  std::atomic<uint64_t> claimed{0};   // measured requests handed out
  std::atomic<uint64_t> answered{0};  // measured answers, for verification sampling
};

void ClientLoop(int thread_index, client::Client& client, const Workload& workload,
                const RunOptions& options, SharedState& shared, LoadStats& stats) {
  std::mt19937_64 rng(options.seed * 7919 + thread_index);
  // Open loop: each thread owns every threads-th slot of the global schedule.
  const absl::Duration interval = options.target_rate > 0
                                      ? absl::Seconds(options.threads / options.target_rate)
                                      : absl::ZeroDuration();
  absl::Time next_send =
      shared.start + (options.target_rate > 0 ? absl::Seconds(thread_index / options.target_rate)
                                              : absl::ZeroDuration());
  while (true) {
    absl::Time send_time = absl::Now();
    if (options.target_rate > 0) {
      if (next_send > send_time) absl::SleepFor(next_send - send_time);
      send_time = next_send;
      next_send += interval;
    }
    if (send_time >= shared.deadline) break;
    const bool measured = send_time >= shared.measure_start;
    if (measured && options.max_requests > 0 &&
        shared.claimed.fetch_add(1) >= options.max_requests) {
      break;
    }
    if (measured && options.target_rate > 0 && absl::Now() - send_time > absl::Milliseconds(1)) {
      ++stats.late_sends;
    }

    const PooledRequest& pooled = workload.Pick(rng);
    absl::StatusOr<v1::ExecuteResponse> response =
        client.Execute(pooled.request, client::CallOptions::WithTimeout(options.timeout));
    const absl::Time done = absl::Now();
    if (!measured) continue;

    ++stats.requests;
    ++stats.by_operator[OperatorChoiceName(pooled.op)];
    stats.request_bytes += pooled.request.ByteSizeLong();
    if (!response.ok()) {
      stats.RecordError(response.status());
      continue;
    }
    ++stats.successes;
    stats.latencies.push_back(absl::ToDoubleSeconds(done - send_time));
    stats.response_bytes += response->ByteSizeLong();
    ++stats.batch_sizes[response->info().batch_size()];
    ++stats.devices[response->info().device()];
    stats.queue_seconds += response->info().queue_seconds();
    stats.compute_seconds += response->info().compute_seconds();
    const uint64_t sequence = shared.answered.fetch_add(1);
    if (options.verify_every > 0 && sequence % options.verify_every == 0 &&
        !pooled.expected.empty()) {
      ++stats.checked;
      const absl::Status check = Workload::Check(pooled, response->output());
      if (!check.ok()) {
        stats.RecordWrong(absl::StrCat(OperatorChoiceName(pooled.op), " on ",
                                       response->info().device(), " (batch of ",
                                       response->info().batch_size(), "): ", check.message()));
      }
    }
  }
}

}  // namespace

RunResult RunLoad(client::Client& client, const Workload& workload, const RunOptions& options) {
  SharedState shared;
  shared.start = absl::Now();
  shared.measure_start = shared.start + options.warmup;
  shared.deadline = options.duration > absl::ZeroDuration()
                        ? shared.measure_start + options.duration
                        : absl::InfiniteFuture();
  std::vector<LoadStats> per_thread(options.threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < options.threads; ++t) {
    threads.emplace_back(
        [&, t] { ClientLoop(t, client, workload, options, shared, per_thread[t]); });
  }
  for (std::thread& thread : threads) thread.join();
  RunResult result;
  // Includes the answers still in flight at the deadline: they were counted.
  result.elapsed = absl::Now() - shared.measure_start;
  for (const LoadStats& stats : per_thread) result.stats.Merge(stats);
  return result;
}

}  // namespace dmlserve::load

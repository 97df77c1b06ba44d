// What one hand-off between two threads costs on this machine: the price the
// scheduler pays each time it wakes a device worker (or a kernel pool thread)
// instead of running a batch on the thread that already has it
// (Scheduler::Impl::RunOnCaller, BusyCoresScope). Two threads pass a token
// back and forth through absl::Mutex and absl::CondVar, the scheduler's own
// primitives, so every hand-off is a wake of a sleeping thread.
//
// Cases: both threads on one core, or free to run on any core (a wake then
// usually crosses cores: an inter-processor interrupt, and on a virtual
// machine an exit to the hypervisor).
//
// Counters: wall time and process CPU time (both threads) per hand-off. Read
// the CPU figure against a request's CPU budget: on the 2-core VM of
// docs/benchmarks.md a request of the shared-B load costs ~35 us of server
// CPU, and one wake across cores costs about a third of that.
//
//   build/bench/dmlserve_bench --benchmark_filter=ThreadHandoff

#include <time.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace dmlserve::bench {
namespace {

double ProcessCpuSeconds() {
  timespec now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return now.tv_sec + now.tv_nsec * 1e-9;
}

// Pins the calling thread to the first core it may run on.
bool PinToOneCore() {
#if defined(__linux__)
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return false;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0;
  }
#endif
  return false;
}

// One token, passed between the benchmark thread (turn 0) and a partner
// (turn 1); each waits on the condition variable for its turn.
class PingPong {
 public:
  void Partner(int rounds) {
    for (int i = 0; i < rounds; ++i) {
      absl::MutexLock lock(&mu_);
      while (turn_ != 1) changed_.Wait(&mu_);
      turn_ = 0;
      changed_.Signal();
    }
  }

  void Round() {
    absl::MutexLock lock(&mu_);
    turn_ = 1;
    changed_.Signal();
    while (turn_ != 0) changed_.Wait(&mu_);
  }

 private:
  absl::Mutex mu_;
  absl::CondVar changed_;
  int turn_ = 0;
};

// Argument: 1: both threads on one core, 0: on any core.
void BM_ThreadHandoff(benchmark::State& state) {
  const bool one_core = state.range(0) != 0;
  // Rounds are counted up front: the partner must know when to stop.
  constexpr int kRoundsPerBatch = 2000;
  double cpu_seconds = 0;
  double wall_seconds = 0;
  int64_t handoffs = 0;
  for (auto _ : state) {
    PingPong ping_pong;
    std::atomic<bool> pinned{true};
    std::thread partner([&] {
      if (one_core && !PinToOneCore()) pinned = false;
      ping_pong.Partner(kRoundsPerBatch);
    });
    std::thread self_thread([&] {
      if (one_core && !PinToOneCore()) pinned = false;
      const double cpu_before = ProcessCpuSeconds();
      const absl::Time wall_before = absl::Now();
      for (int i = 0; i < kRoundsPerBatch; ++i) ping_pong.Round();
      wall_seconds += absl::ToDoubleSeconds(absl::Now() - wall_before);
      cpu_seconds += ProcessCpuSeconds() - cpu_before;
    });
    self_thread.join();
    partner.join();
    if (!pinned) {
      state.SkipWithError("cannot pin threads to one core here");
      return;
    }
    handoffs += 2 * kRoundsPerBatch;  // there and back
  }
  state.counters["wall us/handoff"] = wall_seconds * 1e6 / static_cast<double>(handoffs);
  state.counters["cpu us/handoff"] = cpu_seconds * 1e6 / static_cast<double>(handoffs);
}
BENCHMARK(BM_ThreadHandoff)
    ->ArgName("one_core")
    ->Arg(1)
    ->Arg(0)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dmlserve::bench

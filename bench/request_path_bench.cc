// The server's own request path, without the network: RequestExecutor (decode,
// admission, metrics) -> Scheduler -> CPU device -> response encoding, as a
// gRPC handler drives it, for requests the load generator sends. It counts
// C++ heap allocations per request (this binary replaces operator new), the
// figure docs/benchmarks.md records; gRPC's own per-call allocations are
// outside it, and the same for dmlserve and a bare gRPC server.
//
//   build/bench/dmlserve_request_path_bench --benchmark_counters_tabular=true

#include <time.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/load_generator/workload.h"
#include "benchmark/benchmark.h"
#include "client/cpp/tensor_codec.h"
#include "kernels/cpu/cpu_device.h"
#include "prometheus/registry.h"
#include "scheduler/scheduler.h"
#include "server/memory_budget.h"
#include "server/metrics/scrape_time_gauges.h"
#include "server/request_decoder.h"
#include "server/request_executor.h"
#include "server/service_metrics.h"
#include "server/tensor_registry.h"

namespace {

std::atomic<uint64_t> allocations{0};

// CPU time of the whole process (every thread): the request path's cost,
// wherever it runs.
double ProcessCpuSeconds() {
  timespec now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return now.tv_sec + now.tv_nsec * 1e-9;
}

void* Allocate(size_t size, size_t alignment) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  void* pointer =
      alignment <= alignof(std::max_align_t)
          ? std::malloc(size == 0 ? 1 : size)
          : std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (pointer == nullptr) throw std::bad_alloc();
  return pointer;
}

}  // namespace

void* operator new(size_t size) { return Allocate(size, 0); }
void* operator new[](size_t size) { return Allocate(size, 0); }
void* operator new(size_t size, std::align_val_t alignment) {
  return Allocate(size, static_cast<size_t>(alignment));
}
void* operator new[](size_t size, std::align_val_t alignment) {
  return Allocate(size, static_cast<size_t>(alignment));
}
void operator delete(void* pointer) noexcept { std::free(pointer); }
void operator delete[](void* pointer) noexcept { std::free(pointer); }
void operator delete(void* pointer, size_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer, size_t) noexcept { std::free(pointer); }
void operator delete(void* pointer, std::align_val_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer, std::align_val_t) noexcept { std::free(pointer); }
void operator delete(void* pointer, size_t, std::align_val_t) noexcept { std::free(pointer); }
void operator delete[](void* pointer, size_t, std::align_val_t) noexcept { std::free(pointer); }

namespace dmlserve {
namespace {

// A server's worth of request path, as main.cc wires it (without gRPC).
class RequestPath {
 public:
  RequestPath()
      : metrics_(&registry_, &gauges_, "bench", 64),
        budget_(uint64_t{2} << 30),
        scheduler_(SchedulerOptions(), CreateCpuDevices(1), &metrics_),
        tensors_(uint64_t{1} << 30, [this](absl::string_view id) { scheduler_.EvictTensor(id); }),
        executor_(&scheduler_, &tensors_, &metrics_, uint64_t{64} << 20, &budget_) {
    // As main.cc does: per-device series exist before the first batch.
    metrics_.ObserveDevices(&scheduler_);
    metrics_.ObserveTensorRegistry(&tensors_);
  }

  absl::Status Register(const v1::Tensor& proto, const std::string& id) {
    v1::Tensor copy = proto;
    absl::StatusOr<Tensor> tensor = DecodeTensorData(&copy, "tensor", uint64_t{64} << 20);
    if (!tensor.ok()) return tensor.status();
    return tensors_.Register(id, *std::move(tensor)).status();
  }

  // Sends `count` requests (copies of `request`, as gRPC would parse them)
  // and waits for every answer; returns how many failed.
  int Run(const v1::ExecuteRequest& request, int count, std::vector<v1::ExecuteRequest>& copies) {
    absl::Mutex mutex;
    batch_size_sum_ = 0;
    int outstanding = count;
    int failed = 0;
    for (int i = 0; i < count; ++i) {
      executor_.Execute(
          &copies[i], absl::InfiniteFuture(), [](std::shared_ptr<Job>) {},
          [&](absl::Status status, v1::ExecuteResponse* response, MemoryBudget::Reservation) {
            benchmark::DoNotOptimize(response);
            absl::MutexLock lock(&mutex);
            batch_size_sum_ += response->info().batch_size();
            --outstanding;
            if (!status.ok()) ++failed;
          });
    }
    absl::MutexLock lock(&mutex);
    mutex.Await(absl::Condition(
        +[](int* left) { return *left == 0; }, &outstanding));
    return failed;
  }

  // Of the last Run's responses.
  uint64_t batch_size_sum() const { return batch_size_sum_; }

 private:
  uint64_t batch_size_sum_ = 0;
  prometheus::Registry registry_;
  metrics::ScrapeTimeGauges gauges_;
  ServiceMetrics metrics_;
  MemoryBudget budget_;
  Scheduler scheduler_;
  TensorRegistry tensors_;
  RequestExecutor executor_;
};

void RunCase(benchmark::State& state, const load::WorkloadOptions& options, int concurrent) {
  absl::StatusOr<load::Workload> workload = load::Workload::Create(options);
  if (!workload.ok()) {
    state.SkipWithError(std::string(workload.status().message()).c_str());
    return;
  }
  RequestPath path;
  for (const auto& [id, tensor] : workload->Registrations()) {
    if (absl::Status status = path.Register(tensor, id); !status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      return;
    }
  }
  std::mt19937_64 rng(1);
  const v1::ExecuteRequest& request = workload->Pick(rng).request;
  std::vector<v1::ExecuteRequest> copies(concurrent);
  copies[0] = request;
  path.Run(request, 1, copies);  // warm: packs B, fills the buffer pool
  uint64_t counted = 0;
  uint64_t requests = 0;
  uint64_t batch_sizes = 0;
  double cpu_seconds = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (auto& copy : copies) copy = request;  // what gRPC's parser would produce
    state.ResumeTiming();
    const uint64_t before = allocations.load(std::memory_order_relaxed);
    const double cpu_before = ProcessCpuSeconds();
    if (path.Run(request, concurrent, copies) != 0) {
      state.SkipWithError("a request failed");
      return;
    }
    counted += allocations.load(std::memory_order_relaxed) - before;
    cpu_seconds += ProcessCpuSeconds() - cpu_before;
    requests += concurrent;
    batch_sizes += path.batch_size_sum();
  }
  state.counters["allocs/request"] = static_cast<double>(counted) / requests;
  state.counters["cpu us/request"] = cpu_seconds * 1e6 / requests;
  state.counters["mean batch"] = static_cast<double>(batch_sizes) / requests;
  state.counters["requests/s"] = benchmark::Counter(requests, benchmark::Counter::kIsRate);
}

void BM_RequestPath_CumsumF32_1x1x3x4(benchmark::State& state) {
  load::WorkloadOptions options;
  options.cumsum_weight = 1;
  options.cumprod_weight = options.qmatmul_weight = 0;
  options.scan_sizes = {1, 1, 3, 4};
  options.scan_axis = 3;
  options.scan_type = v1::FLOAT32;
  RunCase(state, options, static_cast<int>(state.range(0)));
}
BENCHMARK(BM_RequestPath_CumsumF32_1x1x3x4)->Arg(1)->Arg(32)->UseRealTime();

void BM_RequestPath_QMatMul_1x1024x1024_Registered(benchmark::State& state) {
  load::WorkloadOptions options;
  options.qmatmul_weight = 1;
  options.cumsum_weight = options.cumprod_weight = 0;
  options.m = 1;
  options.k = options.n = 1024;
  options.registered_b_id = "bench-b";
  RunCase(state, options, static_cast<int>(state.range(0)));
}
BENCHMARK(BM_RequestPath_QMatMul_1x1024x1024_Registered)->Arg(1)->Arg(32)->UseRealTime();

}  // namespace
}  // namespace dmlserve

BENCHMARK_MAIN();

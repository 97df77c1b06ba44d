// The server's request path in one process, without gRPC: RequestExecutor,
// Scheduler, two CPU devices, the tensor registry, the memory budget and
// the metrics registry, driven from several threads at once while weights
// are registered and released, jobs are cancelled and /metrics is rendered.
// Every answer is checked exactly; at the end nothing is left held.
//
// Its purpose is the ThreadSanitizer build (scripts/sanitize.sh thread): it
// covers dmlserve's own synchronization on the request path, which the
// gRPC-fronted integration tests cannot show TSan (Debian's gRPC is not
// built with TSan; see docs/sanitizers.md). It runs in every build.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_device.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "scheduler/scheduler.h"
#include "server/memory_budget.h"
#include "server/metrics/scrape_time_gauges.h"
#include "server/request_decoder.h"
#include "server/request_executor.h"
#include "server/service_metrics.h"
#include "server/tensor_registry.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

constexpr int kClients = 4;
constexpr int kRequestsPerClient = 500;

class RequestPath {
 public:
  RequestPath()
      : metrics_(&registry_, &gauges_, "test", 8),
        scheduler_(Options(), CreateCpuDevices(2), &metrics_),
        tensors_(1 << 20, [this](absl::string_view id) { scheduler_.EvictTensor(id); }),
        budget_(8 << 20),
        executor_(&scheduler_, &tensors_, &metrics_, 64 << 20, &budget_) {
    metrics_.ObserveDevices(&scheduler_);
    metrics_.ObserveTensorRegistry(&tensors_);
  }

  static SchedulerOptions Options() {
    SchedulerOptions options;
    options.batch.max_batch_size = 8;
    options.max_queue = 64;
    return options;
  }

  absl::Status Register(const std::string& id, const QuantizedMatMulCase& weights) {
    v1::Tensor proto = MatMulB(weights);
    absl::StatusOr<Tensor> tensor = DecodeTensorData(&proto, "tensor", 1 << 20);
    if (!tensor.ok()) return tensor.status();
    return tensors_.Register(id, *std::move(tensor)).status();
  }

  Scheduler& scheduler() { return scheduler_; }
  TensorRegistry& tensors() { return tensors_; }
  MemoryBudget& budget() { return budget_; }
  RequestExecutor& executor() { return executor_; }
  // What a scrape of the metrics endpoint would return.
  std::string Scrape() const {
    std::vector<prometheus::MetricFamily> families = registry_.Collect();
    for (prometheus::MetricFamily& family : gauges_.Collect()) {
      families.push_back(std::move(family));
    }
    return prometheus::TextSerializer().Serialize(families);
  }

 private:
  prometheus::Registry registry_;
  metrics::ScrapeTimeGauges gauges_;
  ServiceMetrics metrics_;
  Scheduler scheduler_;
  TensorRegistry tensors_;
  MemoryBudget budget_;
  RequestExecutor executor_;
};

TEST(RequestPathTest, ConcurrentRequestsChurnCancellationAndScrapes) {
  RequestPath path;
  absl::BitGen seed_bitgen;
  const QuantizedMatMulCase weights = RandomWeights(seed_bitgen, /*k=*/24, /*n=*/12);
  ASSERT_TRUE(path.Register("w", weights).ok());

  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, cancelled{0}, refused{0}, wrong{0};
  absl::BlockingCounter done(kClients * kRequestsPerClient);

  // Weights come and go: requests find them registered or get a clear error.
  std::thread churn([&] {
    while (!stop.load()) {
      (void)path.tensors().Release("w");
      (void)path.Register("w", weights);
      absl::SleepFor(absl::Microseconds(200));
    }
  });
  std::thread scrapes([&] {
    while (!stop.load()) {
      const std::string scraped = path.Scrape();
      EXPECT_NE(scraped.find("dmlserve_inflight_requests"), std::string::npos);
      EXPECT_NE(scraped.find("dmlserve_registered_tensor_bytes"), std::string::npos);
      (void)path.scheduler().devices();
      absl::SleepFor(absl::Microseconds(500));
    }
  });

  absl::Mutex cancellers_mutex;
  std::vector<std::thread> cancellers;
  std::vector<std::thread> clients;
  for (int client = 0; client < kClients; ++client) {
    clients.emplace_back([&, client] {
      absl::BitGen bitgen;
      for (int i = 0; i < kRequestsPerClient; ++i) {
        const std::string id = absl::StrCat(client, "-", i);
        // Answers are checked on whatever thread completes them.
        struct Expected {
          std::vector<double> values;
        };
        auto expected = std::make_shared<Expected>();
        auto request = std::make_shared<v1::ExecuteRequest>();
        const int kind = i % 3;
        if (kind == 0) {
          ScanCase scan = RandomScanCase(bitgen, id);
          *request = std::move(scan.request);
          expected->values = std::move(scan.expected);
        } else {
          const QuantizedMatMulCase c = RandomMatMulCase(bitgen, weights);
          *request = MatMulRequest(id, c, kind == 1 ? "w" : "");
          expected->values = QuantizedMatMulReference(c);
        }
        const bool cancel = i % 7 == 3;
        path.executor().Execute(
            request.get(), absl::Now() + absl::Seconds(60),
            [&, cancel](std::shared_ptr<Job> job) {
              if (cancel) {
                // From another thread, racing the job's start.
                absl::MutexLock lock(&cancellers_mutex);
                cancellers.emplace_back([job] { job->Cancel(); });
              }
            },
            [&, expected, request](absl::Status status, v1::ExecuteResponse* response,
                                   MemoryBudget::Reservation) {
              if (status.ok()) {
                if (TensorValues(response->output()) != expected->values) ++wrong;
                ++answered;
              } else if (status.code() == absl::StatusCode::kCancelled) {
                ++cancelled;
              } else if (status.code() == absl::StatusCode::kInvalidArgument ||
                         status.code() == absl::StatusCode::kResourceExhausted) {
                ++refused;  // "w" released at that moment, or the queue full
              } else {
                ADD_FAILURE() << status;
              }
              done.DecrementCount();
            });
      }
    });
  }
  for (std::thread& client : clients) client.join();
  done.Wait();
  for (std::thread& canceller : cancellers) canceller.join();
  stop.store(true);
  churn.join();
  scrapes.join();

  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(answered + cancelled + refused, kClients * kRequestsPerClient);
  EXPECT_GT(answered.load(), kClients * kRequestsPerClient / 2);
  EXPECT_EQ(path.budget().used(), 0u) << "every reservation released";
  path.scheduler().Shutdown();
}

}  // namespace
}  // namespace dmlserve::testing

#ifndef DMLSERVE_SERVER_SERVICE_METRICS_H_
#define DMLSERVE_SERVER_SERVICE_METRICS_H_

// The service's Prometheus metrics (names as docs/metrics.md lists them):
// request counts and latencies recorded by the RPC handlers, and the
// scheduler's queue, batch and device events (as its SchedulerObserver).

#include <array>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/core/operation.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_observer.h"
#include "server/metrics/scrape_time_gauges.h"
#include "server/tensor_registry.h"

namespace dmlserve {

class ServiceMetrics final : public SchedulerObserver {
 public:
  // The operator label of requests that name none.
  static constexpr absl::string_view kUnknownOperator = "unknown";

  // Records into `registry`; gauges read at scrape time go to `gauges`. Both
  // must outlive this. `max_batch_size` sizes the batch histogram.
  ServiceMetrics(prometheus::Registry* registry, metrics::ScrapeTimeGauges* gauges,
                 absl::string_view version, int max_batch_size);

  // Gauges computed at scrape time. Both objects must outlive every scrape
  // (stop the metrics endpoint before destroying them).
  void ObserveDevices(const Scheduler* scheduler);
  void ObserveTensorRegistry(const TensorRegistry* tensors);

  // An Execute request (or stream item) arrived with `bytes` on the wire.
  void RequestStarted(std::optional<OperatorKind> kind, size_t bytes);
  // ...and was answered with `code` after `duration`.
  void RequestFinished(std::optional<OperatorKind> kind, absl::StatusCode code,
                       absl::Duration duration);

  // SchedulerObserver.
  void OnQueueDepth(int depth) override;
  void OnJobStarted(OperatorKind kind, absl::Duration queue_duration) override;
  void OnBatchExecuted(OperatorKind kind, absl::string_view device, int batch_size,
                       absl::Duration compute_duration) override;
  void OnDeviceRemoved(absl::string_view device, int devices_left) override;
  void OnDeviceRecovered(absl::string_view device, int devices_serving) override;

 private:
  // Per-operator children, looked up once; the last slot is "unknown".
  template <typename Metric>
  using PerOperator = std::array<Metric*, kOperatorKindCount + 1>;
  static size_t Slot(std::optional<OperatorKind> kind);
  static std::string OperatorLabel(std::optional<OperatorKind> kind);

  metrics::ScrapeTimeGauges* gauges_;
  prometheus::Family<prometheus::Counter>* requests_total_;
  prometheus::Family<prometheus::Histogram>* compute_duration_;
  prometheus::Family<prometheus::Counter>* device_removals_;
  prometheus::Family<prometheus::Counter>* device_recoveries_;
  PerOperator<prometheus::Histogram> request_duration_;
  PerOperator<prometheus::Histogram> queue_duration_;
  PerOperator<prometheus::Histogram> batch_size_;
  PerOperator<prometheus::Counter> request_bytes_;
  // requests_total{code="OK"} per operator: most answers, counted without a
  // label lookup (other codes go through requests_total_).
  PerOperator<prometheus::Counter> requests_ok_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* inflight_requests_;
  // compute_duration_ per device, filled by ObserveDevices (before serving;
  // read-only afterwards).
  absl::flat_hash_map<std::string, prometheus::Histogram*> compute_by_device_;
  // dmlserve_device_batches_total per device and operator: where batches
  // were placed. Filled by ObserveDevices; read-only afterwards.
  prometheus::Family<prometheus::Counter>* device_batches_;
  absl::flat_hash_map<std::string, std::array<prometheus::Counter*, kOperatorKindCount>>
      batches_by_device_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_SERVICE_METRICS_H_

#ifndef DMLSERVE_SERVER_SERVICE_METRICS_H_
#define DMLSERVE_SERVER_SERVICE_METRICS_H_

// The service's Prometheus metrics (names as docs/metrics.md lists them):
// request counts and latencies recorded by the RPC handlers, and the
// scheduler's queue, batch and device events (as its SchedulerObserver).

#include <array>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/core/operation.h"
#include "scheduler/scheduler.h"
#include "scheduler/scheduler_observer.h"
#include "server/metrics/metrics.h"
#include "server/tensor_registry.h"

namespace dmlserve {

class ServiceMetrics final : public SchedulerObserver {
 public:
  // The operator label of requests that name none.
  static constexpr absl::string_view kUnknownOperator = "unknown";

  // `registry` must outlive this. `max_batch_size` sizes the batch histogram.
  ServiceMetrics(metrics::Registry* registry, absl::string_view version, int max_batch_size);

  // Gauges computed at scrape time. Both objects must outlive every scrape of
  // the registry (stop the metrics endpoint before destroying them).
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

  metrics::Registry* registry_;
  metrics::Family<metrics::Counter>* requests_total_;
  metrics::Family<metrics::Histogram>* compute_duration_;
  metrics::Family<metrics::Counter>* device_removals_;
  metrics::Family<metrics::Counter>* device_recoveries_;
  PerOperator<metrics::Histogram> request_duration_;
  PerOperator<metrics::Histogram> queue_duration_;
  PerOperator<metrics::Histogram> batch_size_;
  PerOperator<metrics::Counter> request_bytes_;
  // requests_total{code="OK"} per operator: most answers, counted without a
  // label lookup (other codes go through requests_total_).
  PerOperator<metrics::Counter> requests_ok_;
  metrics::Gauge* queue_depth_;
  metrics::Gauge* inflight_requests_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_SERVICE_METRICS_H_

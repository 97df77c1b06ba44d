#include "server/service_metrics.h"

#include <utility>
#include <vector>

#include "server/status_conversion.h"

namespace dmlserve {

ServiceMetrics::ServiceMetrics(metrics::Registry* registry, absl::string_view version,
                               int max_batch_size)
    : registry_(registry) {
  requests_total_ = &registry->AddCounter(
      "dmlserve_requests_total",
      "Execute requests (and ExecuteStream items) answered, by operator and gRPC status code.",
      {"operator", "code"});
  auto& request_duration =
      registry->AddHistogram("dmlserve_request_duration_seconds",
                             "Time from receiving an Execute request until its response is ready.",
                             {"operator"}, metrics::LatencyBuckets());
  auto& queue_duration = registry->AddHistogram(
      "dmlserve_queue_duration_seconds",
      "Time a job waited from admission until its batch started on a device.", {"operator"},
      metrics::LatencyBuckets());
  compute_duration_ = &registry->AddHistogram("dmlserve_compute_duration_seconds",
                                              "Device time per executed batch.", {"device"},
                                              metrics::LatencyBuckets());
  auto& batch_size =
      registry->AddHistogram("dmlserve_batch_size", "Jobs per executed batch.", {"operator"},
                             metrics::PowerOfTwoBuckets(max_batch_size > 1 ? max_batch_size : 1));
  auto& request_bytes = registry->AddCounter(
      "dmlserve_request_bytes_total", "Bytes of Execute request messages received.", {"operator"});
  queue_depth_ =
      &registry
           ->AddGauge("dmlserve_queue_depth", "Jobs admitted and not yet started on a device.", {})
           .WithLabels({});
  inflight_requests_ =
      &registry
           ->AddGauge("dmlserve_inflight_requests",
                      "Execute requests (and stream items) received and not yet answered.", {})
           .WithLabels({});
  device_removals_ = &registry->AddCounter(
      "dmlserve_device_removals_total",
      "Devices taken out of rotation after a failure (their jobs were re-queued).", {"device"});
  device_recoveries_ = &registry->AddCounter(
      "dmlserve_device_recoveries_total",
      "Failed devices that recovered when re-probed and serve again (--device_reprobe_interval).",
      {"device"});
  registry
      ->AddGauge("dmlserve_build_info", "Build information; the value is always 1.", {"version"})
      .WithLabels({std::string(version)})
      .Set(1);

  for (size_t slot = 0; slot < request_duration_.size(); ++slot) {
    const std::string label = OperatorLabel(
        slot < kOperatorKindCount ? std::optional<OperatorKind>(static_cast<OperatorKind>(slot))
                                  : std::nullopt);
    request_duration_[slot] = &request_duration.WithLabels({label});
    request_bytes_[slot] = &request_bytes.WithLabels({label});
    // (A request without an operator is never answered OK.)
    requests_ok_[slot] = slot < kOperatorKindCount
                             ? &requests_total_->WithLabels(
                                   {label, std::string(StatusCodeName(absl::StatusCode::kOk))})
                             : nullptr;
    // Requests without an operator never reach the scheduler.
    queue_duration_[slot] =
        slot < kOperatorKindCount ? &queue_duration.WithLabels({label}) : nullptr;
    batch_size_[slot] = slot < kOperatorKindCount ? &batch_size.WithLabels({label}) : nullptr;
  }
}

void ServiceMetrics::ObserveDevices(const Scheduler* scheduler) {
  // Every device's removal and recovery counters from 0, so that increase()
  // and alerts see the first event, and dashboards find the series.
  for (const DeviceStatus& device : scheduler->devices()) {
    device_removals_->WithLabels({device.description.name});
    device_recoveries_->WithLabels({device.description.name});
  }
  registry_->AddCallbackGauge(
      "dmlserve_healthy_devices",
      "Devices that can run requests (fallbacks included); at 0 every request fails UNAVAILABLE "
      "and gRPC health reports NOT_SERVING.",
      {}, [scheduler] {
        int healthy = 0;
        for (const DeviceStatus& device : scheduler->devices()) healthy += device.healthy ? 1 : 0;
        return std::vector<std::pair<metrics::LabelValues, double>>{
            {{}, static_cast<double>(healthy)}};
      });
  registry_->AddCallbackGauge(
      "dmlserve_device_memory_bytes", "Device memory held by each device's buffers and caches.",
      {"device"}, [scheduler] {
        std::vector<std::pair<metrics::LabelValues, double>> samples;
        for (const DeviceStatus& device : scheduler->devices()) {
          samples.push_back({{device.description.name}, static_cast<double>(device.memory_bytes)});
        }
        return samples;
      });
  registry_->AddCallbackGauge(
      "dmlserve_device_resident_bytes",
      "Of dmlserve_device_memory_bytes, the resident copies of registered tensors (uploaded or "
      "packed weights); dropped once a tensor is released and no job still reads it.",
      {"device"}, [scheduler] {
        std::vector<std::pair<metrics::LabelValues, double>> samples;
        for (const DeviceStatus& device : scheduler->devices()) {
          samples.push_back(
              {{device.description.name}, static_cast<double>(device.resident_bytes)});
        }
        return samples;
      });
}

void ServiceMetrics::ObserveTensorRegistry(const TensorRegistry* tensors) {
  registry_->AddCallbackGauge("dmlserve_registered_tensor_bytes",
                              "Bytes of tensors kept by RegisterTensor.", {}, [tensors] {
                                return std::vector<std::pair<metrics::LabelValues, double>>{
                                    {{}, static_cast<double>(tensors->total_bytes())}};
                              });
}

void ServiceMetrics::RequestStarted(std::optional<OperatorKind> kind, size_t bytes) {
  inflight_requests_->Increment();
  request_bytes_[Slot(kind)]->Increment(static_cast<double>(bytes));
}

void ServiceMetrics::RequestFinished(std::optional<OperatorKind> kind, absl::StatusCode code,
                                     absl::Duration duration) {
  if (metrics::Counter* ok = requests_ok_[Slot(kind)]; code == absl::StatusCode::kOk && ok) {
    ok->Increment();
  } else {
    requests_total_->WithLabels({OperatorLabel(kind), std::string(StatusCodeName(code))})
        .Increment();
  }
  request_duration_[Slot(kind)]->Observe(absl::ToDoubleSeconds(duration));
  inflight_requests_->Decrement();
}

void ServiceMetrics::OnQueueDepth(int depth) { queue_depth_->Set(depth); }

void ServiceMetrics::OnJobStarted(OperatorKind kind, absl::Duration queue_duration) {
  queue_duration_[Slot(kind)]->Observe(absl::ToDoubleSeconds(queue_duration));
}

void ServiceMetrics::OnBatchExecuted(OperatorKind kind, absl::string_view device, int batch_size,
                                     absl::Duration compute_duration) {
  batch_size_[Slot(kind)]->Observe(batch_size);
  compute_duration_->WithLabels({std::string(device)})
      .Observe(absl::ToDoubleSeconds(compute_duration));
}

void ServiceMetrics::OnDeviceRemoved(absl::string_view device, int /*devices_left*/) {
  device_removals_->WithLabels({std::string(device)}).Increment();
}

void ServiceMetrics::OnDeviceRecovered(absl::string_view device, int /*devices_serving*/) {
  device_recoveries_->WithLabels({std::string(device)}).Increment();
}

size_t ServiceMetrics::Slot(std::optional<OperatorKind> kind) {
  return kind.has_value() ? static_cast<size_t>(*kind) : kOperatorKindCount;
}

std::string ServiceMetrics::OperatorLabel(std::optional<OperatorKind> kind) {
  return std::string(kind.has_value() ? OperatorName(*kind) : kUnknownOperator);
}

}  // namespace dmlserve

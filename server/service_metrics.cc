#include "server/service_metrics.h"

#include <utility>
#include <vector>

#include "server/duration_seconds.h"
#include "server/metrics/buckets.h"
#include "server/status_conversion.h"

namespace dmlserve {

ServiceMetrics::ServiceMetrics(prometheus::Registry* registry, metrics::ScrapeTimeGauges* gauges,
                               absl::string_view version, int max_batch_size)
    : gauges_(gauges) {
  requests_total_ = &prometheus::BuildCounter()
                         .Name("dmlserve_requests_total")
                         .Help(
                             "Execute requests (and ExecuteStream items) answered, by operator "
                             "and gRPC status code.")
                         .Register(*registry);
  auto& request_duration =
      prometheus::BuildHistogram()
          .Name("dmlserve_request_duration_seconds")
          .Help("Time from receiving an Execute request until its response is ready.")
          .Register(*registry);
  auto& queue_duration =
      prometheus::BuildHistogram()
          .Name("dmlserve_queue_duration_seconds")
          .Help("Time a job waited from admission until its batch started on a device.")
          .Register(*registry);
  compute_duration_ = &prometheus::BuildHistogram()
                           .Name("dmlserve_compute_duration_seconds")
                           .Help("Device time per executed batch.")
                           .Register(*registry);
  auto& batch_size = prometheus::BuildHistogram()
                         .Name("dmlserve_batch_size")
                         .Help("Jobs per executed batch.")
                         .Register(*registry);
  auto& request_bytes = prometheus::BuildCounter()
                            .Name("dmlserve_request_bytes_total")
                            .Help("Bytes of Execute request messages received.")
                            .Register(*registry);
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("dmlserve_queue_depth")
                      .Help("Jobs admitted and not yet started on a device.")
                      .Register(*registry)
                      .Add({});
  inflight_requests_ = &prometheus::BuildGauge()
                            .Name("dmlserve_inflight_requests")
                            .Help(
                                "Execute requests (and stream items) received and not yet "
                                "answered.")
                            .Register(*registry)
                            .Add({});
  device_batches_ = &prometheus::BuildCounter()
                         .Name("dmlserve_device_batches_total")
                         .Help("Batches each device ran, per operator: where they were placed.")
                         .Register(*registry);
  device_removals_ = &prometheus::BuildCounter()
                          .Name("dmlserve_device_removals_total")
                          .Help(
                              "Devices taken out of rotation after a failure (their jobs were "
                              "re-queued).")
                          .Register(*registry);
  device_recoveries_ = &prometheus::BuildCounter()
                            .Name("dmlserve_device_recoveries_total")
                            .Help(
                                "Failed devices that recovered when re-probed and serve again "
                                "(--device_reprobe_interval).")
                            .Register(*registry);
  prometheus::BuildGauge()
      .Name("dmlserve_build_info")
      .Help("Build information; the value is always 1.")
      .Register(*registry)
      .Add({{"version", std::string(version)}})
      .Set(1);

  const prometheus::Histogram::BucketBoundaries latency = metrics::LatencyBuckets();
  const prometheus::Histogram::BucketBoundaries batches =
      metrics::PowerOfTwoBuckets(max_batch_size > 1 ? max_batch_size : 1);
  for (size_t slot = 0; slot < request_duration_.size(); ++slot) {
    const std::string label = OperatorLabel(
        slot < kOperatorKindCount ? std::optional<OperatorKind>(static_cast<OperatorKind>(slot))
                                  : std::nullopt);
    request_duration_[slot] = &request_duration.Add({{"operator", label}}, latency);
    request_bytes_[slot] = &request_bytes.Add({{"operator", label}});
    // (A request without an operator is never answered OK.)
    requests_ok_[slot] =
        slot < kOperatorKindCount
            ? &requests_total_->Add({{"operator", label},
                                     {"code", std::string(StatusCodeName(absl::StatusCode::kOk))}})
            : nullptr;
    // Requests without an operator never reach the scheduler.
    queue_duration_[slot] =
        slot < kOperatorKindCount ? &queue_duration.Add({{"operator", label}}, latency) : nullptr;
    batch_size_[slot] =
        slot < kOperatorKindCount ? &batch_size.Add({{"operator", label}}, batches) : nullptr;
  }
}

void ServiceMetrics::ObserveDevices(const Scheduler* scheduler) {
  // Every device's removal and recovery counters from 0, so that increase()
  // and alerts see the first event, and dashboards find the series.
  for (const DeviceStatus& device : scheduler->devices()) {
    device_removals_->Add({{"device", device.description.name}});
    device_recoveries_->Add({{"device", device.description.name}});
    compute_by_device_[device.description.name] =
        &compute_duration_->Add({{"device", device.description.name}}, metrics::LatencyBuckets());
    auto& batches = batches_by_device_[device.description.name];
    for (int kind = 0; kind < kOperatorKindCount; ++kind) {
      batches[kind] = &device_batches_->Add(
          {{"device", device.description.name},
           {"operator", std::string(OperatorName(static_cast<OperatorKind>(kind)))}});
    }
  }
  {
    // What each batch is estimated to cost where (cost_model.h): a batch of
    // U units at fixed + per_unit * U. Learned from every batch whatever the
    // placement; --placement=cost also calibrates them and places by them.
    const auto cost_gauge = [scheduler](bool fixed) {
      return [scheduler, fixed] {
        metrics::ScrapeTimeGauges::Samples samples;
        for (const DeviceStatus& device : scheduler->devices()) {
          for (int kind = 0; kind < kOperatorKindCount; ++kind) {
            const CostLine& line = device.costs[kind];
            samples.push_back(
                {{{"device", device.description.name},
                  {"operator", std::string(OperatorName(static_cast<OperatorKind>(kind)))}},
                 fixed ? line.fixed_seconds : line.seconds_per_unit});
          }
        }
        return samples;
      };
    };
    gauges_->Add("dmlserve_device_cost_fixed_seconds",
                 "Each device's estimated fixed cost of a batch, per operator (learned from every "
                 "batch; with --placement=cost also calibrated at start-up and used to place "
                 "batches).",
                 cost_gauge(true));
    gauges_->Add("dmlserve_device_cost_seconds_per_unit",
                 "Each device's estimated cost per unit of work of a batch, per operator (a scan's "
                 "elements; a matrix multiply's MACs plus the bytes of B).",
                 cost_gauge(false));
    gauges_->Add(
        "dmlserve_device_cost_confirmed",
        "1 while a batch measured the device's estimate for the operator in the last 5 s; "
        "with --placement=cost a device tries an unconfirmed estimate one batch at a "
        "time.",
        [scheduler] {
          metrics::ScrapeTimeGauges::Samples samples;
          for (const DeviceStatus& device : scheduler->devices()) {
            for (int kind = 0; kind < kOperatorKindCount; ++kind) {
              samples.push_back(
                  {{{"device", device.description.name},
                    {"operator", std::string(OperatorName(static_cast<OperatorKind>(kind)))}},
                   device.confirmed[kind] ? 1.0 : 0.0});
            }
          }
          return samples;
        });
  }
  gauges_->Add(
      "dmlserve_healthy_devices",
      "Devices that can run requests (fallbacks included); at 0 every request fails UNAVAILABLE "
      "and gRPC health reports NOT_SERVING.",
      [scheduler] {
        int healthy = 0;
        for (const DeviceStatus& device : scheduler->devices()) healthy += device.healthy ? 1 : 0;
        return metrics::ScrapeTimeGauges::Samples{{{}, static_cast<double>(healthy)}};
      });
  gauges_->Add("dmlserve_device_memory_bytes",
               "Device memory held by each device's buffers and caches.", [scheduler] {
                 metrics::ScrapeTimeGauges::Samples samples;
                 for (const DeviceStatus& device : scheduler->devices()) {
                   samples.push_back({{{"device", device.description.name}},
                                      static_cast<double>(device.memory_bytes)});
                 }
                 return samples;
               });
  gauges_->Add(
      "dmlserve_device_resident_bytes",
      "Of dmlserve_device_memory_bytes, the resident copies of registered tensors (uploaded or "
      "packed weights); dropped once a tensor is released and no job still reads it.",
      [scheduler] {
        metrics::ScrapeTimeGauges::Samples samples;
        for (const DeviceStatus& device : scheduler->devices()) {
          samples.push_back(
              {{{"device", device.description.name}}, static_cast<double>(device.resident_bytes)});
        }
        return samples;
      });
}

void ServiceMetrics::ObserveTensorRegistry(const TensorRegistry* tensors) {
  gauges_->Add("dmlserve_registered_tensor_bytes", "Bytes of tensors kept by RegisterTensor.",
               [tensors] {
                 return metrics::ScrapeTimeGauges::Samples{
                     {{}, static_cast<double>(tensors->total_bytes())}};
               });
}

void ServiceMetrics::RequestStarted(std::optional<OperatorKind> kind, size_t bytes) {
  inflight_requests_->Increment();
  request_bytes_[Slot(kind)]->Increment(static_cast<double>(bytes));
}

void ServiceMetrics::RequestFinished(std::optional<OperatorKind> kind, absl::StatusCode code,
                                     absl::Duration duration) {
  if (prometheus::Counter* ok = requests_ok_[Slot(kind)]; code == absl::StatusCode::kOk && ok) {
    ok->Increment();
  } else {
    requests_total_
        ->Add({{"operator", OperatorLabel(kind)}, {"code", std::string(StatusCodeName(code))}})
        .Increment();
  }
  request_duration_[Slot(kind)]->Observe(DurationSeconds(duration));
  inflight_requests_->Decrement();
}

void ServiceMetrics::OnQueueDepth(int depth) { queue_depth_->Set(depth); }

void ServiceMetrics::OnJobStarted(OperatorKind kind, absl::Duration queue_duration) {
  queue_duration_[Slot(kind)]->Observe(DurationSeconds(queue_duration));
}

void ServiceMetrics::OnBatchExecuted(OperatorKind kind, absl::string_view device, int batch_size,
                                     absl::Duration compute_duration) {
  batch_size_[Slot(kind)]->Observe(batch_size);
  // The devices are known before the first batch (ObserveDevices): no label
  // lookup per batch.
  auto it = compute_by_device_.find(device);
  prometheus::Histogram& histogram =
      it != compute_by_device_.end()
          ? *it->second
          : compute_duration_->Add({{"device", std::string(device)}}, metrics::LatencyBuckets());
  histogram.Observe(DurationSeconds(compute_duration));
  if (auto batches = batches_by_device_.find(device); batches != batches_by_device_.end()) {
    batches->second[static_cast<size_t>(kind)]->Increment();
  } else {
    device_batches_
        ->Add({{"device", std::string(device)}, {"operator", std::string(OperatorName(kind))}})
        .Increment();
  }
}

void ServiceMetrics::OnDeviceRemoved(absl::string_view device, int /*devices_left*/) {
  device_removals_->Add({{"device", std::string(device)}}).Increment();
}

void ServiceMetrics::OnDeviceRecovered(absl::string_view device, int /*devices_serving*/) {
  device_recoveries_->Add({{"device", std::string(device)}}).Increment();
}

size_t ServiceMetrics::Slot(std::optional<OperatorKind> kind) {
  return kind.has_value() ? static_cast<size_t>(*kind) : kOperatorKindCount;
}

std::string ServiceMetrics::OperatorLabel(std::optional<OperatorKind> kind) {
  return std::string(kind.has_value() ? OperatorName(*kind) : kUnknownOperator);
}

}  // namespace dmlserve

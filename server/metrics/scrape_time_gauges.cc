#include "server/metrics/scrape_time_gauges.h"

#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"

namespace dmlserve::metrics {

void ScrapeTimeGauges::Add(std::string name, std::string help, std::function<Samples()> collect) {
  absl::MutexLock lock(&mu_);
  gauges_.push_back({std::move(name), std::move(help), std::move(collect)});
}

std::vector<prometheus::MetricFamily> ScrapeTimeGauges::Collect() const {
  absl::MutexLock lock(&mu_);
  std::vector<prometheus::MetricFamily> families;
  families.reserve(gauges_.size());
  for (const Gauge& gauge : gauges_) {
    prometheus::MetricFamily family;
    family.name = gauge.name;
    family.help = gauge.help;
    family.type = prometheus::MetricType::Gauge;
    for (auto& [labels, value] : gauge.collect()) {
      prometheus::ClientMetric metric;
      for (auto& [label, label_value] : labels) metric.label.push_back({label, label_value});
      metric.gauge.value = value;
      family.metric.push_back(std::move(metric));
    }
    families.push_back(std::move(family));
  }
  return families;
}

}  // namespace dmlserve::metrics

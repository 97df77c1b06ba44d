#ifndef DMLSERVE_SERVER_METRICS_SCRAPE_TIME_GAUGES_H_
#define DMLSERVE_SERVER_METRICS_SCRAPE_TIME_GAUGES_H_

// Gauges whose values are read when Prometheus scrapes rather than recorded
// as they change: memory a device backend owns, bytes held by registered
// tensors, healthy devices. A prometheus::Collectable, registered with the
// metrics endpoint beside the service's prometheus::Registry.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/labels.h"
#include "prometheus/metric_family.h"

namespace dmlserve::metrics {

class ScrapeTimeGauges : public prometheus::Collectable {
 public:
  // One sample per label set; an empty label set for a gauge without labels.
  using Samples = std::vector<std::pair<prometheus::Labels, double>>;

  // Adds the gauge family `name` (Prometheus conventions: base units).
  // `collect` runs on the metrics endpoint's threads at every scrape, so what
  // it reads must outlive every scrape (stop the endpoint first) and be safe
  // to read from another thread. Thread-safe.
  void Add(std::string name, std::string help, std::function<Samples()> collect);

  // prometheus::Collectable: every family, with the values of this moment.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Gauge {
    std::string name;
    std::string help;
    std::function<Samples()> collect;
  };
  mutable absl::Mutex mu_;
  std::vector<Gauge> gauges_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dmlserve::metrics

#endif  // DMLSERVE_SERVER_METRICS_SCRAPE_TIME_GAUGES_H_

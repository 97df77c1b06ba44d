#ifndef DMLSERVE_SERVER_METRICS_METRICS_H_
#define DMLSERVE_SERVER_METRICS_METRICS_H_

// The metrics interface the service records into.
//
// prometheus-cpp is not packaged in Debian, so the project ships its own small
// implementation (text_registry.h, Prometheus text exposition format 0.0.4);
// where prometheus-cpp exists (vcpkg on Windows) an adapter implementing this
// interface with prometheus::Registry can be swapped in without touching the
// service. See docs/metrics.md.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace dmlserve::metrics {

using LabelValues = std::vector<std::string>;

class Counter {
 public:
  virtual ~Counter() = default;
  virtual void Increment(double amount = 1.0) = 0;  // amount >= 0
};

class Gauge {
 public:
  virtual ~Gauge() = default;
  virtual void Set(double value) = 0;
  virtual void Increment(double amount = 1.0) = 0;
  virtual void Decrement(double amount = 1.0) = 0;
};

class Histogram {
 public:
  virtual ~Histogram() = default;
  virtual void Observe(double value) = 0;
};

// A metric family: one child per combination of label values, created on
// first use and kept for the registry's lifetime. Returned references stay
// valid; callers on hot paths keep them instead of looking up each time.
template <typename Metric>
class Family {
 public:
  virtual ~Family() = default;
  // `values` must have one entry per label name given when the family was
  // added.
  virtual Metric& WithLabels(const LabelValues& values) = 0;
};

class Registry {
 public:
  virtual ~Registry() = default;

  // `name` follows Prometheus conventions (base units, `_total` on counters).
  virtual Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                                      const std::vector<std::string>& label_names) = 0;
  virtual Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                                  const std::vector<std::string>& label_names) = 0;
  // `buckets`: increasing upper bounds; +Inf is implied.
  virtual Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                          const std::vector<std::string>& label_names,
                                          const std::vector<double>& buckets) = 0;

  // A gauge whose samples are computed at scrape time (e.g. device memory
  // owned by a backend). `collect` returns (label values, value) pairs.
  using GaugeCollector = std::function<std::vector<std::pair<LabelValues, double>>()>;
  virtual void AddCallbackGauge(const std::string& name, const std::string& help,
                                const std::vector<std::string>& label_names,
                                GaugeCollector collect) = 0;

  // Every family in Prometheus text exposition format 0.0.4.
  virtual std::string Serialize() const = 0;
};

// Latency buckets in seconds, 50 µs to 10 s.
std::vector<double> LatencyBuckets();
// Powers of two 1..max (batch sizes).
std::vector<double> PowerOfTwoBuckets(double max);

}  // namespace dmlserve::metrics

#endif  // DMLSERVE_SERVER_METRICS_METRICS_H_

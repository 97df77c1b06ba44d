#include "server/metrics/text_registry.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/metrics/exposition_format.h"
#include "server/metrics/metrics.h"

namespace dmlserve::metrics {
namespace {

// Misuse of the registry is a bug in the caller, found the first time the
// code runs; there is no sensible way to carry on.
[[noreturn]] void Fail(const std::string& message) {
  std::fprintf(stderr, "dmlserve metrics: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

// std::atomic<double>::fetch_add only arrives in C++20. Measured against a
// per-child mutex (docs/metrics.md), the CAS loop is faster both alone and
// under contention.
void AtomicAdd(std::atomic<double>& target, double amount) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
  }
}

class CounterImpl final : public Counter {
 public:
  void Increment(double amount) override {
    // A counter never goes down; negative or NaN amounts are ignored, as
    // prometheus-cpp does, rather than corrupting the series.
    if (!(amount >= 0)) return;
    AtomicAdd(value_, amount);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class GaugeImpl final : public Gauge {
 public:
  void Set(double value) override { value_.store(value, std::memory_order_relaxed); }
  void Increment(double amount) override { AtomicAdd(value_, amount); }
  void Decrement(double amount) override { AtomicAdd(value_, -amount); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class HistogramImpl final : public Histogram {
 public:
  // `bounds` belongs to the family and outlives the child.
  explicit HistogramImpl(const std::vector<double>* bounds)
      : bounds_(*bounds), counts_(new std::atomic<uint64_t>[bounds->size() + 1]()) {}

  void Observe(double value) override {
    // Buckets are "less or equal"; NaN counts only in +Inf, as in client_golang.
    const size_t index =
        std::isnan(value)
            ? bounds_.size()
            : std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
    counts_[index].fetch_add(1, std::memory_order_relaxed);
    AtomicAdd(sum_, value);
  }

  // Per-bucket (non-cumulative) counts, the last one being +Inf's.
  std::vector<uint64_t> BucketCounts() const {
    std::vector<uint64_t> counts(bounds_.size() + 1);
    for (size_t i = 0; i < counts.size(); ++i) {
      counts[i] = counts_[i].load(std::memory_order_relaxed);
    }
    return counts;
  }
  double sum() const { return sum_.load(std::memory_order_relaxed); }

 private:
  const std::vector<double>& bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

enum class Type { kCounter, kGauge, kHistogram };

const char* TypeName(Type type) {
  switch (type) {
    case Type::kCounter:
      return "counter";
    case Type::kGauge:
      return "gauge";
    case Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

struct Definition {
  Type type;
  bool callback = false;
  std::string name;
  std::string help;
  std::vector<std::string> label_names;
  std::vector<double> buckets;

  bool operator==(const Definition& other) const {
    return type == other.type && callback == other.callback && name == other.name &&
           help == other.help && label_names == other.label_names && buckets == other.buckets;
  }

  // The sample names this family writes, which no other family may write.
  std::vector<std::string> SampleNames() const {
    if (type != Type::kHistogram) return {name};
    return {name, name + "_bucket", name + "_sum", name + "_count"};
  }
};

// `l1="v1",l2="v2"`, rendered once per child instead of on every scrape.
std::string RenderLabels(const std::vector<std::string>& names, const LabelValues& values) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text.push_back(',');
    text.append(names[i]);
    text.append("=\"");
    AppendEscapedLabelValue(values[i], &text);
    text.push_back('"');
  }
  return text;
}

// `name_suffix{labels,le="bound"} value`
void AppendSample(const std::string& name, std::string_view suffix, const std::string& labels,
                  const std::string* le, double value, std::string* out) {
  out->append(name);
  out->append(suffix);
  if (!labels.empty() || le != nullptr) {
    out->push_back('{');
    out->append(labels);
    if (le != nullptr) {
      if (!labels.empty()) out->push_back(',');
      out->append("le=\"");
      out->append(*le);
      out->push_back('"');
    }
    out->push_back('}');
  }
  out->push_back(' ');
  AppendSampleValue(value, out);
  out->push_back('\n');
}

class FamilyBase {
 public:
  explicit FamilyBase(Definition definition) : definition_(std::move(definition)) {}
  virtual ~FamilyBase() = default;

  const Definition& definition() const { return definition_; }

  // HELP, TYPE and the samples; nothing for a family without samples yet
  // (as client_golang does), so scrapers never see an empty family.
  void AppendTo(std::string* out) const {
    std::string samples;
    AppendSamples(&samples);
    if (samples.empty()) return;
    out->append("# HELP ");
    out->append(definition_.name);
    out->push_back(' ');
    AppendEscapedHelp(definition_.help, out);
    out->append("\n# TYPE ");
    out->append(definition_.name);
    out->push_back(' ');
    out->append(TypeName(definition_.type));
    out->push_back('\n');
    out->append(samples);
  }

 protected:
  virtual void AppendSamples(std::string* out) const = 0;

 private:
  const Definition definition_;
};

template <typename Metric, typename Impl>
class ChildFamily : public FamilyBase, public Family<Metric> {
 public:
  using FamilyBase::FamilyBase;

  Metric& WithLabels(const LabelValues& values) override {
    if (values.size() != definition().label_names.size()) {
      Fail(absl::StrCat(definition().name, ": ", values.size(), " label values for ",
                        definition().label_names.size(), " labels (",
                        absl::StrJoin(definition().label_names, ","), ")"));
    }
    {
      std::shared_lock lock(mutex_);
      auto it = children_.find(values);
      if (it != children_.end()) return *it->second.metric;
    }
    std::unique_lock lock(mutex_);
    auto [it, inserted] = children_.try_emplace(values);
    if (inserted) {
      it->second.metric = NewChild();
      it->second.labels = RenderLabels(definition().label_names, values);
    }
    return *it->second.metric;
  }

 protected:
  virtual std::unique_ptr<Impl> NewChild() const = 0;
  virtual void AppendChild(const Impl& child, const std::string& labels,
                           std::string* out) const = 0;

  void AppendSamples(std::string* out) const override {
    std::shared_lock lock(mutex_);
    for (const auto& [values, child] : children_) AppendChild(*child.metric, child.labels, out);
  }

 private:
  struct Child {
    std::unique_ptr<Impl> metric;
    std::string labels;
  };
  mutable std::shared_mutex mutex_;
  std::map<LabelValues, Child> children_;  // sorted: stable output order
};

class CounterFamily final : public ChildFamily<Counter, CounterImpl> {
 public:
  using ChildFamily::ChildFamily;

 protected:
  std::unique_ptr<CounterImpl> NewChild() const override { return std::make_unique<CounterImpl>(); }
  void AppendChild(const CounterImpl& child, const std::string& labels,
                   std::string* out) const override {
    AppendSample(definition().name, "", labels, nullptr, child.value(), out);
  }
};

class GaugeFamily final : public ChildFamily<Gauge, GaugeImpl> {
 public:
  using ChildFamily::ChildFamily;

 protected:
  std::unique_ptr<GaugeImpl> NewChild() const override { return std::make_unique<GaugeImpl>(); }
  void AppendChild(const GaugeImpl& child, const std::string& labels,
                   std::string* out) const override {
    AppendSample(definition().name, "", labels, nullptr, child.value(), out);
  }
};

class HistogramFamily final : public ChildFamily<Histogram, HistogramImpl> {
 public:
  explicit HistogramFamily(Definition definition) : ChildFamily(std::move(definition)) {
    for (double bound : this->definition().buckets) {
      bucket_labels_.push_back(FormatSampleValue(bound));
    }
  }

 protected:
  std::unique_ptr<HistogramImpl> NewChild() const override {
    return std::make_unique<HistogramImpl>(&definition().buckets);
  }
  void AppendChild(const HistogramImpl& child, const std::string& labels,
                   std::string* out) const override {
    static const std::string kInf = "+Inf";
    const std::string& name = definition().name;
    // _count is the +Inf bucket by construction, so a scrape racing with
    // Observe never shows a count that disagrees with the buckets.
    const std::vector<uint64_t> counts = child.BucketCounts();
    uint64_t cumulative = 0;
    for (size_t i = 0; i < bucket_labels_.size(); ++i) {
      cumulative += counts[i];
      AppendSample(name, "_bucket", labels, &bucket_labels_[i], cumulative, out);
    }
    cumulative += counts.back();
    AppendSample(name, "_bucket", labels, &kInf, cumulative, out);
    AppendSample(name, "_sum", labels, nullptr, child.sum(), out);
    AppendSample(name, "_count", labels, nullptr, cumulative, out);
  }

 private:
  std::vector<std::string> bucket_labels_;
};

class CallbackGaugeFamily final : public FamilyBase {
 public:
  CallbackGaugeFamily(Definition definition, Registry::GaugeCollector collect)
      : FamilyBase(std::move(definition)), collect_(std::move(collect)) {}

 protected:
  void AppendSamples(std::string* out) const override {
    // One scrape at a time per collector, so collectors need not be
    // reentrant (the HTTP server serves scrapes on several threads).
    std::map<LabelValues, double> samples;  // sorted; a repeated label set keeps its last value
    {
      std::lock_guard lock(collect_mutex_);
      for (auto& [values, value] : collect_()) {
        if (values.size() != definition().label_names.size()) {
          // Not fatal: this runs at scrape time in a serving process.
          std::fprintf(stderr,
                       "dmlserve metrics: %s: collector returned %zu label values for %zu labels\n",
                       definition().name.c_str(), values.size(), definition().label_names.size());
          continue;
        }
        samples[std::move(values)] = value;
      }
    }
    for (const auto& [values, value] : samples) {
      AppendSample(definition().name, "", RenderLabels(definition().label_names, values), nullptr,
                   value, out);
    }
  }

 private:
  mutable std::mutex collect_mutex_;
  const Registry::GaugeCollector collect_;
};

void Validate(Definition& definition) {
  const std::string& name = definition.name;
  if (!IsValidMetricName(name)) Fail(absl::StrCat("invalid metric name \"", name, "\""));
  std::set<std::string> seen;
  for (const std::string& label : definition.label_names) {
    if (!IsValidLabelName(label)) {
      Fail(absl::StrCat(name, ": invalid label name \"", label, "\""));
    }
    if (definition.type == Type::kHistogram && label == "le") {
      Fail(absl::StrCat(name, ": label \"le\" is reserved for histogram buckets"));
    }
    if (!seen.insert(label).second) Fail(absl::StrCat(name, ": label \"", label, "\" repeated"));
  }
  std::vector<double>& buckets = definition.buckets;
  // +Inf is implied; accept it spelled out too.
  if (!buckets.empty() && buckets.back() == INFINITY) buckets.pop_back();
  for (size_t i = 0; i < buckets.size(); ++i) {
    if (std::isnan(buckets[i]) || (i > 0 && !(buckets[i - 1] < buckets[i]))) {
      Fail(absl::StrCat(name, ": histogram buckets must be strictly increasing"));
    }
  }
}

class TextRegistry final : public Registry {
 public:
  Family<Counter>& AddCounter(const std::string& name, const std::string& help,
                              const std::vector<std::string>& label_names) override {
    return Add<CounterFamily>({Type::kCounter, false, name, help, label_names, {}});
  }

  Family<Gauge>& AddGauge(const std::string& name, const std::string& help,
                          const std::vector<std::string>& label_names) override {
    return Add<GaugeFamily>({Type::kGauge, false, name, help, label_names, {}});
  }

  Family<Histogram>& AddHistogram(const std::string& name, const std::string& help,
                                  const std::vector<std::string>& label_names,
                                  const std::vector<double>& buckets) override {
    return Add<HistogramFamily>({Type::kHistogram, false, name, help, label_names, buckets});
  }

  void AddCallbackGauge(const std::string& name, const std::string& help,
                        const std::vector<std::string>& label_names,
                        GaugeCollector collect) override {
    Definition definition{Type::kGauge, true, name, help, label_names, {}};
    Validate(definition);
    if (!collect) Fail(absl::StrCat(name, ": empty collector"));
    std::lock_guard lock(mutex_);
    // Two collectors cannot be told apart, so any repeat is an error.
    if (families_.count(name) != 0) Fail(absl::StrCat(name, ": registered twice"));
    Insert(std::make_unique<CallbackGaugeFamily>(std::move(definition), std::move(collect)));
  }

  std::string Serialize() const override {
    std::vector<const FamilyBase*> families;
    {
      std::lock_guard lock(mutex_);
      families.reserve(families_.size());
      for (const auto& [name, family] : families_) families.push_back(family.get());
    }
    // Families are never removed, so they are serialized without the
    // registry lock: a slow collector does not block registration.
    std::string text;
    for (const FamilyBase* family : families) family->AppendTo(&text);
    return text;
  }

 private:
  template <typename F>
  F& Add(Definition definition) {
    Validate(definition);
    std::lock_guard lock(mutex_);
    auto it = families_.find(definition.name);
    if (it != families_.end()) {
      if (it->second->definition() == definition) return static_cast<F&>(*it->second);
      Fail(absl::StrCat(definition.name, ": registered twice with different definitions"));
    }
    const bool unlabelled = definition.label_names.empty();
    auto family = std::make_unique<F>(std::move(definition));
    F& result = *family;
    Insert(std::move(family));
    // A family without labels has exactly one series: show it from the start
    // (at 0) rather than only after its first update.
    if (unlabelled) result.WithLabels({});
    return result;
  }

  // Requires mutex_.
  void Insert(std::unique_ptr<FamilyBase> family) {
    const Definition& definition = family->definition();
    for (const std::string& sample_name : definition.SampleNames()) {
      auto [it, inserted] = sample_names_.emplace(sample_name, definition.name);
      if (!inserted) {
        Fail(absl::StrCat(definition.name, ": sample name \"", sample_name,
                          "\" is already written by \"", it->second, "\""));
      }
    }
    families_.emplace(definition.name, std::move(family));
  }

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<FamilyBase>> families_;  // sorted by name
  std::map<std::string, std::string> sample_names_;              // sample name -> family name
};

}  // namespace

std::unique_ptr<Registry> CreateRegistry() { return std::make_unique<TextRegistry>(); }

}  // namespace dmlserve::metrics

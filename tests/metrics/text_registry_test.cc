#include "server/metrics/text_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/metrics/exposition_format.h"
#include "server/metrics/metrics.h"

namespace dmlserve::metrics {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    EXPECT_NE(end, std::string::npos) << "output must end with a newline";
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

TEST(TextRegistryTest, EmptyRegistrySerializesToNothing) {
  EXPECT_EQ(CreateRegistry()->Serialize(), "");
}

TEST(TextRegistryTest, UnlabelledCounterShowsZeroBeforeFirstIncrement) {
  auto registry = CreateRegistry();
  Counter& counter = registry->AddCounter("jobs_total", "Jobs run.", {}).WithLabels({});
  EXPECT_THAT(
      Lines(registry->Serialize()),
      ElementsAre("# HELP jobs_total Jobs run.", "# TYPE jobs_total counter", "jobs_total 0"));
  counter.Increment();
  counter.Increment(2.5);
  EXPECT_THAT(
      Lines(registry->Serialize()),
      ElementsAre("# HELP jobs_total Jobs run.", "# TYPE jobs_total counter", "jobs_total 3.5"));
}

TEST(TextRegistryTest, CounterIgnoresNegativeAndNaNAmounts) {
  auto registry = CreateRegistry();
  Counter& counter = registry->AddCounter("jobs_total", "Jobs run.", {}).WithLabels({});
  counter.Increment(4);
  counter.Increment(-1);
  counter.Increment(std::numeric_limits<double>::quiet_NaN());
  EXPECT_THAT(registry->Serialize(), HasSubstr("\njobs_total 4\n"));
}

TEST(TextRegistryTest, LabelledCounterChildrenSortedByLabelValues) {
  auto registry = CreateRegistry();
  Family<Counter>& family =
      registry->AddCounter("requests_total", "Requests by outcome.", {"operator", "code"});
  EXPECT_EQ(registry->Serialize(), "") << "a labelled family appears with its first child";
  family.WithLabels({"cumulative_sum", "OK"}).Increment(3);
  family.WithLabels({"cumulative_product", "OK"}).Increment();
  family.WithLabels({"cumulative_sum", "INVALID_ARGUMENT"}).Increment(2);
  EXPECT_THAT(
      Lines(registry->Serialize()),
      ElementsAre("# HELP requests_total Requests by outcome.", "# TYPE requests_total counter",
                  "requests_total{operator=\"cumulative_product\",code=\"OK\"} 1",
                  "requests_total{operator=\"cumulative_sum\",code=\"INVALID_ARGUMENT\"} 2",
                  "requests_total{operator=\"cumulative_sum\",code=\"OK\"} 3"));
}

TEST(TextRegistryTest, WithLabelsReturnsTheSameChild) {
  auto registry = CreateRegistry();
  Family<Counter>& family = registry->AddCounter("hits_total", "Hits.", {"path"});
  Counter& first = family.WithLabels({"/a"});
  EXPECT_EQ(&first, &family.WithLabels({"/a"}));
  EXPECT_NE(&first, &family.WithLabels({"/b"}));
}

TEST(TextRegistryTest, GaugeSetIncrementDecrement) {
  auto registry = CreateRegistry();
  Family<Gauge>& family = registry->AddGauge("queue_depth", "Queued jobs.", {"device"});
  Gauge& cpu = family.WithLabels({"cpu:0"});
  Gauge& gpu = family.WithLabels({"d3d12:0"});
  cpu.Set(10);
  cpu.Increment();
  cpu.Decrement(4);
  gpu.Decrement(0.5);
  EXPECT_THAT(
      Lines(registry->Serialize()),
      ElementsAre("# HELP queue_depth Queued jobs.", "# TYPE queue_depth gauge",
                  "queue_depth{device=\"cpu:0\"} 7", "queue_depth{device=\"d3d12:0\"} -0.5"));
  cpu.Set(std::numeric_limits<double>::infinity());
  gpu.Set(std::numeric_limits<double>::quiet_NaN());
  EXPECT_THAT(
      Lines(registry->Serialize()),
      ElementsAre("# HELP queue_depth Queued jobs.", "# TYPE queue_depth gauge",
                  "queue_depth{device=\"cpu:0\"} +Inf", "queue_depth{device=\"d3d12:0\"} NaN"));
}

TEST(TextRegistryTest, HistogramBucketsAreCumulativeAndUpperInclusive) {
  auto registry = CreateRegistry();
  Histogram& histogram =
      registry->AddHistogram("latency_seconds", "Latency.", {}, {0.1, 1, 10}).WithLabels({});
  EXPECT_THAT(
      Lines(registry->Serialize()),
      ElementsAre("# HELP latency_seconds Latency.", "# TYPE latency_seconds histogram",
                  "latency_seconds_bucket{le=\"0.1\"} 0", "latency_seconds_bucket{le=\"1\"} 0",
                  "latency_seconds_bucket{le=\"10\"} 0", "latency_seconds_bucket{le=\"+Inf\"} 0",
                  "latency_seconds_sum 0", "latency_seconds_count 0"));
  double sum = 0;
  for (double value : {0.05, 0.1, 0.5, 5.0, 50.0, 0.25}) {
    histogram.Observe(value);
    sum += value;
  }
  EXPECT_THAT(
      Lines(registry->Serialize()),
      ElementsAre("# HELP latency_seconds Latency.", "# TYPE latency_seconds histogram",
                  "latency_seconds_bucket{le=\"0.1\"} 2", "latency_seconds_bucket{le=\"1\"} 4",
                  "latency_seconds_bucket{le=\"10\"} 5", "latency_seconds_bucket{le=\"+Inf\"} 6",
                  "latency_seconds_sum " + FormatSampleValue(sum), "latency_seconds_count 6"));
}

TEST(TextRegistryTest, HistogramLabelsComeBeforeLe) {
  auto registry = CreateRegistry();
  Family<Histogram>& family =
      registry->AddHistogram("batch_size", "Jobs per batch.", {"operator"}, PowerOfTwoBuckets(4));
  family.WithLabels({"matmul"}).Observe(3);
  family.WithLabels({"cumsum"}).Observe(1);
  family.WithLabels({"cumsum"}).Observe(8);
  EXPECT_THAT(Lines(registry->Serialize()),
              ElementsAre("# HELP batch_size Jobs per batch.", "# TYPE batch_size histogram",
                          "batch_size_bucket{operator=\"cumsum\",le=\"1\"} 1",
                          "batch_size_bucket{operator=\"cumsum\",le=\"2\"} 1",
                          "batch_size_bucket{operator=\"cumsum\",le=\"4\"} 1",
                          "batch_size_bucket{operator=\"cumsum\",le=\"+Inf\"} 2",
                          "batch_size_sum{operator=\"cumsum\"} 9",
                          "batch_size_count{operator=\"cumsum\"} 2",
                          "batch_size_bucket{operator=\"matmul\",le=\"1\"} 0",
                          "batch_size_bucket{operator=\"matmul\",le=\"2\"} 0",
                          "batch_size_bucket{operator=\"matmul\",le=\"4\"} 1",
                          "batch_size_bucket{operator=\"matmul\",le=\"+Inf\"} 1",
                          "batch_size_sum{operator=\"matmul\"} 3",
                          "batch_size_count{operator=\"matmul\"} 1"));
}

TEST(TextRegistryTest, HistogramExplicitInfBoundIsImplied) {
  auto registry = CreateRegistry();
  Histogram& histogram = registry
                             ->AddHistogram("size_bytes", "Sizes.", {},
                                            {1024, std::numeric_limits<double>::infinity()})
                             .WithLabels({});
  histogram.Observe(std::numeric_limits<double>::quiet_NaN());
  histogram.Observe(1e9);
  EXPECT_THAT(Lines(registry->Serialize()),
              ElementsAre("# HELP size_bytes Sizes.", "# TYPE size_bytes histogram",
                          "size_bytes_bucket{le=\"1024\"} 0", "size_bytes_bucket{le=\"+Inf\"} 2",
                          "size_bytes_sum NaN", "size_bytes_count 2"));
}

TEST(TextRegistryTest, HistogramBucketLabelsUseSampleValueFormat) {
  auto registry = CreateRegistry();
  registry->AddHistogram("d_seconds", "D.", {}, LatencyBuckets()).WithLabels({});
  const std::string text = registry->Serialize();
  EXPECT_THAT(text, HasSubstr("d_seconds_bucket{le=\"5e-05\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("d_seconds_bucket{le=\"0.0025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("d_seconds_bucket{le=\"10\"} 0\n"));
}

TEST(TextRegistryTest, EscapesHelpAndLabelValues) {
  auto registry = CreateRegistry();
  registry->AddGauge("info", "Line one\nback\\slash \"quoted\"", {"path"})
      .WithLabels({"C:\\tmp\n\"x\""})
      .Set(1);
  EXPECT_THAT(Lines(registry->Serialize()),
              ElementsAre("# HELP info Line one\\nback\\\\slash \"quoted\"", "# TYPE info gauge",
                          "info{path=\"C:\\\\tmp\\n\\\"x\\\"\"} 1"));
}

TEST(TextRegistryTest, FamiliesSortedByName) {
  auto registry = CreateRegistry();
  registry->AddGauge("zeta", "Z.", {});
  registry->AddCounter("alpha_total", "A.", {});
  registry->AddHistogram("mid_seconds", "M.", {}, {1});
  const std::string text = registry->Serialize();
  const size_t alpha = text.find("# HELP alpha_total");
  const size_t mid = text.find("# HELP mid_seconds");
  const size_t zeta = text.find("# HELP zeta");
  ASSERT_NE(alpha, std::string::npos);
  ASSERT_NE(mid, std::string::npos);
  ASSERT_NE(zeta, std::string::npos);
  EXPECT_LT(alpha, mid);
  EXPECT_LT(mid, zeta);
}

TEST(TextRegistryTest, CallbackGaugeCollectsAtEveryScrape) {
  auto registry = CreateRegistry();
  double memory = 1024;
  int calls = 0;
  registry->AddCallbackGauge("device_memory_bytes", "Device memory in use.", {"device"}, [&] {
    ++calls;
    return std::vector<std::pair<LabelValues, double>>{{{"d3d12:0"}, memory * 2},
                                                       {{"cpu:0"}, memory}};
  });
  EXPECT_EQ(calls, 0);
  EXPECT_THAT(
      Lines(registry->Serialize()),
      ElementsAre("# HELP device_memory_bytes Device memory in use.",
                  "# TYPE device_memory_bytes gauge", "device_memory_bytes{device=\"cpu:0\"} 1024",
                  "device_memory_bytes{device=\"d3d12:0\"} 2048"));
  memory = 4096;
  EXPECT_THAT(registry->Serialize(), HasSubstr("device_memory_bytes{device=\"cpu:0\"} 4096\n"));
  EXPECT_EQ(calls, 2);
}

TEST(TextRegistryTest, CallbackGaugeDropsMalformedAndRepeatedSamples) {
  auto registry = CreateRegistry();
  registry->AddCallbackGauge("g", "G.", {"a"}, [] {
    return std::vector<std::pair<LabelValues, double>>{
        {{"x"}, 1}, {{"y", "extra"}, 2}, {{}, 3}, {{"x"}, 4}};
  });
  EXPECT_THAT(Lines(registry->Serialize()),
              ElementsAre("# HELP g G.", "# TYPE g gauge", "g{a=\"x\"} 4"));
}

TEST(TextRegistryTest, CallbackGaugeWithoutSamplesIsOmitted) {
  auto registry = CreateRegistry();
  registry->AddCallbackGauge("g", "G.", {},
                             [] { return std::vector<std::pair<LabelValues, double>>{}; });
  EXPECT_EQ(registry->Serialize(), "");
}

TEST(TextRegistryTest, IdenticalRegistrationReturnsTheExistingFamily) {
  auto registry = CreateRegistry();
  Family<Counter>& first = registry->AddCounter("c_total", "C.", {"a"});
  first.WithLabels({"x"}).Increment(5);
  Family<Counter>& second = registry->AddCounter("c_total", "C.", {"a"});
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(&first.WithLabels({"x"}), &second.WithLabels({"x"}));
  Family<Histogram>& h1 = registry->AddHistogram("h", "H.", {}, {1, 2});
  EXPECT_EQ(&h1, &registry->AddHistogram("h", "H.", {}, {1, 2}));
  EXPECT_THAT(registry->Serialize(), HasSubstr("c_total{a=\"x\"} 5\n"));
}

// Misuse aborts with a message naming the problem.
using TextRegistryDeathTest = ::testing::Test;

TEST_F(TextRegistryDeathTest, InvalidNamesAbort) {
  EXPECT_DEATH(CreateRegistry()->AddCounter("1st_total", "x", {}), "invalid metric name");
  EXPECT_DEATH(CreateRegistry()->AddGauge("a-b", "x", {}), "invalid metric name");
  EXPECT_DEATH(CreateRegistry()->AddGauge("g", "x", {"__reserved"}), "invalid label name");
  EXPECT_DEATH(CreateRegistry()->AddGauge("g", "x", {"a:b"}), "invalid label name");
  EXPECT_DEATH(CreateRegistry()->AddGauge("g", "x", {"a", "a"}), "repeated");
  EXPECT_DEATH(CreateRegistry()->AddHistogram("h", "x", {"le"}, {1}), "reserved");
  EXPECT_DEATH(CreateRegistry()->AddCallbackGauge(
                   "g", "x", {"0"}, [] { return std::vector<std::pair<LabelValues, double>>{}; }),
               "invalid label name");
}

TEST_F(TextRegistryDeathTest, BadBucketsAbort) {
  EXPECT_DEATH(CreateRegistry()->AddHistogram("h", "x", {}, {1, 1}), "strictly increasing");
  EXPECT_DEATH(CreateRegistry()->AddHistogram("h", "x", {}, {2, 1}), "strictly increasing");
  EXPECT_DEATH(CreateRegistry()->AddHistogram("h", "x", {}, {std::nan("")}), "strictly increasing");
}

TEST_F(TextRegistryDeathTest, WrongLabelCountAborts) {
  auto registry = CreateRegistry();
  Family<Counter>& family = registry->AddCounter("c_total", "C.", {"a", "b"});
  EXPECT_DEATH(family.WithLabels({"x"}), "1 label values for 2 labels");
}

TEST_F(TextRegistryDeathTest, ConflictingRegistrationAborts) {
  auto registry = CreateRegistry();
  registry->AddCounter("c_total", "C.", {"a"});
  registry->AddHistogram("h", "H.", {}, {1});
  const auto collector = [] { return std::vector<std::pair<LabelValues, double>>{}; };
  registry->AddCallbackGauge("cb", "CB.", {}, collector);
  EXPECT_DEATH(registry->AddCounter("c_total", "Other help.", {"a"}), "different definitions");
  EXPECT_DEATH(registry->AddCounter("c_total", "C.", {"b"}), "different definitions");
  EXPECT_DEATH(registry->AddGauge("c_total", "C.", {"a"}), "different definitions");
  EXPECT_DEATH(registry->AddHistogram("h", "H.", {}, {2}), "different definitions");
  EXPECT_DEATH(registry->AddGauge("h_count", "X.", {}), "already written by \"h\"");
  EXPECT_DEATH(registry->AddCallbackGauge("cb", "CB.", {}, collector), "registered twice");
  EXPECT_DEATH(registry->AddGauge("cb", "CB.", {}), "different definitions");
}

TEST(TextRegistryTest, ConcurrentUpdatesAreNotLost) {
  constexpr int kThreads = 8;
  constexpr int kIterations = 100000;
  auto registry = CreateRegistry();
  Family<Counter>& counters = registry->AddCounter("ops_total", "Ops.", {"thread_group"});
  Gauge& gauge = registry->AddGauge("level", "Level.", {}).WithLabels({});
  Histogram& histogram = registry->AddHistogram("v", "V.", {}, {1, 2}).WithLabels({});
  Family<Gauge>& created = registry->AddGauge("created", "Children made under contention.", {"i"});

  std::atomic<bool> done{false};
  // Scrapes and child creation race with the updates.
  std::thread scraper([&] {
    while (!done.load()) EXPECT_FALSE(registry->Serialize().empty());
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Counter& shared = counters.WithLabels({"all"});
      for (int i = 0; i < kIterations; ++i) {
        shared.Increment();
        counters.WithLabels({t % 2 == 0 ? "even" : "odd"}).Increment(0.5);
        gauge.Increment(2);
        gauge.Decrement();
        histogram.Observe(i % 3 == 0 ? 0.5 : 1.5);
        if (i % 1000 == 0) created.WithLabels({std::to_string(i / 1000)}).Increment();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  done = true;
  scraper.join();

  const std::string text = registry->Serialize();
  const int total = kThreads * kIterations;
  EXPECT_THAT(text, HasSubstr("ops_total{thread_group=\"all\"} " + std::to_string(total) + "\n"));
  EXPECT_THAT(text,
              HasSubstr("ops_total{thread_group=\"even\"} " + std::to_string(total / 4) + "\n"));
  EXPECT_THAT(text,
              HasSubstr("ops_total{thread_group=\"odd\"} " + std::to_string(total / 4) + "\n"));
  EXPECT_THAT(text, HasSubstr("\nlevel " + std::to_string(total) + "\n"));
  int below_one = 0;
  for (int i = 0; i < kIterations; ++i) below_one += i % 3 == 0;
  below_one *= kThreads;
  EXPECT_THAT(text, HasSubstr("v_bucket{le=\"1\"} " + std::to_string(below_one) + "\n"));
  EXPECT_THAT(text, HasSubstr("v_bucket{le=\"2\"} " + std::to_string(total) + "\n"));
  EXPECT_THAT(text, HasSubstr("v_count " + std::to_string(total) + "\n"));
  const double sum = below_one * 0.5 + (total - below_one) * 1.5;  // exact in binary
  EXPECT_THAT(text, HasSubstr("v_sum " + std::to_string(static_cast<long long>(sum)) + "\n"));
  for (int i = 0; i < kIterations / 1000; ++i) {
    EXPECT_THAT(text, HasSubstr("created{i=\"" + std::to_string(i) + "\"} " +
                                std::to_string(kThreads) + "\n"));
  }
}

TEST(BucketsTest, LatencyBucketsSpan50MicrosecondsTo10Seconds) {
  const std::vector<double> buckets = LatencyBuckets();
  ASSERT_FALSE(buckets.empty());
  EXPECT_EQ(buckets.front(), 50e-6);
  EXPECT_EQ(buckets.back(), 10);
  for (size_t i = 1; i < buckets.size(); ++i) EXPECT_LT(buckets[i - 1], buckets[i]);
}

TEST(BucketsTest, PowerOfTwoBuckets) {
  EXPECT_THAT(PowerOfTwoBuckets(64), ElementsAre(1, 2, 4, 8, 16, 32, 64));
  EXPECT_THAT(PowerOfTwoBuckets(48), ElementsAre(1, 2, 4, 8, 16, 32));
  EXPECT_THAT(PowerOfTwoBuckets(1), ElementsAre(1));
  EXPECT_THAT(PowerOfTwoBuckets(0.5), ElementsAre());
}

}  // namespace
}  // namespace dmlserve::metrics

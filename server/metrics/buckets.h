#ifndef DMLSERVE_SERVER_METRICS_BUCKETS_H_
#define DMLSERVE_SERVER_METRICS_BUCKETS_H_

// Histogram bucket boundaries shared by the service's histograms.

#include "prometheus/histogram.h"

namespace dmlserve::metrics {

// Latency buckets in seconds, 50 µs to 10 s (+Inf is implied).
prometheus::Histogram::BucketBoundaries LatencyBuckets();
// Powers of two 1..max (batch sizes).
prometheus::Histogram::BucketBoundaries PowerOfTwoBuckets(double max);

}  // namespace dmlserve::metrics

#endif  // DMLSERVE_SERVER_METRICS_BUCKETS_H_

#include "server/metrics/buckets.h"

namespace dmlserve::metrics {

prometheus::Histogram::BucketBoundaries LatencyBuckets() {
  // 1-2.5-5 steps: fine enough for histogram_quantile to resolve CPU kernels
  // of tens of microseconds as well as multi-second batches under load.
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
}

prometheus::Histogram::BucketBoundaries PowerOfTwoBuckets(double max) {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double bound = 1; bound <= max; bound *= 2) buckets.push_back(bound);
  return buckets;
}

}  // namespace dmlserve::metrics

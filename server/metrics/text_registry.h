#ifndef DMLSERVE_SERVER_METRICS_TEXT_REGISTRY_H_
#define DMLSERVE_SERVER_METRICS_TEXT_REGISTRY_H_

// The built-in Registry: in-process counters, gauges and histograms serialized
// in the Prometheus text exposition format 0.0.4.
//
// Thread-safe. Recording is lock-free (atomics); only creating a new child
// (first use of a label combination) and Serialize take locks. Invalid names,
// a label count that does not match the family, or registering one name twice
// with a different definition are programming errors: the process aborts with
// a message on stderr. Registering an identical definition again returns the
// existing family.

#include <memory>

#include "server/metrics/metrics.h"

namespace dmlserve::metrics {

std::unique_ptr<Registry> CreateRegistry();

}  // namespace dmlserve::metrics

#endif  // DMLSERVE_SERVER_METRICS_TEXT_REGISTRY_H_

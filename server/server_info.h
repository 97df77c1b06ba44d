#ifndef DMLSERVE_SERVER_SERVER_INFO_H_
#define DMLSERVE_SERVER_SERVER_INFO_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "scheduler/scheduler.h"
#include "server/backend_devices.h"
#include "server/tensor_registry.h"

namespace dmlserve {

// GetServerInfo's answer: version, backends and devices in use (with their
// health), limits, and the operators with the data types each accepts.
v1::GetServerInfoResponse BuildServerInfo(absl::string_view version, uint64_t max_request_bytes,
                                          const std::vector<AdapterReport>& adapters,
                                          const Scheduler& scheduler,
                                          const TensorRegistry& tensors);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_SERVER_INFO_H_

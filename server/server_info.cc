#include "server/server_info.h"

#include <string>

#include "absl/algorithm/container.h"
#include "absl/time/time.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve {

v1::GetServerInfoResponse BuildServerInfo(absl::string_view version, uint64_t max_request_bytes,
                                          const std::vector<AdapterReport>& adapters,
                                          const Scheduler& scheduler,
                                          const TensorRegistry& tensors) {
  v1::GetServerInfoResponse info;
  info.set_version(std::string(version));
  for (const DeviceStatus& device : scheduler.devices()) {
    v1::DeviceInfo* proto = info.add_devices();
    proto->set_name(device.description.name);
    proto->set_backend(device.description.backend);
    proto->set_description(device.description.description);
    proto->set_software(device.description.software);
    proto->set_healthy(device.healthy);
    proto->set_fallback(device.fallback);
    if (!absl::c_linear_search(info.backends(), device.description.backend)) {
      info.add_backends(device.description.backend);
    }
  }

  const SchedulerOptions& options = scheduler.options();
  v1::ServerLimits* limits = info.mutable_limits();
  limits->set_max_request_bytes(max_request_bytes);
  limits->set_max_registered_tensor_bytes(tensors.max_total_bytes());
  limits->set_max_registered_tensors(static_cast<uint32_t>(tensors.max_tensors()));
  limits->set_max_queue(options.max_queue);
  limits->set_max_batch_size(options.batch.max_batch_size);
  limits->set_max_batch_bytes(options.batch.max_batch_bytes);
  limits->set_max_queue_delay_us(absl::ToInt64Microseconds(options.batch.max_queue_delay));
  limits->set_max_dimensions(kMaxDimensions);

  for (int i = 0; i < kOperatorKindCount; ++i) {
    const auto kind = static_cast<OperatorKind>(i);
    v1::OperatorSupport* support = info.add_operators();
    support->set_name(std::string(OperatorName(kind)));
    for (DataType type : SupportedDataTypes(kind)) {
      support->add_data_types(static_cast<v1::DataType>(type));
    }
  }
  info.set_registered_tensor_bytes(tensors.total_bytes());
  for (const AdapterReport& adapter : adapters) {
    v1::AdapterInfo* proto = info.add_adapters();
    proto->set_index(adapter.index);
    proto->set_name(adapter.name);
    proto->set_software(adapter.software);
    proto->set_used(adapter.used);
    proto->set_vendor_id(adapter.vendor_id);
    proto->set_device_id(adapter.device_id);
  }
  return info;
}

}  // namespace dmlserve

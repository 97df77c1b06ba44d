#include "server/response_encoder.h"

#include <utility>

#include "absl/time/time.h"
#include "server/duration_seconds.h"

namespace dmlserve {

void EncodeTensor(Tensor tensor, v1::Tensor* proto) {
  proto->set_data_type(static_cast<v1::DataType>(tensor.data_type));
  proto->mutable_sizes()->Assign(tensor.sizes.begin(), tensor.sizes.end());
  if (tensor.bytes == nullptr) {
    proto->clear_data();
  } else if (tensor.bytes.use_count() == 1 && tensor.bytes->adopted()) {
    // Nobody else holds the string: hand it over without a copy.
    proto->set_data(tensor.bytes->ReleaseString());
  } else {
    // Shared, or pooled storage (which goes back to the pool): copy.
    proto->set_data(tensor.bytes->data(), tensor.bytes->size());
  }
}

void EncodeExecutionInfo(const ExecutionInfo& info, v1::ExecutionInfo* proto) {
  proto->set_device(info.device.data(), info.device.size());
  proto->set_batch_size(info.batch_size);
  proto->set_queue_seconds(DurationSeconds(info.queue_duration));
  proto->set_compute_seconds(DurationSeconds(info.compute_duration));
}

void EncodeJobOutput(JobResult result, v1::ExecuteResponse* response) {
  EncodeTensor(std::move(result.output), response->mutable_output());
  EncodeExecutionInfo(result.info, response->mutable_info());
}

}  // namespace dmlserve

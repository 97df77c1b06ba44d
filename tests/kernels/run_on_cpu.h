#ifndef DMLSERVE_TESTS_KERNELS_RUN_ON_CPU_H_
#define DMLSERVE_TESTS_KERNELS_RUN_ON_CPU_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/cpu_device.h"

namespace dmlserve {

// Runs operations as one batch on a CpuDevice and returns their outputs.
// `operations` stay intact: the batch runs on copies sharing their inputs (the
// device scans an input nobody else holds in place).
inline absl::StatusOr<std::vector<Tensor>> RunBatchOnCpu(const std::vector<Operation>& operations) {
  static CpuDevice* device = new CpuDevice(0);
  const std::vector<Operation> batch = operations;
  std::vector<WorkItem> items(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) items[i].operation = &batch[i];
  if (absl::Status status = device->Execute(absl::MakeSpan(items)); !status.ok()) return status;
  std::vector<Tensor> outputs;
  for (WorkItem& item : items) {
    if (!item.status.ok()) return item.status;
    outputs.push_back(std::move(item.output));
  }
  return outputs;
}

inline absl::StatusOr<Tensor> RunOnCpu(const Operation& operation) {
  absl::StatusOr<std::vector<Tensor>> outputs = RunBatchOnCpu({operation});
  if (!outputs.ok()) return outputs.status();
  return std::move(outputs->front());
}

}  // namespace dmlserve

#endif  // DMLSERVE_TESTS_KERNELS_RUN_ON_CPU_H_

#ifndef DMLSERVE_KERNELS_CPU_CPU_DEVICE_H_
#define DMLSERVE_KERNELS_CPU_CPU_DEVICE_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/backend/device.h"
#include "kernels/cpu/packed_b.h"

namespace dmlserve {

// The embedded CPU backend: runs batches with the kernels in kernels/cpu on
// the process-wide ParallelFor pool. Scans run item by item (each one is
// parallel inside); matrix multiplies sharing one B are fused into a single
// product. Registered B tensors stay packed in a PackedBCache (shared by all
// CPU devices of a process), so repeated multiplies by the same weights skip
// packing.
class CpuDevice : public Device {
 public:
  // Packed registered B tensors kept, by default.
  static constexpr uint64_t kDefaultPackedCacheBytes = uint64_t{1} << 30;

  explicit CpuDevice(int index, std::shared_ptr<PackedBCache> cache = nullptr);

  const DeviceDescription& description() const override { return description_; }
  absl::Status Execute(absl::Span<WorkItem> items) override;
  // A few microseconds of work on one core (see kCallerThread* in the .cc).
  bool MayRunOnCallerThread(const Operation& operation) const override;
  // A few rows against a B larger than a core's L2: alone, a row streams all
  // of B from memory (about 10 us for 1 MiB) for ~1.5 us of arithmetic.
  int PreferredCompany(const Operation& operation) const override;
  // Each batch already uses every core; two in flight overlap one batch's
  // allocation and tail with the next one's work.
  int max_inflight_batches() const override { return 2; }
  bool IsResident(absl::string_view registered_id) const override;
  void Evict(absl::string_view registered_id) override;
  uint64_t memory_bytes() const override;
  uint64_t resident_bytes() const override;

 private:
  DeviceDescription description_;
  std::shared_ptr<PackedBCache> cache_;
};

// `count` CPU devices ("cpu:0", "cpu:1", ...), sharing one thread pool and
// one packed-B cache.
std::vector<std::unique_ptr<Device>> CreateCpuDevices(int count);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_CPU_DEVICE_H_

#ifndef DMLSERVE_KERNELS_D3D12_FAULT_INJECTION_H_
#define DMLSERVE_KERNELS_D3D12_FAULT_INJECTION_H_

// A switch that makes a device fail as a removed one does, so the
// scheduler's recovery (re-queue on other devices, count the removal) can be
// tested without pulling a GPU out of its slot.
//
// With fail_after_batches = N >= 0, the device's first N batches run normally
// and batch N+1 fails at submission with DXGI_ERROR_DEVICE_REMOVED; the
// device is lost from then on. The environment variable
// DMLSERVE_D3D12_FAIL_AFTER_BATCHES sets N when the option does not.

#include <atomic>
#include <cstdint>

namespace dmlserve::d3d12 {

inline constexpr char kFailAfterBatchesEnv[] = "DMLSERVE_D3D12_FAIL_AFTER_BATCHES";

// Off whatever the environment says: a device recreated after a failure
// (the injected fault stands for one removal, not a broken adapter).
inline constexpr int kFaultInjectionOff = -2;

// `option` if >= 0, -1 (off) for kFaultInjectionOff, else the environment
// variable's value, else -1.
int ResolveFailAfterBatches(int option);

class FaultInjector {
 public:
  explicit FaultInjector(int fail_after_batches) : fail_after_batches_(fail_after_batches) {}

  // Called once per batch, just before it is submitted: true when this batch
  // must fail as if the device had been removed.
  bool ShouldFailSubmission() {
    if (fail_after_batches_ < 0) return false;
    return submissions_.fetch_add(1, std::memory_order_relaxed) >=
           static_cast<uint64_t>(fail_after_batches_);
  }

 private:
  const int fail_after_batches_;
  std::atomic<uint64_t> submissions_{0};
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_FAULT_INJECTION_H_

#ifndef DMLSERVE_BENCH_D3D12_COMMAND_RECORDER_H_
#define DMLSERVE_BENCH_D3D12_COMMAND_RECORDER_H_

// Counts what the D3D12 runtime records into its command lists, for the
// kernel report (d3d12_report.cc, figure P4): a proxy
// ID3D12GraphicsCommandList that forwards every call to the real list and
// counts copies by direction, barrier calls, dispatches and root views on
// the way.
// Installed through RuntimeOptions::wrap_command_list, so the runtime runs
// its own code path unchanged; only the object it records into is ours.
//
// A copy is "in" when its source lives in an UPLOAD heap and "out" when its
// destination lives in a READBACK heap (ID3D12Resource::GetHeapProperties):
// that is, a copy through host-visible staging, each byte of which the CPU
// wrote before (in) or reads after (out). Every other copy is on the device.

#include <cstdint>
#include <memory>
#include <mutex>

#include "kernels/d3d12/command_ring.h"
#include "kernels/d3d12/d3d12_api.h"

namespace dmlserve::bench {

struct RecordedCommands {
  uint64_t copies_in = 0;         // CopyBufferRegion from an upload heap
  uint64_t copies_out = 0;        // CopyBufferRegion into a readback heap
  uint64_t copies_on_device = 0;  // every other copy call (CopyResource included)
  uint64_t bytes_in = 0;          // bytes of the copies in
  uint64_t bytes_out = 0;         // bytes of the copies out
  uint64_t barrier_calls = 0;     // ResourceBarrier calls
  uint64_t barriers = 0;          // barriers in those calls
  uint64_t dispatches = 0;
  // SetComputeRootShaderResourceView / UnorderedAccessView calls: vkd3d 1.2
  // creates (and at the allocator's reset destroys) a Vulkan buffer view for
  // each, in the driver.
  uint64_t root_views = 0;
};

// Thread-safe: any number of lists may record into one recorder.
class CommandRecorder {
 public:
  // For RuntimeOptions::wrap_command_list: wraps each list in a proxy that
  // counts into this recorder. The recorder must outlive the runtime.
  d3d12::CommandListWrapper Wrapper();

  // What was recorded since the last Take(), and starts counting afresh.
  RecordedCommands Take();

 private:
  class Proxy;
  void CountCopy(ID3D12Resource* destination, ID3D12Resource* source, uint64_t bytes);
  void CountBarriers(uint32_t count);
  void CountDispatch();
  void CountRootView();

  std::mutex mutex_;
  RecordedCommands counts_;
};

}  // namespace dmlserve::bench

#endif  // DMLSERVE_BENCH_D3D12_COMMAND_RECORDER_H_

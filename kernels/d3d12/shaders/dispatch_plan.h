#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_DISPATCH_PLAN_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_DISPATCH_PLAN_H_

// The contract between the D3D12 kernels (what to dispatch) and the D3D12
// runtime (how to run it).
//
// A planner (scan_planner.h, quantized_matmul_planner.h) turns a batch of
// validated operations into a DispatchPlan: the buffers the batch needs and the
// dispatches to record, in order, into ONE command list. The runtime knows
// nothing about operators: it uploads the host buffers, creates or reuses the
// device buffers, binds each dispatch's root constants and root descriptors,
// records the dispatches with UAV barriers where asked, reads back the output
// buffers and hands the bytes to the planner's finisher.
//
// Every kernel uses the same root signature (kernel_abi.h): root constants at
// b0 and raw (ByteAddressBuffer) root SRVs t0..t3 and root UAVs u0..u1. Root
// descriptors rather than descriptor tables, because tables do not work under
// wine + lavapipe (see the spike's findings).

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/core/tensor.h"
#include "kernels/d3d12/shaders/kernel_abi.h"

namespace dmlserve::d3d12 {

using BufferId = uint32_t;

enum class BufferKind : uint8_t {
  kUpload,    // filled from `host_bytes` before the first dispatch
  kResident,  // a registered tensor's derived form (e.g. packed weights)
              // that the runtime keeps on the device, keyed by
              // `resident_key`; made by `make_resident_bytes` and uploaded
              // only when not yet resident
  kScratch,   // device-only, contents undefined at start
  kZeroed,    // device-only, zero-filled before the first dispatch
  kOutput,    // device-only; read back after the last dispatch
};

struct BufferSpec {
  BufferKind kind = BufferKind::kScratch;
  uint64_t size_bytes = 0;  // multiple of 4
  // kUpload: the bytes to upload (size_bytes of them). Shared so a planner
  // can point at a request's tensor without copying.
  std::shared_ptr<const Buffer> host_bytes;
  uint64_t host_offset = 0;
  // kResident: identity of the derived form, e.g. "w1/qmm-b-packed".
  std::string resident_key;
  // kResident: makes the form's bytes (at least size_bytes of them). The
  // runtime calls it only when the key is not resident on its device, on
  // the batch's thread while the batch runs (so it may refer to the batch's
  // requests): a batch that finds the form resident neither makes it nor
  // holds a host copy of it (a 256 MiB weight's host repack took longer
  // than its GEMV's whole batch).
  std::function<std::shared_ptr<const Buffer>()> make_resident_bytes;
};

// A buffer bound to a root SRV/UAV, starting `offset_bytes` into it (multiple
// of 4; root descriptors take a GPU virtual address, so sub-ranges are free).
struct BufferBinding {
  BufferId buffer = kUnbound;
  uint64_t offset_bytes = 0;
  static constexpr BufferId kUnbound = ~0u;
};

struct Dispatch {
  KernelKey kernel;
  std::array<uint32_t, kRootConstantCount> constants{};
  std::array<BufferBinding, kSrvCount> srvs;
  std::array<BufferBinding, kUavCount> uavs;
  uint32_t groups_x = 1, groups_y = 1, groups_z = 1;
  // A UAV barrier after this dispatch: a later dispatch reads what it wrote.
  bool barrier_after = false;
};

// The read-back contents of a batch's kOutput buffers, indexed by BufferId
// (null for the other kinds): large ones borrow the device's readback memory
// and small ones are pooled copies (kernels/core/buffer.h; plan_executor.cc
// says which), and a finisher can adopt a buffer as a tensor's bytes when the
// sizes agree.
using ReadBackBuffers = std::vector<std::shared_ptr<Buffer>>;

struct DispatchPlan {
  std::vector<BufferSpec> buffers;  // BufferId = index
  std::vector<Dispatch> dispatches;
  // Called with the read-back kOutput buffers; fills the batch's outputs.
  std::function<absl::Status(ReadBackBuffers& outputs)> finish;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_DISPATCH_PLAN_H_

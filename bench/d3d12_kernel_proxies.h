#ifndef DMLSERVE_BENCH_D3D12_KERNEL_PROXIES_H_
#define DMLSERVE_BENCH_D3D12_KERNEL_PROXIES_H_

// Static figures read from a kernel's DXBC, for the D3D12 kernel report
// (d3d12_report.cc): nothing here runs on a GPU. Both functions walk the
// instructions as kernels/dxbc's DisassembleInstructions decodes them, so
// they measure whatever the kernel builders emit today.

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/d3d12/shaders/kernel_abi.h"

namespace dmlserve::bench {

// One iteration of a kernel's innermost loop that holds multiply-adds (the K
// loop of a matrix multiply), per thread, each instruction weighted by the
// components it writes (an imad of .xyzw is 4).
struct InnerLoopWork {
  // Every instruction but memory access (ld_raw, store_raw, atomics) and flow
  // control (loop, if, breakc ...: they write nothing).
  int alu_components = 0;
  int mad_components = 0;        // imad, umad and mad among them
  int float_mad_components = 0;  // of which mad (float32 FMA)
  // Bytes loaded from buffers (t#, u#), not from groupshared memory (g#).
  int global_load_bytes = 0;
};

// NOT_FOUND when no loop holds a multiply-add; of several innermost ones,
// the one with the most multiply-add components.
absl::StatusOr<InnerLoopWork> MeasureInnerMadLoop(const std::vector<uint8_t>& dxbc);

// Where one thread's first load from a resource went.
struct LaneLoad {
  bool loaded = false;   // false: the thread never reached such a load
  uint32_t address = 0;  // byte offset into the resource
  uint32_t bytes = 0;    // 4 per component loaded
};

// Runs threads 0..lanes-1 (flattened) of group (0, 0, 0) of `dxbc` with the
// root constants `constants`, each on its own up to its first ld_raw from
// `resource` ("t0"), and returns what each loaded. Integer arithmetic and
// flow control are interpreted; loads from other resources and from
// groupshared memory read 0, stores are dropped. That is exact for address
// arithmetic that depends only on the thread and group IDs and the
// constants, which is how dmlserve's kernels address their buffers.
// UNIMPLEMENTED for an instruction the interpreter does not know.
absl::StatusOr<std::vector<LaneLoad>> SimulateFirstLoads(
    const std::vector<uint8_t>& dxbc,
    const std::array<uint32_t, d3d12::kRootConstantCount>& constants, uint32_t lanes,
    absl::string_view resource);

// Distinct `sector_bytes`-aligned sectors the loads touch together.
int DistinctSectors(const std::vector<LaneLoad>& loads, uint32_t sector_bytes);

}  // namespace dmlserve::bench

#endif  // DMLSERVE_BENCH_D3D12_KERNEL_PROXIES_H_

// The static proxies of the D3D12 kernel report (bench/d3d12_kernel_proxies.h)
// on small hand-assembled kernels and on two real scan passes whose
// addressing is known: no GPU involved.

#include <array>
#include <cstdint>
#include <vector>

#include "bench/d3d12_kernel_proxies.h"
#include "gtest/gtest.h"
#include "kernels/d3d12/shaders/kernel_abi.h"
#include "kernels/d3d12/shaders/kernel_assembler.h"
#include "kernels/d3d12/shaders/scan_kernels.h"

namespace dmlserve::bench {
namespace {

using d3d12::KernelAssembler;
using A = KernelAssembler;
using Constants = std::array<uint32_t, d3d12::kRootConstantCount>;

std::vector<uint8_t> Finish(KernelAssembler& a) {
  absl::StatusOr<std::vector<uint8_t>> blob = a.Finish();
  EXPECT_TRUE(blob.ok()) << blob.status();
  return blob.ok() ? *blob : std::vector<uint8_t>{};
}

// An outer loop around an inner one: the inner loop is the K loop, and only
// its body counts, each instruction by the components it writes.
TEST(ReportProxiesTest, InnerMadLoopCountsComponents) {
  KernelAssembler a;
  a.DeclareBindings(/*srvs=*/1, /*uavs=*/1);
  a.dcl_tgsm_raw(0, 64);
  a.dcl_thread_group(64, 1, 1);
  a.mov(A::r(0), A::l(0, 0, 0, 0));
  a.loop();
  a.iadd(A::r(1).x(), A::r(1).x(), A::l(1));  // outer loop: not counted
  a.loop();
  a.ld_raw(A::r(2).xyzw(), A::r(1).x(), A::t(0));          // 16 bytes from a buffer
  a.ld_raw(A::r(3).xy(), A::r(1).x(), A::g(0));            // groupshared: no bytes
  a.imad(A::r(0), A::r(2), A::r(3).sel("xxxx"), A::r(0));  // 4 multiply-adds
  a.iadd(A::r(4).xy(), A::r(4).xy(), A::l(1, 1, 1, 1));    // 2
  a.breakc_nz(A::r(4).x());
  a.endloop();
  a.breakc_nz(A::r(1).x());
  a.endloop();
  a.ret();
  absl::StatusOr<InnerLoopWork> work = MeasureInnerMadLoop(Finish(a));
  ASSERT_TRUE(work.ok()) << work.status();
  EXPECT_EQ(work->alu_components, 6);
  EXPECT_EQ(work->mad_components, 4);
  EXPECT_EQ(work->float_mad_components, 0);
  EXPECT_EQ(work->global_load_bytes, 16);
}

TEST(ReportProxiesTest, NoMadLoopIsNotFound) {
  KernelAssembler a;
  a.DeclareBindings(/*srvs=*/1, /*uavs=*/1);
  a.dcl_thread_group(64, 1, 1);
  a.loop();
  a.iadd(A::r(0).x(), A::r(0).x(), A::l(1));
  a.breakc_nz(A::r(0).x());
  a.endloop();
  a.ret();
  EXPECT_EQ(MeasureInnerMadLoop(Finish(a)).status().code(), absl::StatusCode::kNotFound);
}

// Loads of 32 lanes of `kernel` at t * (root constant c) for three strides.
void CheckStrides(const std::vector<uint8_t>& kernel, int c) {
  for (auto [stride, sectors] : {std::pair{4u, 4}, std::pair{64u, 32}, std::pair{0u, 1}}) {
    Constants constants{};
    constants[c] = stride;
    absl::StatusOr<std::vector<LaneLoad>> loads = SimulateFirstLoads(kernel, constants, 32, "t0");
    ASSERT_TRUE(loads.ok()) << loads.status();
    ASSERT_EQ(loads->size(), 32u);
    EXPECT_EQ((*loads)[5].address, 5 * stride);
    EXPECT_EQ((*loads)[5].bytes, 4u);
    EXPECT_EQ(DistinctSectors(*loads, 32), sectors) << "stride " << stride;
  }
}

// Thread t loads 4 bytes at t * (root constant c): 4 bytes apart is 4
// sectors per 32 threads, 64 bytes apart is 32. Constant 0 and the last one
// (cb0[0].x, and the last vector's last component).
TEST(ReportProxiesTest, SimulatedAddressesFollowTheConstants) {
  for (const int c : {0, d3d12::kRootConstantCount - 1}) {
    SCOPED_TRACE(::testing::Message() << "constant " << c);
    KernelAssembler a;
    a.DeclareBindings(/*srvs=*/1, /*uavs=*/1);
    a.dcl_input(A::vThreadIDInGroupFlattened());
    a.dcl_thread_group(64, 1, 1);
    a.imul(A::r(0).x(), A::vThreadIDInGroupFlattened().x(), A::Constant(c));
    a.ld_raw(A::r(1).x(), A::r(0).x(), A::t(0));
    a.ret();
    CheckStrides(Finish(a), c);
  }
}

// The real scan passes: the serial pass gives consecutive threads
// consecutive lines (for a strided axis, neighbouring elements), the line
// pass stages its tile so that consecutive threads load consecutive
// elements of one line.
TEST(ReportProxiesTest, ScanPassesAsTheyAddressToday) {
  d3d12::ScanKernelSpec spec;
  spec.pass = d3d12::ScanPass::kSerial;
  spec.threads = d3d12::kSerialThreads;
  absl::StatusOr<std::vector<uint8_t>> serial = d3d12::BuildScanKernel(spec);
  ASSERT_TRUE(serial.ok()) << serial.status();
  Constants constants{};
  constants[d3d12::kScanConstAxis] = 16;
  constants[d3d12::kScanConstInner] = 4096;
  constants[d3d12::kScanConstLines] = 4096;
  constants[d3d12::kConstGroupsX] = 64;
  constants[d3d12::kConstGroupCount] = 64;
  absl::StatusOr<std::vector<LaneLoad>> loads = SimulateFirstLoads(*serial, constants, 32, "t0");
  ASSERT_TRUE(loads.ok()) << loads.status();
  EXPECT_EQ(DistinctSectors(*loads, 32), 4);

  spec.pass = d3d12::ScanPass::kLine;
  spec.threads = 64;
  spec.per_thread = 16;
  absl::StatusOr<std::vector<uint8_t>> line = d3d12::BuildScanKernel(spec);
  ASSERT_TRUE(line.ok()) << line.status();
  constants[d3d12::kScanConstAxis] = 4096;
  constants[d3d12::kScanConstInner] = 1;
  constants[d3d12::kScanConstLines] = 64;
  constants[d3d12::kScanConstTiles] = 4;
  loads = SimulateFirstLoads(*line, constants, 32, "t0");
  ASSERT_TRUE(loads.ok()) << loads.status();
  // The tile is staged through groupshared memory: lane t loads tile
  // position t (it used to load its own 16 consecutive elements, 64 bytes
  // apart: 32 sectors).
  EXPECT_EQ((*loads)[3].address, 3u * 4);
  EXPECT_EQ(DistinctSectors(*loads, 32), 4);
}

}  // namespace
}  // namespace dmlserve::bench

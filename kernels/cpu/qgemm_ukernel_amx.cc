// Intel AMX micro-kernel (Sapphire Rapids and later): TDPBUSD multiplies a 16-row x 64-byte tile
// of A' by a 16 x 64-byte tile of B' into a 16 x 16 int32 tile, 16 Ki multiply-adds per
// instruction, about 8 times what VPDPBUSD on zmm does per cycle. The body, its blocking and its
// edges are in qgemm_ukernel_amx-inl.h, shared with the scalar model the tests run
// (qgemm_ukernel_amx_model.cc); this file issues the real instructions.
//
// The instructions are written as inline assembly, not intrinsics: GCC 12's _tile_loadd and
// _tile_stored pass the stride as `long`, 32 bits with mingw-w64, and the assembler rejects the
// resulting `(%rdx,%eax,1)` (see docs/cpu_kernels.md); the tile numbers are template arguments,
// printed into the instruction with the `c` operand modifier. Inline assembly needs no target
// attribute, so no code here is compiled for AMX beyond these instructions, which run only where
// CpuRunsIsa(kAmx) (cpu_features.cc, which also obtains the tile state from the OS).

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/core/check.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/qgemm_ukernel.h"

// GCC and Clang (Linux and mingw-w64). MSVC has no inline assembly on x64: its build has no
// AMX kernel.
#if DMLSERVE_X86 && defined(__GNUC__)
#define DMLSERVE_AMX_KERNEL 1
#else
#define DMLSERVE_AMX_KERNEL 0
#endif

namespace dmlserve {

#if DMLSERVE_AMX_KERNEL
namespace {

struct HardwareTiles {
  static void LoadConfig(const TileConfig& config) {
    __asm__ volatile("ldtilecfg %0" : : "m"(config) : "memory");
  }
  static void Release() { __asm__ volatile("tilerelease" : : : "memory"); }
  template <int kTile>
  static void Load(const void* base, size_t stride) {
    __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2"
                     :
                     : "r"(base), "r"(static_cast<uint64_t>(stride)), "i"(kTile)
                     : "memory");
  }
  template <int kTile>
  static void Store(void* base, size_t stride) {
    __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)"
                     :
                     : "r"(base), "r"(static_cast<uint64_t>(stride)), "i"(kTile)
                     : "memory");
  }
  template <int kTile>
  static void Zero() {
    __asm__ volatile("tilezero %%tmm%c0" : : "i"(kTile));
  }
  // AT&T order: tdpbusd b, a, c.
  template <int kC, int kA, int kB>
  static void DotBusd() {
    __asm__ volatile("tdpbusd %%tmm%c2, %%tmm%c1, %%tmm%c0" : : "i"(kC), "i"(kA), "i"(kB));
  }
  template <int kC, int kA, int kB>
  static void DotBssd() {
    __asm__ volatile("tdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0" : : "i"(kC), "i"(kA), "i"(kB));
  }
};

#include "kernels/cpu/qgemm_ukernel_amx-inl.h"

}  // namespace

const QGemmUkernel* AmxQGemmUkernel() {
  static AmxKernels<HardwareTiles>* const amx = [] {
    auto* kernels = new AmxKernels<HardwareTiles>("amx", "amx_signed_a", CpuIsa::kAmx);
    kernels->kernel.few_rows = Avx512VnniQGemmUkernel();
    kernels->kernel.min_rows = kQGemmAmxMinRows;
    return kernels;
  }();
  return &amx->kernel;
}

// The kernel prefetching kPrefetchSteps steps ahead, named `name`, with the
// amx level's few-rows kernel.
template <int kPrefetchSteps>
const QGemmUkernel* PrefetchingKernel(const char* name, const char* signed_a_name) {
  auto* kernels = new AmxKernels<HardwareTiles, kPrefetchSteps>(name, signed_a_name, CpuIsa::kAmx);
  kernels->kernel.few_rows = Avx512VnniQGemmUkernel();
  kernels->kernel.min_rows = kQGemmAmxMinRows;
  return &kernels->kernel;
}

const QGemmUkernel* AmxPrefetchQGemmUkernel() {
  static const QGemmUkernel* const amx =
      PrefetchingKernel<kAmxPrefetchSteps>("amx_prefetch", "amx_prefetch_signed_a");
  return amx;
}

const QGemmUkernel* AmxFarPrefetchQGemmUkernel() {
  static const QGemmUkernel* const amx =
      PrefetchingKernel<kAmxFarPrefetchSteps>("amx_prefetch8", "amx_prefetch8_signed_a");
  return amx;
}

#else

const QGemmUkernel* AmxQGemmUkernel() { return nullptr; }
const QGemmUkernel* AmxPrefetchQGemmUkernel() { return nullptr; }
const QGemmUkernel* AmxFarPrefetchQGemmUkernel() { return nullptr; }

#endif  // DMLSERVE_AMX_KERNEL

}  // namespace dmlserve

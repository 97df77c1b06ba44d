#ifndef DMLSERVE_KERNELS_CPU_CPU_FEATURES_H_
#define DMLSERVE_KERNELS_CPU_CPU_FEATURES_H_

// Which x86 instruction-set level the CPU kernels use: one decision for the
// whole process, shared by every kernel family, so that tests can force each
// path and a deployment can pin one.
//
// Levels are ordered; each includes everything below it:
//   kGeneric     portable C++ (whatever the compiler's baseline targets)
//   kAvx2        AVX2 + FMA + F16C
//   kAvxVnni     kAvx2 + AVX-VNNI (256-bit int8 dot products)
//   kAvx512Vnni  AVX-512 F/BW/DQ/VL + AVX512-VNNI (+ the F16C every such
//                CPU has; not AVX-VNNI, which Zen 4 lacks: see CpuRunsIsa)
//   kAmx         kAvx512Vnni + AMX-TILE and AMX-INT8, with the tile state
//                granted by the OS (Linux: asked for once, here, with
//                arch_prctl(ARCH_REQ_XCOMP_PERM); Windows: enabled by the OS
//                where it supports it, GetEnabledXStateFeatures). Refused,
//                the level is kAvx512Vnni and CpuIsaNote() says why.
// The scan kernels have two SIMD paths: 256-bit (used from kAvx2) and
// 512-bit (used at kAvx512Vnni; VNNI itself is not needed by scans, but no
// separate level is worth having for AVX-512 without VNNI).
//
// This file is the only place that reads the CPU's features (CPUID, XCR0);
// the kernels learn what they may run from here, through the tables of
// cpu_kernels.h.
//
// SelectedCpuIsa() is the best level this CPU supports, lowered by the
// environment variable DMLSERVE_CPU_ISA=generic|avx2|avxvnni|avx512vnni|amx
// (read once; a level above what the CPU supports, or an unknown name, is
// ignored and the best level is used). Thread-safe.

#include <optional>

#include "absl/strings/string_view.h"

namespace dmlserve {

enum class CpuIsa : int {
  kGeneric = 0,
  kAvx2 = 1,
  kAvxVnni = 2,
  kAvx512Vnni = 3,
  kAmx = 4,
};

// "generic", "avx2", "avxvnni", "avx512vnni", "amx".
absl::string_view CpuIsaName(CpuIsa isa);
std::optional<CpuIsa> ParseCpuIsa(absl::string_view name);

// The best level the CPU (and OS, for the register state) supports.
CpuIsa SupportedCpuIsa();

// Whether this CPU (and OS) runs code written for `isa`: SupportedCpuIsa()
// >= isa, except that kAvxVnni also needs AVX-VNNI itself (CPUID leaf 7
// subleaf 1, EAX bit 4), which a kAvx512Vnni CPU may lack (Zen 4).
// Read once, like SupportedCpuIsa().
bool CpuRunsIsa(CpuIsa isa);

// Empty, or why the CPU runs below what it has: the CPU has AMX but the OS
// did not grant the tile state ("AMX tiles present but the OS refused them
// (arch_prctl(ARCH_REQ_XCOMP_PERM): Operation not permitted); using
// avx512vnni"). For the start-up log and the device's description.
absl::string_view CpuIsaNote();

// The level kernels use: SupportedCpuIsa(), capped by DMLSERVE_CPU_ISA or by
// SetCpuIsaForTesting.
CpuIsa SelectedCpuIsa();

// Tests only: makes SelectedCpuIsa() return min(isa, SupportedCpuIsa()) (or
// the environment's choice again for std::nullopt). Not to be called while
// kernels run on other threads.
void SetCpuIsaForTesting(std::optional<CpuIsa> isa);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_CPU_FEATURES_H_

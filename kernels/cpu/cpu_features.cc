#include "kernels/cpu/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace dmlserve {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// CPUID bits GCC's __builtin_cpu_supports knows and clang 14's does not:
// F16C (leaf 1, ECX bit 29) and AVX-VNNI (leaf 7 subleaf 1, EAX bit 4). The
// wider register state they need is the AVX2 state checked below.
bool HasF16c() {
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
}
#endif

CpuIsa DetectCpuIsa() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the wider register
  // state (XCR0), so a "supported" level is usable.
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c())) {
    return CpuIsa::kGeneric;
  }
  const bool avx_vnni = CpuHasAvxVnni();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni")) {
    return CpuIsa::kAvx512Vnni;
  }
  return avx_vnni ? CpuIsa::kAvxVnni : CpuIsa::kAvx2;
#else
  return CpuIsa::kGeneric;
#endif
}

CpuIsa EnvironmentCpuIsa() {
  const CpuIsa supported = SupportedCpuIsa();
  if (const char* value = std::getenv("DMLSERVE_CPU_ISA")) {
    if (std::optional<CpuIsa> isa = ParseCpuIsa(value)) return std::min(*isa, supported);
  }
  return supported;
}

// -1: not forced.
std::atomic<int> forced_isa{-1};

}  // namespace

bool CpuHasAvxVnni() {
  // Read once: CPUID traps to the hypervisor in a VM (~10 us here), and the
  // request path asks on every matrix multiply.
  static const bool has_avx_vnni = [] {
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax, ebx, ecx, edx;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 4)) != 0;
#else
    return false;
#endif
  }();
  return has_avx_vnni;
}

absl::string_view CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric:
      return "generic";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvxVnni:
      return "avxvnni";
    case CpuIsa::kAvx512Vnni:
      return "avx512vnni";
  }
  return "generic";
}

std::optional<CpuIsa> ParseCpuIsa(absl::string_view name) {
  for (CpuIsa isa : {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvxVnni, CpuIsa::kAvx512Vnni}) {
    if (name == CpuIsaName(isa)) return isa;
  }
  return std::nullopt;
}

CpuIsa SupportedCpuIsa() {
  static const CpuIsa isa = DetectCpuIsa();
  return isa;
}

CpuIsa SelectedCpuIsa() {
  const int forced = forced_isa.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<CpuIsa>(forced);
  static const CpuIsa isa = EnvironmentCpuIsa();
  return isa;
}

void SetCpuIsaForTesting(std::optional<CpuIsa> isa) {
  forced_isa.store(isa ? static_cast<int>(std::min(*isa, SupportedCpuIsa())) : -1,
                   std::memory_order_relaxed);
}

}  // namespace dmlserve

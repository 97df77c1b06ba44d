#include "kernels/cpu/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/isa_portability.h"

#if DMLSERVE_X86
#if defined(_MSC_VER)
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#if defined(_WIN32)
// Not windows.h's min and max macros: std::min is used below.
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#elif defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#endif
#endif

namespace dmlserve {
namespace {

#if DMLSERVE_X86
// How CPUID and XGETBV are read differs by compiler (<cpuid.h> and inline
// assembly; <intrin.h> on MSVC), and GCC's __builtin_cpu_supports has no
// MSVC counterpart: features are read from CPUID directly, here only.

// Runs CPUID with EAX = leaf and ECX = subleaf and stores EAX, EBX, ECX, EDX
// in out[0..3]. Returns false, with out all zero, when the leaf is above the
// highest one the CPU reports for its range (basic, or 0x8000'0000 and up).
bool CpuidLeaf(unsigned leaf, unsigned subleaf, unsigned out[4]) {
#if defined(_MSC_VER)
  int regs[4];
  __cpuidex(regs, static_cast<int>(leaf & 0x80000000u), 0);
  const unsigned max_leaf = static_cast<unsigned>(regs[0]);
  if (max_leaf == 0 || max_leaf < leaf) {
    out[0] = out[1] = out[2] = out[3] = 0;
    return false;
  }
  __cpuidex(regs, static_cast<int>(leaf), static_cast<int>(subleaf));
  for (int i = 0; i < 4; ++i) out[i] = static_cast<unsigned>(regs[i]);
  return true;
#else
  if (__get_cpuid_count(leaf, subleaf, &out[0], &out[1], &out[2], &out[3]) == 0) {
    out[0] = out[1] = out[2] = out[3] = 0;
    return false;
  }
  return true;
#endif
}

// XCR0 (XGETBV with ECX = 0): the register state the OS saves on a context
// switch, so which registers a program may use. Only when CPUID leaf 1 ECX bit
// 27 (OSXSAVE) is set: XGETBV faults otherwise.
uint64_t ReadXcr0() {
#if defined(_MSC_VER)
  return _xgetbv(0);
#else
  // XGETBV spelled as its bytes: no target attribute ("xsave") is needed, and
  // assemblers that predate the mnemonic accept it.
  uint32_t eax, edx;
  __asm__ __volatile__(".byte 0x0f, 0x01, 0xd0" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
#endif
}

// CPUID and XCR0 bits (Intel SDM vol. 2A, CPUID; vol. 1, 13.3 for XCR0).
constexpr unsigned kLeaf1EcxFma = 1u << 12;
constexpr unsigned kLeaf1EcxOsxsave = 1u << 27;  // XGETBV usable
constexpr unsigned kLeaf1EcxF16c = 1u << 29;
constexpr unsigned kLeaf7EbxAvx2 = 1u << 5;
constexpr unsigned kLeaf7EbxAvx512f = 1u << 16;
constexpr unsigned kLeaf7EbxAvx512dq = 1u << 17;
constexpr unsigned kLeaf7EbxAvx512bw = 1u << 30;
constexpr unsigned kLeaf7EbxAvx512vl = 1u << 31;
constexpr unsigned kLeaf7EcxAvx512Vnni = 1u << 11;
constexpr unsigned kLeaf7Subleaf1EaxAvxVnni = 1u << 4;
constexpr unsigned kLeaf7EdxAmxTile = 1u << 24;
constexpr unsigned kLeaf7EdxAmxInt8 = 1u << 25;
// XCR0: SSE (XMM) and AVX (upper YMM) state; opmask, ZMM_Hi256 (upper ZMM0-15)
// and Hi16_ZMM (ZMM16-31) state.
constexpr uint64_t kXcr0Avx = (1u << 1) | (1u << 2);
constexpr uint64_t kXcr0Avx512 = (1u << 5) | (1u << 6) | (1u << 7);
// XTILECFG and XTILEDATA: the tile configuration and the 8 KiB of tile data.
constexpr int kXfeatureTileData = 18;
constexpr uint64_t kXcr0Amx = (uint64_t{1} << 17) | (uint64_t{1} << kXfeatureTileData);

constexpr int kEax = 0, kEbx = 1, kEcx = 2, kEdx = 3;

bool HasAll(unsigned value, unsigned bits) { return (value & bits) == bits; }
#endif

// Whether the CPU has AVX-VNNI (CPUID leaf 7 subleaf 1, EAX bit 4); the
// register state it needs is AVX2's, checked by the callers. Read once:
// CPUID traps to the hypervisor in a VM (~10 us here).
bool HasAvxVnni() {
  static const bool has_avx_vnni = [] {
#if DMLSERVE_X86
    unsigned leaf7_1[4];
    return CpuidLeaf(7, 1, leaf7_1) && HasAll(leaf7_1[kEax], kLeaf7Subleaf1EaxAvxVnni);
#else
    return false;
#endif
  }();
  return has_avx_vnni;
}

// Asks the OS for the tile state, which it saves only for processes that use
// it (8 KiB per thread). Empty when granted, else why not.
std::string RequestTileState() {
#if !DMLSERVE_X86
  return "not x86-64";
#elif defined(__linux__)
  // Linux 5.16 and later: a process asks once, for all its threads
  // (Documentation/arch/x86/xstate.rst).
  constexpr long kArchReqXcompPerm = 0x1023;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) == 0) return "";
  return absl::StrCat("arch_prctl(ARCH_REQ_XCOMP_PERM): ", std::strerror(errno));
#elif defined(_WIN32)
  // Windows enables the state for every process where it supports it
  // (Windows 11, Server 2022); GetEnabledXStateFeatures says whether it did.
  // Looked up at run time: older kernel32s lack it. (wine reports only AVX's
  // state, so there the kernels fall back to AVX-512.)
  using GetEnabledXStateFeaturesFn = DWORD64(WINAPI*)();
  const auto get_enabled = reinterpret_cast<GetEnabledXStateFeaturesFn>(reinterpret_cast<void*>(
      GetProcAddress(GetModuleHandleW(L"kernel32.dll"), "GetEnabledXStateFeatures")));
  if (get_enabled == nullptr) return "kernel32 has no GetEnabledXStateFeatures";
  if ((get_enabled() & kXcr0Amx) == kXcr0Amx) return "";
  return "GetEnabledXStateFeatures() lacks the tile state";
#else
  return "no way to ask this OS for the tile state";
#endif
}

struct Detected {
  CpuIsa isa = CpuIsa::kGeneric;
  std::string note;  // CpuIsaNote()
};

Detected DetectCpuIsa() {
#if DMLSERVE_X86
  // A feature is usable when the CPU has it and the OS saves the registers it
  // uses across context switches (XCR0).
  unsigned leaf1[4], leaf7[4];
  if (!CpuidLeaf(1, 0, leaf1) || !HasAll(leaf1[kEcx], kLeaf1EcxOsxsave)) return {};
  CpuidLeaf(7, 0, leaf7);  // all zero when absent
  const uint64_t xcr0 = ReadXcr0();
  if (!(HasAll(leaf7[kEbx], kLeaf7EbxAvx2) && HasAll(leaf1[kEcx], kLeaf1EcxFma | kLeaf1EcxF16c) &&
        (xcr0 & kXcr0Avx) == kXcr0Avx)) {
    return {};
  }
  if (!(HasAll(leaf7[kEbx],
               kLeaf7EbxAvx512f | kLeaf7EbxAvx512dq | kLeaf7EbxAvx512bw | kLeaf7EbxAvx512vl) &&
        HasAll(leaf7[kEcx], kLeaf7EcxAvx512Vnni) && (xcr0 & kXcr0Avx512) == kXcr0Avx512)) {
    return {HasAvxVnni() ? CpuIsa::kAvxVnni : CpuIsa::kAvx2, ""};
  }
  if (!HasAll(leaf7[kEdx], kLeaf7EdxAmxTile | kLeaf7EdxAmxInt8)) return {CpuIsa::kAvx512Vnni, ""};
  // XCR0 shows whether the OS supports the tile state at all; a process still
  // has to be granted it (Linux), or the OS may not enable it (Windows).
  std::string refused =
      (xcr0 & kXcr0Amx) == kXcr0Amx ? RequestTileState() : "XCR0 lacks the tile state";
  if (refused.empty()) return {CpuIsa::kAmx, ""};
  return {CpuIsa::kAvx512Vnni, absl::StrCat("AMX tiles present but the OS refused them (", refused,
                                            "); using avx512vnni")};
#else
  return {};
#endif
}

const Detected& Detection() {
  static const Detected* const detected = new Detected(DetectCpuIsa());
  return *detected;
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

bool CpuRunsIsa(CpuIsa isa) {
  if (isa > SupportedCpuIsa()) return false;
  return isa != CpuIsa::kAvxVnni || HasAvxVnni();
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
    case CpuIsa::kAmx:
      return "amx";
  }
  return "generic";
}

std::optional<CpuIsa> ParseCpuIsa(absl::string_view name) {
  for (CpuIsa isa :
       {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvxVnni, CpuIsa::kAvx512Vnni, CpuIsa::kAmx}) {
    if (name == CpuIsaName(isa)) return isa;
  }
  return std::nullopt;
}

CpuIsa SupportedCpuIsa() { return Detection().isa; }

absl::string_view CpuIsaNote() { return Detection().note; }

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

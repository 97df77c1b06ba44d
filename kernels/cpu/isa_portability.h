#ifndef DMLSERVE_KERNELS_CPU_ISA_PORTABILITY_H_
#define DMLSERVE_KERNELS_CPU_ISA_PORTABILITY_H_

// The one place where the CPU kernels meet the differences between GCC,
// Clang and MSVC in compiling x86 SIMD code and in reading CPU features. The
// kernel sources use only what is below, never a compiler's own spelling, so
// that they build unchanged with all three.
//
// Why: each kernel file holds functions for one ISA above the baseline the
// rest of the program is built for (AVX2, AVX-VNNI, AVX-512), and the CPU is
// checked at run time before any of them is called. The compilers disagree on
// how such a function is written:
//   - GCC needs the ISA on the function (its intrinsics refuse to inline into
//     code without it): `#pragma GCC target` over a region.
//   - Clang needs the same but ignores GCC's target pragma; it has
//     `#pragma clang attribute` instead. clang-cl (which also defines
//     _MSC_VER) is Clang here.
//   - MSVC compiles any intrinsic whatever /arch says, and has no per-function
//     target: the region needs nothing. (Nothing else in the region is built
//     for the higher ISA either, so no inline function compiled for AVX-512
//     can be merged into code that runs on an older CPU.)
// and on how CPUID and XGETBV are read (<cpuid.h> and inline assembly;
// <intrin.h> on MSVC). GCC's __builtin_cpu_supports has no MSVC counterpart,
// so features are read from CPUID directly (see cpu_features.cc).
//
// Contract:
//   DMLSERVE_X86                1 when compiling for x86-64 (GCC, Clang, MSVC;
//                               not ARM64EC, whose x64 emulation lacks AVX),
//                               else 0. Kernels for x86 ISAs, and the CPUID
//                               helpers below, exist only when it is 1.
//   DMLSERVE_ISA_BEGIN("f,g")   Opens a region of functions compiled for the
//   DMLSERVE_ISA_END            target features "f,g" (GCC/Clang spelling),
//                               closed by DMLSERVE_ISA_END at file scope in the
//                               same file. Regions do not nest. Functions in a
//                               region may run only on a CPU that has the
//                               features: callers check at run time.
//   DMLSERVE_IGNORE_UNINITIALIZED_BEGIN / _END
//                               Silence -Wuninitialized (and GCC's
//                               -Wmaybe-uninitialized) in between: GCC 12's
//                               AVX-512 headers pass _mm512_undefined_*() as
//                               the unused merge operand of unmasked
//                               intrinsics. Nothing on MSVC.
//   DMLSERVE_ALWAYS_INLINE      `inline`, and inline even when the optimiser
//                               would not.
//   CpuidLeaf, ReadXcr0         See below.
//
// `#pragma GCC unroll N` is used as is: GCC and Clang both honour it, and
// MSVC ignores it (with warning C4068, unknown pragma).

#include <cstdint>

#if (defined(__x86_64__) || defined(_M_X64)) && !defined(_M_ARM64EC)
#define DMLSERVE_X86 1
#else
#define DMLSERVE_X86 0
#endif

#if DMLSERVE_X86
#if defined(_MSC_VER)
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#endif

// A pragma from a macro: DMLSERVE_PRAGMA(GCC target("avx2")) is
// `#pragma GCC target("avx2")`.
#define DMLSERVE_PRAGMA(x) _Pragma(#x)

#if defined(__clang__)
#define DMLSERVE_ISA_BEGIN(features) \
  DMLSERVE_PRAGMA(clang attribute push(__attribute__((target(features))), apply_to = function))
#define DMLSERVE_ISA_END DMLSERVE_PRAGMA(clang attribute pop)
#elif defined(__GNUC__)
#define DMLSERVE_ISA_BEGIN(features) \
  DMLSERVE_PRAGMA(GCC push_options) DMLSERVE_PRAGMA(GCC target(features))
#define DMLSERVE_ISA_END DMLSERVE_PRAGMA(GCC pop_options)
#else  // MSVC: see above.
#define DMLSERVE_ISA_BEGIN(features)
#define DMLSERVE_ISA_END
#endif

#if defined(__clang__)
#define DMLSERVE_IGNORE_UNINITIALIZED_BEGIN \
  DMLSERVE_PRAGMA(clang diagnostic push)    \
  DMLSERVE_PRAGMA(clang diagnostic ignored "-Wuninitialized")
#define DMLSERVE_IGNORE_UNINITIALIZED_END DMLSERVE_PRAGMA(clang diagnostic pop)
#elif defined(__GNUC__)
#define DMLSERVE_IGNORE_UNINITIALIZED_BEGIN                 \
  DMLSERVE_PRAGMA(GCC diagnostic push)                      \
  DMLSERVE_PRAGMA(GCC diagnostic ignored "-Wuninitialized") \
  DMLSERVE_PRAGMA(GCC diagnostic ignored "-Wmaybe-uninitialized")
#define DMLSERVE_IGNORE_UNINITIALIZED_END DMLSERVE_PRAGMA(GCC diagnostic pop)
#else
#define DMLSERVE_IGNORE_UNINITIALIZED_BEGIN
#define DMLSERVE_IGNORE_UNINITIALIZED_END
#endif

#if defined(_MSC_VER) && !defined(__clang__)
#define DMLSERVE_ALWAYS_INLINE __forceinline
#else
#define DMLSERVE_ALWAYS_INLINE __attribute__((always_inline)) inline
#endif

namespace dmlserve {

#if DMLSERVE_X86

// Runs CPUID with EAX = leaf and ECX = subleaf and stores EAX, EBX, ECX, EDX
// in out[0..3]. Returns false, with out all zero, when the leaf is above the
// highest one the CPU reports for its range (basic, or 0x8000'0000 and up).
inline bool CpuidLeaf(unsigned leaf, unsigned subleaf, unsigned out[4]) {
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
inline uint64_t ReadXcr0() {
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

#endif  // DMLSERVE_X86

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_ISA_PORTABILITY_H_

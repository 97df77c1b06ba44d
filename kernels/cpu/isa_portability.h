#ifndef DMLSERVE_KERNELS_CPU_ISA_PORTABILITY_H_
#define DMLSERVE_KERNELS_CPU_ISA_PORTABILITY_H_

// The one place where the CPU kernels meet the differences between GCC,
// Clang and MSVC in compiling x86 SIMD code. The kernel sources use only
// what is below, never a compiler's own spelling, so that they build
// unchanged with all three. (Reading the CPU's features differs by compiler
// too; that is done in one place, cpu_features.cc.)
//
// Why: each kernel file holds functions for one ISA above the baseline the
// rest of the program is built for (AVX2, AVX-VNNI, AVX-512), and the CPU is
// checked at run time before any of them is called (cpu_kernels.h hands out
// only what the CPU runs). The compilers disagree on how such a function is
// written:
//   - GCC needs the ISA on the function (its intrinsics refuse to inline into
//     code without it): `#pragma GCC target` over a region.
//   - Clang needs the same but ignores GCC's target pragma; it has
//     `#pragma clang attribute` instead. clang-cl (which also defines
//     _MSC_VER) is Clang here.
//   - MSVC compiles any intrinsic whatever /arch says, and has no per-function
//     target: the region needs nothing. (Nothing else in the region is built
//     for the higher ISA either, so no inline function compiled for AVX-512
//     can be merged into code that runs on an older CPU.)
//
// Contract:
//   DMLSERVE_X86                1 when compiling for x86-64 (GCC, Clang, MSVC;
//                               not ARM64EC, whose x64 emulation lacks AVX),
//                               else 0. Kernels for x86 ISAs exist only when
//                               it is 1.
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
//   DMLSERVE_PREFETCH_READ(p)   A hint that the line at p will be read soon
//                               (into every cache level): no fault, no
//                               effect on results, nothing where the
//                               compiler has no such builtin.
//
// `#pragma GCC unroll N` is used as is: GCC and Clang both honour it, and
// MSVC ignores it (with warning C4068, unknown pragma).

#if (defined(__x86_64__) || defined(_M_X64)) && !defined(_M_ARM64EC)
#define DMLSERVE_X86 1
#else
#define DMLSERVE_X86 0
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

#if defined(__GNUC__)
#define DMLSERVE_PREFETCH_READ(p) __builtin_prefetch((p), 0, 3)
#else
#define DMLSERVE_PREFETCH_READ(p) ((void)(p))
#endif

#if defined(_MSC_VER) && !defined(__clang__)
#define DMLSERVE_ALWAYS_INLINE __forceinline
#else
#define DMLSERVE_ALWAYS_INLINE __attribute__((always_inline)) inline
#endif

#endif  // DMLSERVE_KERNELS_CPU_ISA_PORTABILITY_H_

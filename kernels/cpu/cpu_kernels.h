#ifndef DMLSERVE_KERNELS_CPU_CPU_KERNELS_H_
#define DMLSERVE_KERNELS_CPU_CPU_KERNELS_H_

// The CPU backend's ISA-specific code, as one table per ISA level: every
// function the quantized matrix multiply and the scans call that has a
// version per instruction set. The rest of the backend takes a table and
// calls through it; nothing else chooses code by ISA or reads the CPU.
//
// Each level's table is built once (a static, on first use) from the
// per-ISA files, XNNPACK-style: qgemm_ukernel_<isa>.cc, packed_a_<isa>.cc,
// packed_b_<isa>.cc, requantize_<isa>.cc, scan_kernels_<isa>.cc, with the
// portable versions in qgemm_ukernel_generic.cc, packed_a.cc, packed_b.cc,
// requantize.cc and scan_kernels_generic.cc. Which tables this CPU may use
// comes from one probe, cpu_features.cc (CpuRunsIsa); which one runs, from
// SelectedCpuIsa() (DMLSERVE_CPU_ISA, SetCpuIsaForTesting).
//
// The levels and what each table holds:
//   level       qgemm         packers of A, B   requantize   scans
//   generic     generic       portable          portable     generic
//   avx2        avx2 (+ b7,   AVX2              AVX2         AVX2
//               one_strip,
//               wide_b)
//   avxvnni     avxvnni       AVX2              AVX2         AVX2
//   avx512vnni  avx512vnni    AVX-512           AVX-512      AVX-512
//   amx         amx (few      AVX-512           AVX-512      AVX-512
//               rows: avx512vnni)
// Every version of a function computes the same bits as the portable one
// (the tests check each table against it), so the table decides speed only.
//
// Thread-safe; the tables are never destroyed.

#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/packed_a.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_ukernel.h"
#include "kernels/cpu/requantize.h"
#include "kernels/cpu/scan_simd.h"

namespace dmlserve {

struct CpuKernels {
  CpuIsa isa;  // the level; CpuIsaName(isa) names the table
  // The level's micro-kernel, with the kernels it substitutes for some
  // products (QGemmUkernel::seven_bit_b, one_strip, many_rows; picked by
  // ChooseQGemmUkernel). Its mr, and theirs, divide kQGemmRowBlock.
  const QGemmUkernel* qgemm;
  // Packing A (packed_a.h): one row, as bytes (with a null `out`, only its
  // sum: SumBytes) or widened to int16 for a wide-A kernel.
  PackARowFn pack_a_row;
  PackAWideRowFn pack_a_wide_row;
  // Packing B (packed_b.h): one panel of strips, less the row-sum column
  // (PackBPanel adds it).
  PackBPanelFn pack_b_panel;
  // The epilogue (requantize.h).
  ComputeMultipliersFn compute_multipliers;
  RequantizeRowFn requantize_row;
  // The scan loops, [kind][exclusive] (scan_simd.h).
  const scan_internal::ScanTable* scan;
};

// The table of the best level at or below `isa` that this CPU runs
// (CpuRunsIsa): `isa`'s own where it runs it, else a lower one, generic at
// the least. Never null; the same object for the same level every time.
const CpuKernels& CpuKernelsFor(CpuIsa isa);

// CpuKernelsFor(SelectedCpuIsa()): what the kernels use unless told
// otherwise. Follows SetCpuIsaForTesting (a lookup per call, no CPUID).
const CpuKernels& SelectedCpuKernels();

// The table of every level this CPU runs, generic first, then by level.
std::vector<const CpuKernels*> AvailableCpuKernels();

// Tests only: the amx level's table with its micro-kernel on the scalar
// model of the tile instructions (AmxModelQGemmUkernel, amx_tiles.h), the
// rest (and the kernel for few rows) from the best level up to avx512vnni
// this CPU runs. It runs on any CPU, so the tile path's blocking, edges and
// level choice are tested where there are no tiles; thousands of times
// slower than the tiles. Not among AvailableCpuKernels(); its isa is that of
// the table it copies.
const CpuKernels& AmxModelCpuKernels();

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_CPU_KERNELS_H_

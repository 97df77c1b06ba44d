#include "kernels/cpu/cpu_kernels.h"

#include <array>
#include <optional>

#include "kernels/core/check.h"

namespace dmlserve {
namespace {

constexpr int kLevels = static_cast<int>(CpuIsa::kAmx) + 1;

// The driver's row blocks hold whole blocks of mr rows (see kQGemmRowBlock):
// checked for the level's kernel and every kernel it may hand a product to.
void CheckRowBlock(const QGemmUkernel* kernel) {
  if (kernel == nullptr) return;
  DMLSERVE_DCHECK(kernel->mr >= 1 && kQGemmRowBlock % static_cast<size_t>(kernel->mr) == 0);
  CheckRowBlock(kernel->seven_bit_b);
  CheckRowBlock(kernel->one_strip);
  CheckRowBlock(kernel->many_rows);
  CheckRowBlock(kernel->few_rows);
}

// A level's table, its contracts checked once, as it is built.
CpuKernels Checked(const CpuKernels& table) {
  DMLSERVE_DCHECK(table.qgemm != nullptr && table.qgemm->isa == table.isa);
  CheckRowBlock(table.qgemm);
  return table;
}

// Level `isa`'s table, from the per-ISA files. Called only for a level the
// CPU runs (CpuRunsIsa): a SIMD file's table (the scans') is built by code
// compiled for its ISA.
CpuKernels BuildCpuKernels(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric:
      break;
#if DMLSERVE_X86
    // AVX2's packers and epilogue serve every SIMD level below AVX-512, which
    // keeps AVX2's wide packer of A too (none of its kernels reads A wide).
    case CpuIsa::kAvx2:
      return {CpuIsa::kAvx2,      Avx2QGemmUkernel(),
              &PackARowAvx2,      &PackAWideRowAvx2,
              &PackBPanelAvx2,    &ComputeMultipliersAvx2,
              &RequantizeRowAvx2, &scan_internal::Avx2ScanTable()};
    case CpuIsa::kAvxVnni: {
      CpuKernels table = BuildCpuKernels(CpuIsa::kAvx2);  // AVX-VNNI adds a micro-kernel only
      table.isa = CpuIsa::kAvxVnni;
      table.qgemm = AvxVnniQGemmUkernel();
      return table;
    }
    case CpuIsa::kAvx512Vnni:
      return {CpuIsa::kAvx512Vnni,  Avx512VnniQGemmUkernel(),
              &PackARowAvx512,      &PackAWideRowAvx2,
              &PackBPanelAvx512,    &ComputeMultipliersAvx512,
              &RequantizeRowAvx512, &scan_internal::Avx512ScanTable()};
    case CpuIsa::kAmx: {
      CpuKernels table = BuildCpuKernels(CpuIsa::kAvx512Vnni);  // the tiles add a micro-kernel
      table.isa = CpuIsa::kAmx;
      table.qgemm = AmxQGemmUkernel();
      return table;
    }
#else
    case CpuIsa::kAvx2:
    case CpuIsa::kAvxVnni:
    case CpuIsa::kAvx512Vnni:
    case CpuIsa::kAmx:
      break;  // never asked: no x86 level runs
#endif
  }
  return {CpuIsa::kGeneric,       GenericQGemmUkernel(),
          &PackARowPortable,      &PackAWideRowPortable,
          &PackBPanelPortable,    &ComputeMultipliersPortable,
          &RequantizeRowPortable, &scan_internal::GenericScanTable()};
}

// One table per level the CPU runs (runnable[level], else empty), and for
// each level the table CpuKernelsFor gives (best[level]). Built once, on
// first use: the CPU does not change, and every matrix multiply and scan
// asks. Never destroyed: kernels may run while the process exits.
struct Tables {
  std::array<std::optional<CpuKernels>, kLevels> runnable;
  std::array<const CpuKernels*, kLevels> best{};
};

const Tables& AllTables() {
  static const Tables* const tables = [] {
    auto* built = new Tables;
    const CpuKernels* best = nullptr;
    for (int level = 0; level < kLevels; ++level) {
      const CpuIsa isa = static_cast<CpuIsa>(level);
      // A compiler without the AMX kernel (MSVC) leaves that level out.
      if (CpuRunsIsa(isa) && (isa != CpuIsa::kAmx || AmxQGemmUkernel() != nullptr)) {
        built->runnable[level] = Checked(BuildCpuKernels(isa));
        best = &*built->runnable[level];
      }
      built->best[level] = best;  // generic, level 0, always runs
    }
    return built;
  }();
  return *tables;
}

}  // namespace

const CpuKernels& CpuKernelsFor(CpuIsa isa) { return *AllTables().best[static_cast<int>(isa)]; }

const CpuKernels& SelectedCpuKernels() { return CpuKernelsFor(SelectedCpuIsa()); }

const CpuKernels& AmxModelCpuKernels() {
  static const CpuKernels* const table = [] {
    static const QGemmUkernel kernel = [] {
      QGemmUkernel model = *AmxModelQGemmUkernel();
      model.few_rows = CpuKernelsFor(CpuIsa::kAvx512Vnni).qgemm;
      model.min_rows = kQGemmAmxMinRows;
      return model;
    }();
    auto* built = new CpuKernels(CpuKernelsFor(CpuIsa::kAvx512Vnni));
    built->qgemm = &kernel;
    CheckRowBlock(built->qgemm);
    return built;
  }();
  return *table;
}

std::vector<const CpuKernels*> AvailableCpuKernels() {
  std::vector<const CpuKernels*> tables;
  for (const std::optional<CpuKernels>& table : AllTables().runnable) {
    if (table.has_value()) tables.push_back(&*table);
  }
  return tables;
}

}  // namespace dmlserve

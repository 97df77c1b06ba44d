// The int8 GEMM's micro-kernels, one per ISA level (and the tile model's):
// the tables that hold them, their contracts, and each against the portable
// kernel, bit for bit.

#include "kernels/cpu/qgemm_ukernel.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_kernels.h"
#include "tests/kernels/qgemm_test_util.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::SimdTables;
using ::dmlserve::testing::TablesUnderTest;

std::vector<const QGemmUkernel*> SimdUkernels() {
  std::vector<const QGemmUkernel*> kernels;
  for (const CpuKernels* table : SimdTables()) kernels.push_back(table->qgemm);
  // The tile kernel on the model of the tiles, on every CPU.
  kernels.push_back(AmxModelQGemmUkernel());
  return kernels;
}

TEST(QGemmUkernelTest, PortableKernelComesFirst) {
  const std::vector<const CpuKernels*> tables = AvailableCpuKernels();
  ASSERT_FALSE(tables.empty());
  EXPECT_EQ(tables.front()->isa, CpuIsa::kGeneric);
  EXPECT_STREQ(tables.front()->qgemm->name, "generic");
  // Whatever DMLSERVE_CPU_ISA says, the selection is one of them.
  bool found = false;
  for (const CpuKernels* table : tables) found |= table == &SelectedCpuKernels();
  EXPECT_TRUE(found);
}

// Each level's table holds only what the CPU runs, and its own level's
// micro-kernel; a level the CPU cannot run gets the best one below it.
TEST(QGemmUkernelTest, TablesHoldTheirLevelsKernels) {
  for (const CpuKernels* table : AvailableCpuKernels()) {
    EXPECT_TRUE(CpuRunsIsa(table->isa)) << CpuIsaName(table->isa);
    EXPECT_EQ(table->qgemm->isa, table->isa) << CpuIsaName(table->isa);
    EXPECT_STREQ(table->qgemm->name, std::string(CpuIsaName(table->isa)).c_str());
    EXPECT_EQ(&CpuKernelsFor(table->isa), table);
  }
  for (CpuIsa isa :
       {CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvxVnni, CpuIsa::kAvx512Vnni, CpuIsa::kAmx}) {
    const CpuKernels& table = CpuKernelsFor(isa);
    EXPECT_LE(table.isa, isa);
    EXPECT_TRUE(CpuRunsIsa(table.isa));
    EXPECT_EQ(table.isa == isa, CpuRunsIsa(isa)) << CpuIsaName(isa);
  }
}

// Each micro-kernel checks its row and strip counts on entry (the contract
// of QGemmUkernelFn), where the build checks contracts (kernels/core/check.h).
TEST(QGemmUkernelTest, ContractsAreChecked) {
#if defined(DMLSERVE_CHECK_CONTRACTS) && DMLSERVE_CHECK_CONTRACTS
  // The pool's threads may be running: the child re-runs the binary.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<const QGemmUkernel*> kernels;
  for (const CpuKernels* table : TablesUnderTest()) {
    const QGemmUkernel& level = *table->qgemm;
    for (const QGemmUkernel* kernel : {&level, level.seven_bit_b, level.one_strip, level.many_rows,
                                       level.few_rows, level.signed_a}) {
      if (kernel != nullptr) kernels.push_back(kernel);
    }
  }
  for (const QGemmUkernel* each : kernels) {
    const QGemmUkernel& kernel = *each;
    // Room for one row and one strip too many (wide A, repacked B), in case
    // a check were missing: the test then fails on its message, not on a
    // wild access.
    constexpr size_t kLda = 8, kStripStride = 256;
    std::vector<uint8_t> a((kernel.mr + 1) * kLda);
    std::vector<int8_t> b((kernel.max_strips + 1) * kStripStride);
    const size_t ldc = (kernel.max_strips + 1) * kQGemmStripColumns;
    std::vector<int32_t> c((kernel.mr + 1) * ldc);
    auto call = [&](int rows, int strips) {
      kernel.fn(1, a.data(), kLda, rows, b.data(), kStripStride, strips, c.data(), ldc, false);
    };
    EXPECT_DEATH(call(0, 1), "DMLSERVE_DCHECK failed: .*rows") << kernel.name;
    EXPECT_DEATH(call(kernel.mr + 1, 1), "DMLSERVE_DCHECK failed: .*rows") << kernel.name;
    EXPECT_DEATH(call(1, 0), "DMLSERVE_DCHECK failed: .*strips") << kernel.name;
    EXPECT_DEATH(call(1, kernel.max_strips + 1), "DMLSERVE_DCHECK failed: .*strips") << kernel.name;
    if (kernel.narrow != nullptr) {  // the narrow path takes 2..mr rows
      EXPECT_DEATH(kernel.narrow(1, a.data(), kLda, 1, b.data(), c.data(), ldc, false),
                   "DMLSERVE_DCHECK failed: .*rows")
          << kernel.name;
    }
  }
#else
  GTEST_SKIP() << "built with DMLSERVE_CHECK_CONTRACTS off";
#endif
}

// A's rows as `kernel` reads them: the bytes themselves, or (a wide-A
// kernel) each widened to int16; `lda` is updated to the kernel's.
std::vector<uint8_t> AsKernelA(const QGemmUkernel& kernel, const std::vector<uint8_t>& a,
                               size_t& lda) {
  if (!kernel.wide_a) return a;
  std::vector<uint8_t> wide(a.size() * 2);
  for (size_t i = 0; i < a.size(); ++i) {
    const int16_t value = a[i];
    std::memcpy(wide.data() + 2 * i, &value, 2);
  }
  lda *= 2;
  return wide;
}

// The SIMD micro-kernels and their one_strip, many_rows and seven_bit_b kernels, each
// paired with the range of B values it is exact on (only seven_bit_b
// kernels are limited).
struct KernelUnderTest {
  const QGemmUkernel* kernel;
  int b_low, b_high;
};
std::vector<KernelUnderTest> SimdKernelsWithRanges() {
  std::vector<KernelUnderTest> kernels;
  for (const QGemmUkernel* kernel : SimdUkernels()) {
    kernels.push_back({kernel, -128, 127});
    if (kernel->seven_bit_b != nullptr) kernels.push_back({kernel->seven_bit_b, -64, 63});
    if (kernel->one_strip != nullptr) kernels.push_back({kernel->one_strip, -128, 127});
    if (kernel->many_rows != nullptr) kernels.push_back({kernel->many_rows, -128, 127});
  }
  return kernels;
}

// Every SIMD micro-kernel writes exactly what the portable one writes, for
// every row and strip count, overwriting and accumulating, with the extreme
// products of its B range.
TEST(QGemmUkernelTest, EverySimdKernelMatchesThePortableOne) {
  const QGemmUkernel& generic = *GenericQGemmUkernel();
  std::mt19937 rng(11);
  for (const auto& [kernel, b_low, b_high] : SimdKernelsWithRanges()) {
    std::uniform_int_distribution<int> b_value(b_low, b_high);
    for (size_t quads : {size_t{1}, size_t{3}, size_t{64}, size_t{1001}}) {
      const size_t lda = quads * 4 + 12;
      const size_t strip_stride = quads * kQGemmQuadBytes + 64;
      std::vector<uint8_t> a(kernel->mr * lda);
      std::vector<int8_t> b(kernel->max_strips * strip_stride);
      for (uint8_t& v : a) v = static_cast<uint8_t>(rng());
      for (int8_t& v : b) v = static_cast<int8_t>(b_value(rng));
      // Extremes too: the products must not saturate anywhere. A whole quad
      // of them, so that pair sums reach 2 * 255 * b_low.
      for (int r = 0; r < 4; ++r) {
        a[r] = 255;
        b[r] = static_cast<int8_t>(b_low);
        b[4 + r] = static_cast<int8_t>(b_high);
      }
      size_t kernel_lda = lda;
      const std::vector<uint8_t> kernel_a = AsKernelA(*kernel, a, kernel_lda);
      // B as the kernel reads it: the strips themselves, or repacked.
      std::vector<int8_t> kernel_b = b;
      if (kernel->repack_b != nullptr) {
        ASSERT_EQ(kernel->max_strips, 1) << kernel->name;
        kernel_b.resize(quads * kernel->repacked_quad_bytes);
        kernel->repack_b(b.data(), quads, kernel_b.data());
      }
      for (int rows = 1; rows <= kernel->mr; ++rows) {
        for (int strips = 1; strips <= kernel->max_strips; ++strips) {
          for (bool accumulate : {false, true}) {
            const size_t ldc = strips * kQGemmStripColumns + 5;
            std::vector<int32_t> want(kernel->mr * ldc, 7), got(kernel->mr * ldc, 7);
            for (int s = 0; s < strips; ++s) {
              for (int i = 0; i < rows; ++i) {
                generic.fn(quads, a.data() + i * lda, lda, 1, b.data() + s * strip_stride,
                           strip_stride, 1, want.data() + i * ldc + s * kQGemmStripColumns, ldc,
                           accumulate);
              }
            }
            kernel->fn(quads, kernel_a.data(), kernel_lda, rows, kernel_b.data(), strip_stride,
                       strips, got.data(), ldc, accumulate);
            ASSERT_EQ(got, want) << kernel->name << " quads=" << quads << " rows=" << rows
                                 << " strips=" << strips << " accumulate=" << accumulate;
          }
        }
      }
    }
  }
}

// A kernel's signed_a variant (the tiles' TDPBSSD) reads A as int8 values as
// they are: it writes sum over k of A[i][k] * B'[k][j] with both signed, for
// every row and strip count, overwriting and accumulating, extremes included.
TEST(QGemmUkernelTest, SignedAVariantsMultiplyInt8ByInt8) {
  std::mt19937 rng(12);
  int checked = 0;
  for (const QGemmUkernel* level : SimdUkernels()) {
    const QGemmUkernel* kernel = level->signed_a;
    if (kernel == nullptr) continue;
    ASSERT_EQ(kernel->mr, level->mr);
    ASSERT_EQ(kernel->max_strips, level->max_strips);
    for (size_t quads : {size_t{1}, size_t{17}, size_t{64}, size_t{301}}) {
      const size_t lda = quads * 4 + 12;
      const size_t strip_stride = quads * kQGemmQuadBytes + 64;
      std::vector<uint8_t> a(kernel->mr * lda);
      std::vector<int8_t> b(kernel->max_strips * strip_stride);
      for (uint8_t& v : a) v = static_cast<uint8_t>(rng());
      for (int8_t& v : b) v = static_cast<int8_t>(rng());
      for (int r = 0; r < 4; ++r) {  // (-128) * (-128) four times: 65536
        a[r] = 0x80;
        b[r] = -128;
      }
      for (int rows : {1, 2, 16, 17, kernel->mr}) {
        for (int strips = 1; strips <= kernel->max_strips; ++strips) {
          for (bool accumulate : {false, true}) {
            const size_t ldc = strips * kQGemmStripColumns + 5;
            std::vector<int32_t> want(kernel->mr * ldc, 7), got(kernel->mr * ldc, 7);
            for (int i = 0; i < rows; ++i) {
              for (size_t j = 0; j < strips * kQGemmStripColumns; ++j) {
                uint32_t sum = accumulate ? 7u : 0u;
                for (size_t k = 0; k < 4 * quads; ++k) {
                  const int8_t* strip = b.data() + (j / kQGemmStripColumns) * strip_stride;
                  sum += static_cast<uint32_t>(
                      int32_t{static_cast<int8_t>(a[i * lda + k])} *
                      int32_t{
                          strip[(k / 4) * kQGemmQuadBytes + (j % kQGemmStripColumns) * 4 + k % 4]});
                }
                want[i * ldc + j] = static_cast<int32_t>(sum);
              }
            }
            kernel->fn(quads, a.data(), lda, rows, b.data(), strip_stride, strips, got.data(), ldc,
                       accumulate);
            if (kernel->release != nullptr) kernel->release();
            ASSERT_EQ(got, want) << kernel->name << " quads=" << quads << " rows=" << rows
                                 << " strips=" << strips << " accumulate=" << accumulate;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);  // the model's, at least
}

// Every narrow path (one strip, B rearranged into quad groups) writes exactly
// what the portable kernel writes, for every row count and a last quad group
// that is whole or not, with A ending right after its last quad (a narrow
// kernel must not read past it).
TEST(QGemmUkernelTest, EveryNarrowPathMatchesThePortableKernel) {
  const QGemmUkernel& generic = *GenericQGemmUkernel();
  std::mt19937 rng(15);
  int checked = 0;
  for (const QGemmUkernel* kernel : SimdUkernels()) {
    if (kernel->narrow == nullptr) continue;
    for (size_t quads :
         {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{7}, size_t{64}, size_t{1001}}) {
      const size_t lda = quads * 4;  // rows back to back, nothing after the last
      // Random bytes past `quads` in the strip too: the rearranged panel must
      // not take them in.
      std::vector<int8_t> strip((quads + 3) * kQGemmQuadBytes);
      for (int8_t& v : strip) v = static_cast<int8_t>(rng());
      std::vector<int8_t> panel(QGemmNarrowPanelBytes(quads));
      kernel->narrow_pack(strip.data(), quads, panel.data());
      for (int rows = 2; rows <= kernel->mr; ++rows) {
        // Exactly rows * lda bytes on the heap, so reading past the end
        // is caught by ASan.
        std::unique_ptr<uint8_t[]> a(new uint8_t[rows * lda]);
        for (size_t i = 0; i < rows * lda; ++i) a[i] = static_cast<uint8_t>(rng());
        a[0] = 255;
        for (bool accumulate : {false, true}) {
          const size_t ldc = kQGemmStripColumns + 3;
          std::vector<int32_t> want(rows * ldc, 7), got(rows * ldc, 7);
          for (int i = 0; i < rows; ++i) {
            generic.fn(quads, a.get() + i * lda, lda, 1, strip.data(), 0, 1, want.data() + i * ldc,
                       ldc, accumulate);
          }
          kernel->narrow(quads, a.get(), lda, rows, panel.data(), got.data(), ldc, accumulate);
          ASSERT_EQ(got, want) << kernel->name << " quads=" << quads << " rows=" << rows
                               << " accumulate=" << accumulate;
          ++checked;
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no micro-kernel with a narrow path on this CPU";
}

}  // namespace
}  // namespace dmlserve

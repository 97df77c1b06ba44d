// The int8 GEMM's parts, each ISA path forced in turn: micro-kernels and
// packing against the portable versions, and whole products on every
// micro-kernel against the reference, bit for bit.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_a.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_driver.h"
#include "kernels/cpu/qgemm_ukernel.h"
#include "kernels/cpu/quantized_matmul_kernels.h"
#include "kernels/cpu/requantize.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

// The tables of the SIMD levels this CPU runs (every one but the first,
// the portable level's).
std::vector<const CpuKernels*> SimdTables() {
  std::vector<const CpuKernels*> tables = AvailableCpuKernels();
  tables.erase(tables.begin());
  return tables;
}

const CpuKernels& PortableTable() { return CpuKernelsFor(CpuIsa::kGeneric); }

std::vector<const QGemmUkernel*> SimdUkernels() {
  std::vector<const QGemmUkernel*> kernels;
  for (const CpuKernels* table : SimdTables()) kernels.push_back(table->qgemm);
  // The tile kernel on the model of the tiles, on every CPU.
  kernels.push_back(AmxModelQGemmUkernel());
  return kernels;
}

// Every table the CPU runs, and the amx level on the model of the tiles
// (which runs anywhere): the tile path's blocking, edges and level choice
// are tested on every machine, its instructions natively where the CPU has
// them (the amx table among AvailableCpuKernels()).
// `table` with its micro-kernel replaced by `kernel` (the level's few-rows
// kernel and threshold kept): made once per kernel, never destroyed.
const CpuKernels* WithKernel(const CpuKernels& table, const QGemmUkernel* kernel) {
  auto* copy = new QGemmUkernel(*kernel);
  copy->few_rows = table.qgemm->few_rows;
  copy->min_rows = table.qgemm->min_rows;
  auto* built = new CpuKernels(table);
  built->qgemm = copy;
  return built;
}

std::vector<const CpuKernels*> TablesUnderTest() {
  std::vector<const CpuKernels*> tables = AvailableCpuKernels();
  tables.push_back(&AmxModelCpuKernels());
  // The prefetching candidate (qgemm_ukernel.h): on the model everywhere, on
  // the tiles where the CPU has them.
  static const CpuKernels* const model_prefetch =
      WithKernel(AmxModelCpuKernels(), AmxModelPrefetchQGemmUkernel());
  tables.push_back(model_prefetch);
  if (CpuRunsIsa(CpuIsa::kAmx) && AmxPrefetchQGemmUkernel() != nullptr) {
    static const CpuKernels* const prefetch =
        WithKernel(CpuKernelsFor(CpuIsa::kAmx), AmxPrefetchQGemmUkernel());
    tables.push_back(prefetch);
    static const CpuKernels* const far_prefetch =
        WithKernel(CpuKernelsFor(CpuIsa::kAmx), AmxFarPrefetchQGemmUkernel());
    tables.push_back(far_prefetch);
  }
  // The driver's other blockings (QGemmBlocking) the tile kernel's
  // candidates use: several depth blocks (accumulating), tasks of two row
  // blocks and 512 columns, row blocks outside, A copied with an unaliased
  // stride, a B per request streamed into tasks of up to two row blocks; on
  // the model everywhere, on the tiles where the CPU has them. (Each blocked
  // kernel is held in a static of its own: WithKernel copies it.)
  constexpr QGemmBlocking kBlocked = {.depth_block = 512,
                                      .task_rows = 2 * kQGemmRowBlock,
                                      .column_block = 512,
                                      .row_blocks_outer = true,
                                      .copy_a = true,
                                      .stream_b = true};
  static const QGemmUkernel* const model_blocked_kernel =
      QGemmUkernelWithBlocking(*AmxModelQGemmUkernel(), kBlocked, "amx_model_blocked");
  static const CpuKernels* const model_blocked =
      WithKernel(AmxModelCpuKernels(), model_blocked_kernel);
  tables.push_back(model_blocked);
  static const QGemmUkernel* const model_prefetch_copied_a_kernel = QGemmUkernelWithBlocking(
      *AmxModelPrefetchQGemmUkernel(), {.depth_block = 1024, .copy_a = true},
      "amx_model_prefetch_copied_a");
  static const CpuKernels* const model_prefetch_copied_a =
      WithKernel(AmxModelCpuKernels(), model_prefetch_copied_a_kernel);
  tables.push_back(model_prefetch_copied_a);
  if (CpuRunsIsa(CpuIsa::kAmx) && AmxPrefetchQGemmUkernel() != nullptr) {
    static const QGemmUkernel* const blocked_kernel =
        QGemmUkernelWithBlocking(*AmxPrefetchQGemmUkernel(), kBlocked, "amx_prefetch_blocked");
    static const CpuKernels* const blocked =
        WithKernel(CpuKernelsFor(CpuIsa::kAmx), blocked_kernel);
    tables.push_back(blocked);
  }
  // A B per request of any size packed inside tasks of many rows
  // (StreamedBTaskRows; the driver's own threshold is 8 MiB, too large for
  // the reference): the portable kernel and the tile model, whose mr (32)
  // the vector levels do not have; natively the vector levels run it in
  // LargeBPerRequestStreamedIntoTasksIsExact.
  constexpr QGemmBlocking kStreamedB = {.streamed_b_min_bytes = 1};
  static const QGemmUkernel* const generic_streamed_kernel = QGemmUkernelWithBlocking(
      *CpuKernelsFor(CpuIsa::kGeneric).qgemm, kStreamedB, "generic_streamed_b");
  static const CpuKernels* const generic_streamed =
      WithKernel(CpuKernelsFor(CpuIsa::kGeneric), generic_streamed_kernel);
  tables.push_back(generic_streamed);
  static const QGemmUkernel* const model_streamed_kernel =
      QGemmUkernelWithBlocking(*AmxModelQGemmUkernel(), kStreamedB, "amx_model_streamed_b");
  static const CpuKernels* const model_streamed =
      WithKernel(AmxModelCpuKernels(), model_streamed_kernel);
  tables.push_back(model_streamed);
  return tables;
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

// The packing routines of every ISA level write the same bytes and sums,
// edges (K not a multiple of 4, N not a multiple of 16 or 64) included, and
// the bytes are the documented layout: B', zeros past K and N, and ones in
// the row-sum column.
TEST(QGemmPackingTest, EveryIsaPacksTheSameBytes) {
  std::mt19937 rng(12);
  for (bool is_signed : {false, true}) {
    for (size_t k : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{63}, size_t{130}}) {
      for (size_t n :
           {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{64}, size_t{65}, size_t{130}}) {
        std::vector<uint8_t> source(k * n);
        for (uint8_t& v : source) v = static_cast<uint8_t>(rng());
        const BSource b{source.data(), is_signed, k, n};
        const size_t quads = (k + 3) / 4, strips = (n + 15) / 16 + 1;  // one strip past N
        const size_t stride = quads * kQGemmQuadBytes;
        std::vector<int8_t> want(strips * stride, 1);
        std::vector<int32_t> want_sums(strips * 16, 3);
        PackBPanel({b, 0, quads, 0, strips, want.data(), stride, want_sums.data()},
                   PortableTable());
        // The portable packer against the definition.
        for (size_t kk = 0; kk < quads * 4; ++kk) {
          for (size_t j = 0; j < strips * 16; ++j) {
            int expected = 0;
            if (kk < k && j < n) {
              expected = static_cast<int8_t>(source[kk * n + j] ^ (is_signed ? 0 : 0x80));
            } else if (kk < k && j == RowSumColumn(n)) {
              expected = 1;  // the row-sum column
            }
            ASSERT_EQ(want[(j / 16) * stride + (kk / 4) * 64 + (j % 16) * 4 + kk % 4], expected);
          }
        }
        for (const CpuKernels* table : SimdTables()) {
          std::vector<int8_t> got(strips * stride, 1);
          std::vector<int32_t> got_sums(strips * 16, 3);
          PackBPanel({b, 0, quads, 0, strips, got.data(), stride, got_sums.data()}, *table);
          const absl::string_view name = CpuIsaName(table->isa);
          EXPECT_EQ(got, want) << name << " k=" << k << " n=" << n;
          EXPECT_EQ(got_sums, want_sums) << name << " k=" << k << " n=" << n;
        }

        // A: rows of K, in place only for rows in one block, UINT8 or (for a
        // kernel with signed_a) INT8.
        std::vector<ARowSource> rows;
        for (size_t i = 0; i + k <= source.size() && rows.size() < 5; i += k) {
          rows.push_back({source.data() + i, is_signed});
        }
        for (int mr : {1, 2, 6}) {
          QGemmUkernel generic = *GenericQGemmUkernel();
          generic.mr = mr;
          PackedA want_a;
          PackA(rows, k, generic, PortableTable(), /*sums=*/true, want_a);
          EXPECT_EQ(want_a.data == source.data(), !is_signed);
          // The tile level on the model too: where the CPU has no tiles, its
          // in-place INT8 A is tested through it (this case failed on the
          // first AMX machine, where the test expected the copy).
          std::vector<const CpuKernels*> tables = SimdTables();
          tables.push_back(&AmxModelCpuKernels());
          for (const CpuKernels* table : tables) {
            QGemmUkernel kernel = *table->qgemm;
            kernel.mr = mr;
            PackedA got_a;
            PackA(rows, k, kernel, *table, /*sums=*/true, got_a);
            if (got_a.raw_signed) {
              // A kernel that multiplies INT8 A as is (QGemmUkernel::signed_a,
              // the tiles' TDPBSSD) uses it in place, summed as INT8: 128 per
              // value less than the shifted copy's sums.
              ASSERT_TRUE(is_signed) << kernel.name;
              ASSERT_NE(kernel.signed_a, nullptr) << kernel.name;
              EXPECT_EQ(got_a.data, source.data()) << kernel.name;
              ASSERT_EQ(got_a.stride, k) << kernel.name;
              ASSERT_EQ(got_a.row_sums.size(), want_a.row_sums.size()) << kernel.name;
              for (size_t i = 0; i < rows.size(); ++i) {
                EXPECT_EQ(got_a.row_sums[i], want_a.row_sums[i] - 128 * static_cast<int32_t>(k))
                    << kernel.name << " row " << i << " k=" << k;
              }
              continue;
            }
            EXPECT_EQ(got_a.row_sums, want_a.row_sums) << kernel.name;
            if (!kernel.wide_a) {
              ASSERT_EQ(got_a.stride, want_a.stride);
              continue;
            }
            // A wide copy: A' as int16, zeros to the end of the last quad.
            ASSERT_EQ(got_a.stride, (k + 3) / 4 * 4 * 2) << kernel.name;
            for (size_t i = 0; i < rows.size(); ++i) {
              const uint8_t* row = got_a.rows(i / mr * mr) + (i % mr) * got_a.stride;
              for (size_t j = 0; j < (k + 3) / 4 * 4; ++j) {
                int16_t value;
                std::memcpy(&value, row + 2 * j, 2);
                const int expected = j < k ? (rows[i].data[j] ^ (is_signed ? 0x80 : 0)) : 0;
                ASSERT_EQ(value, expected) << kernel.name << " row " << i << " k=" << k;
              }
            }
          }
          // Every row reads back as A' through rows(), whole quads included:
          // past K it is zero (a copy) or the next row's bytes (in place).
          const size_t quads_bytes = (k + 3) / 4 * 4;
          for (size_t i = 0; i < rows.size(); ++i) {
            const uint8_t* row = want_a.rows(i / mr * mr) + (i % mr) * want_a.stride;
            int32_t sum = 0;
            for (size_t j = 0; j < k; ++j) {
              const uint8_t expected = rows[i].data[j] ^ (is_signed ? 0x80 : 0);
              ASSERT_EQ(row[j], expected) << "row " << i << " k=" << k << " mr=" << mr;
              sum += expected;
            }
            EXPECT_EQ(want_a.row_sums[i], sum);
            volatile uint8_t last = row[quads_bytes - 1];  // readable (ASan would tell)
            (void)last;
            if (is_signed) {
              for (size_t j = k; j < quads_bytes; ++j) EXPECT_EQ(row[j], 0);
            }
          }
        }
      }
    }
  }
}

// The epilogue of every ISA level computes the same multipliers (bit for
// bit) and the same bytes as the portable code, on random and extreme
// inputs: accumulators that wrap or sit at the int32 limits, multipliers from
// subnormal to overflowing the product, exact ties at .5, both output types
// with zero points at the ends of their range, and every count up to 40 (the
// vector loops' tails). Nothing past `count` is written.
TEST(QGemmRequantizeTest, EveryIsaRequantizesTheSame) {
  const std::vector<const CpuKernels*> tables = SimdTables();
  std::mt19937 rng(13);
  // A finite float of any exponent, subnormals and zeros included.
  auto any_float = [&rng] {
    for (;;) {
      const uint32_t bits = static_cast<uint32_t>(rng());
      if ((bits & 0x7f800000u) == 0x7f800000u) continue;
      float f;
      std::memcpy(&f, &bits, sizeof(f));
      return f;
    }
  };
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  // An int32 term: extreme, small, or anything.
  auto term = [&] {
    switch (rng() % 4) {
      case 0: {
        const int32_t extremes[] = {kMin, kMin + 1, kMax, kMax - 1, -1, 0, 1};
        return extremes[rng() % std::size(extremes)];
      }
      case 1:
        return static_cast<int32_t>(rng() % 2001) - 1000;
      default:
        return static_cast<int32_t>(rng());
    }
  };
  const RowRequantization ranges[] = {
      {0, 0, 255},       {255, 0, 255},    {128, 0, 255},  {37, 0, 255},
      {-128, -128, 127}, {127, -128, 127}, {0, -128, 127}, {-5, -128, 127},
  };
  for (size_t count = 0; count <= 40; ++count) {
    std::vector<float> scales(count);
    std::vector<int32_t> dots(count), column_offsets(count);
    std::vector<double> multipliers(count);
    for (int trial = 0; trial < 200; ++trial) {
      // Multipliers: typical, or from any finite floats.
      const bool typical = trial % 2 == 0;
      const float a_scale = typical ? 0.02f : any_float();
      float output_scale = typical ? 0.5f : any_float();
      if (output_scale == 0) output_scale = 1;
      for (float& v : scales) v = typical ? 0.001f * (1 + rng() % 1000) : any_float();
      PortableTable().compute_multipliers(a_scale, output_scale, scales.data(), count,
                                          multipliers.data());
      for (const CpuKernels* table : tables) {
        std::vector<double> got(count);
        table->compute_multipliers(a_scale, output_scale, scales.data(), count, got.data());
        // Bit for bit (memcmp, not ==); an empty vector's data() may be null.
        ASSERT_TRUE(count == 0 ||
                    std::memcmp(got.data(), multipliers.data(), count * sizeof(double)) == 0)
            << CpuIsaName(table->isa) << " count=" << count << " trial=" << trial;
      }
      // A quarter of the columns with extreme or tie-making multipliers.
      const double special[] = {0.5, -0.5,  0.25,   1.5,    -2.5,     1,
                                0,   1e300, -1e300, 1e-300, 4.9e-324, -4.9e-324};
      for (double& m : multipliers) {
        if (rng() % 4 == 0) m = special[rng() % std::size(special)];
      }
      const int32_t row_offset = term();
      for (size_t j = 0; j < count; ++j) {
        dots[j] = term();
        column_offsets[j] = term();
        // Half the time an accumulator near the output range, where ties and
        // clamping are decided.
        if (rng() % 2 == 0) {
          dots[j] = static_cast<int32_t>(static_cast<uint32_t>(rng() % 1201) - 600 +
                                         static_cast<uint32_t>(row_offset) +
                                         static_cast<uint32_t>(column_offsets[j]));
        }
      }
      for (const RowRequantization& row : ranges) {
        std::vector<uint8_t> want(count + 16, 0xab);
        PortableTable().requantize_row(dots.data(), row_offset, column_offsets.data(),
                                       multipliers.data(), row, count, want.data());
        for (const CpuKernels* table : tables) {
          std::vector<uint8_t> got(count + 16, 0xab);
          table->requantize_row(dots.data(), row_offset, column_offsets.data(), multipliers.data(),
                                row, count, got.data());
          const size_t j = std::mismatch(got.begin(), got.end(), want.begin()).first - got.begin();
          if (j == got.size()) continue;
          testing::Message where;
          where << CpuIsaName(table->isa) << " count=" << count << " trial=" << trial << " column "
                << j << " zero point " << row.output_zero_point << " range [" << row.low << ", "
                << row.high << "]";
          if (j < count) {
            where << " dot " << dots[j] << " row offset " << row_offset << " column offset "
                  << column_offsets[j] << " multiplier " << multipliers[j];
          }
          FAIL() << where << ": got " << int{got[j]} << ", want " << int{want[j]};
        }
      }
    }
  }
}

Tensor RandomBytes(DataType type, Shape sizes, std::mt19937_64& rng) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  for (uint64_t i = 0; i < tensor.element_count(); ++i) {
    tensor.mutable_data()[i] = static_cast<uint8_t>(rng());
  }
  return tensor;
}

Tensor Scales(Shape sizes, double typical, std::mt19937_64& rng) {
  Tensor tensor = Tensor::Allocate(DataType::kFloat32, sizes);
  std::uniform_real_distribution<double> factor(0.5, 2.0);
  for (uint64_t i = 0; i < tensor.element_count(); ++i) {
    tensor.mutable_data_as<float>()[i] = static_cast<float>(typical * factor(rng));
  }
  return tensor;
}

struct Shape3 {
  uint32_t m, k, n;
};

// A random product of the given shape and types; `per_axis` picks per-row A
// and output quantization and per-column B quantization.
QuantizedMatMulOperation RandomProduct(Shape3 s, DataType a_type, DataType b_type,
                                       DataType output_type, bool per_axis, std::mt19937_64& rng) {
  QuantizedMatMulTensors t;
  const Shape rows = per_axis ? Shape{1, 1, s.m, 1} : Shape{1, 1, 1, 1};
  const Shape columns = per_axis ? Shape{1, 1, 1, s.n} : Shape{1, 1, 1, 1};
  t.a = RandomBytes(a_type, {s.m, s.k}, rng);
  t.a_scale = Scales(rows, 0.02, rng);
  t.a_zero_point = RandomBytes(a_type, rows, rng);
  t.b = RandomBytes(b_type, {s.k, s.n}, rng);
  t.b_scale = Scales(columns, 0.01, rng);
  t.b_zero_point = RandomBytes(b_type, columns, rng);
  // |acc| is typically ~ 128 * 128 * sqrt(K / 3) with random zero points:
  // spread it over ~100 output steps.
  t.output_scale = Scales(rows, 0.02 * 0.01 * 16384 * std::sqrt(s.k / 3.0) / 100, rng);
  t.output_zero_point = RandomBytes(output_type, rows, rng);
  absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(t), output_type);
  EXPECT_TRUE(op.ok()) << op.status();
  return *op;
}

class QGemmPathTest : public testing::TestWithParam<const CpuKernels*> {
 protected:
  // Runs `op` on this test's micro-kernel, B registered (packed whole, via a
  // cache) or not (packed per task when few rows, see qgemm_driver.h).
  Tensor Compute(const QuantizedMatMulOperation& op, bool registered) {
    QuantizedMatMulOperation copy = op;
    PackedBCache cache(uint64_t{1} << 30);
    if (registered) copy.b.set_registered_id("weights");
    Tensor output = Tensor::Allocate(copy.output_data_type, copy.output_sizes);
    const QuantizedMatMulOperation* ops[] = {&copy};
    Tensor* outputs[] = {&output};
    ComputeQuantizedMatMuls(ops, outputs, registered ? &cache : nullptr, GetParam());
    return output;
  }

  // Compute, checked bit for bit against the reference.
  void ExpectExact(const QuantizedMatMulOperation& op, bool registered) {
    const absl::Status status =
        reference::CheckExact(reference::Compute(op), Compute(op, registered));
    EXPECT_TRUE(status.ok()) << GetParam()->qgemm->name << " " << reference::Describe(op)
                             << (registered ? " registered" : "") << ": " << status;
  }

  // A random product of each shape, both B paths, the type combinations and
  // per-tensor or per-axis parameters taken in turn.
  void ExpectShapesExact(const std::vector<Shape3>& shapes, std::mt19937_64& rng) {
    int index = 0;
    for (const Shape3& s : shapes) {
      const DataType a_type = index % 2 ? DataType::kInt8 : DataType::kUint8;
      const DataType b_type = index % 3 ? DataType::kInt8 : DataType::kUint8;
      const DataType output_type = index % 4 < 2 ? DataType::kInt8 : DataType::kUint8;
      const QuantizedMatMulOperation op =
          RandomProduct(s, a_type, b_type, output_type, index % 2 == 0, rng);
      ExpectExact(op, false);
      ExpectExact(op, true);
      ++index;
    }
  }
};

// Tile and block edges in every dimension (and so every kernel a level
// chooses, see ChooseQGemmUkernel): M around the micro-kernel rows
// and the 96-row blocks, K around quads and the depth blocks, N around
// strips, 64-column groups and column blocks; both B paths.
TEST_P(QGemmPathTest, EdgesOfEveryBlockAreExact) {
  std::mt19937_64 rng(13);
  const std::vector<Shape3> shapes = {
      {1, 1, 1},
      {1, 3, 15},
      {2, 5, 16},
      {5, 4, 17},
      {6, 63, 64},
      {7, 65, 65},
      {13, 130, 47},
      {1, 2051, 33},
      {97, 37, 257},
      {100, 2053, 70},
      {193, 8, 300},
      {3, 4100, 9},
      // 12 rows: the many_rows kernel against a registered B (its copy
      // repacked when registered), the level's own against B per request.
      {12, 513, 1100},
      {40, 1001, 7},
      {211, 4099, 16},
      {130, 2050, 15},
      {17, 67, 1},
      // Many rows (kQGemmManyRows) but few enough to stream B: a many_rows
      // kernel repacks B in each task instead of in PackB.
      {50, 2100, 90},
      // B packed whole and repacked by PackB for a many_rows kernel, over
      // whole depth blocks (whose offsets a tail of 2 quads hardly tests).
      {100, 4100, 40},
      // One or two rows against a registered B: all of K in one block, on
      // the strip kernels and (N <= 16) the narrow path.
      {2, 4100, 40},
      {2, 4100, 9},
      {1, 4100, 9}};
  ExpectShapesExact(shapes, rng);
}

// The tile path's edges (qgemm_ukernel_amx-inl.h), on every table: M around
// the 16-row tiles, the 32-row blocks and the rows from which the tiles run
// (kQGemmAmxMinRows); K around the 64-byte tile step (whole steps, a tail of
// 1..15 quads, K not a multiple of 4); N around one and two strips.
TEST_P(QGemmPathTest, TileEdgesAreExact) {
  std::mt19937_64 rng(22);
  const std::vector<Shape3> shapes = {{kQGemmAmxMinRows - 1, 64, 32},
                                      {kQGemmAmxMinRows, 64, 32},
                                      {16, 128, 16},
                                      {17, 65, 33},
                                      {31, 127, 47},
                                      {32, 256, 64},
                                      {33, 1000, 100},
                                      {48, 60, 1},
                                      {64, 2049, 31},
                                      {95, 2111, 18},
                                      {97, 4, 48},
                                      {129, 191, 96}};
  ExpectShapesExact(shapes, rng);
}

// All eight type combinations at the largest K, with operands that push the
// int32 accumulator to within a few thousand of overflowing: the u8 x s8
// rewrite and its corrections must still give the exact sum.
TEST_P(QGemmPathTest, EveryTypeCombinationIsExactAtTheLargestK) {
  constexpr uint32_t kK = 33025;
  for (DataType a_type : {DataType::kUint8, DataType::kInt8}) {
    for (DataType b_type : {DataType::kUint8, DataType::kInt8}) {
      for (DataType output_type : {DataType::kUint8, DataType::kInt8}) {
        // 17 columns take the strip path, 15 the narrow one; 24 rows (kQGemmManyRows) a level's
        // many-rows kernel (AVX2: B repacked into int16 pairs).
        for (auto [negative, n, m] :
             {std::tuple{false, 17u, 3u}, std::tuple{true, 17u, 3u}, std::tuple{false, 15u, 3u},
              std::tuple{true, 15u, 3u}, std::tuple{false, 17u, 24u}, std::tuple{true, 17u, 24u}}) {
          // (a - za) and (b - zb) of magnitude 255 each, sign by `negative`.
          const bool a_signed = a_type == DataType::kInt8, b_signed = b_type == DataType::kInt8;
          const uint8_t a_high = a_signed ? 0x7f : 0xff, a_low = a_signed ? 0x80 : 0x00;
          const uint8_t b_high = b_signed ? 0x7f : 0xff, b_low = b_signed ? 0x80 : 0x00;
          QuantizedMatMulTensors t;
          auto filled = [](DataType type, Shape sizes, uint8_t byte) {
            Tensor tensor = Tensor::Allocate(type, sizes);
            std::memset(tensor.mutable_data(), byte, tensor.byte_size());
            return tensor;
          };
          t.a = filled(a_type, {m, kK}, a_high);
          t.a_zero_point = filled(a_type, {1, 1, 1, 1}, a_low);
          t.b = filled(b_type, {kK, n}, negative ? b_low : b_high);
          t.b_zero_point = filled(b_type, {1, 1, 1, 1}, negative ? b_high : b_low);
          t.a_scale = filled(DataType::kFloat32, {1, 1, 1, 1}, 0);
          t.b_scale = filled(DataType::kFloat32, {1, 1, 1, 1}, 0);
          t.output_scale = filled(DataType::kFloat32, {1, 1, 1, 1}, 0);
          const float one = 1.0f, output_scale = 33554432.0f;  // 2^25
          std::memcpy(t.a_scale.mutable_data(), &one, 4);
          std::memcpy(t.b_scale.mutable_data(), &one, 4);
          std::memcpy(t.output_scale.mutable_data(), &output_scale, 4);
          absl::StatusOr<QuantizedMatMulOperation> op =
              MakeQuantizedMatMulOperation(std::move(t), output_type);
          ASSERT_TRUE(op.ok()) << op.status();
          ExpectExact(*op, false);
          ExpectExact(*op, true);
        }
      }
    }
  }
}

// Many rows with per-row and per-column quantization, through the path that
// packs B whole and splits rows into blocks and A into panels.
// B sent with the request and multiplied by many rows, with a repacked copy
// (AVX2) large enough to be written with streaming stores (8 MiB), from
// which the strips are then dropped.
TEST_P(QGemmPathTest, LargeRepackedBPerRequestIsExact) {
  const QGemmUkernel* many_rows = GetParam()->qgemm->many_rows;
  if (many_rows == nullptr || many_rows->repack_b == nullptr) {
    GTEST_SKIP() << GetParam()->qgemm->name << " reads no repacked B";
  }
  std::mt19937_64 rng(20);
  // Whole chunks and tasks of strips packed straight into the repacked
  // layout, the edges through the strips; the larger B's copy written with
  // streaming stores.
  for (Shape3 shape : {Shape3{97, 2050, 2070}, Shape3{120, 1030, 288}}) {
    for (DataType b_type : {DataType::kInt8, DataType::kUint8}) {
      const QuantizedMatMulOperation op =
          RandomProduct(shape, DataType::kUint8, b_type, DataType::kUint8, true, rng);
      ExpectExact(op, false);
    }
  }
}

// When the driver packs a B sent with the request a panel at a time inside
// tasks that keep their rows (StreamedBTaskRows): only for a large B and
// more rows than a task's, up to two row blocks of equal size, never for a
// level whose kernels read B in a form only packing it whole makes (AVX2's
// 7-bit and many-rows kernels).
TEST_P(QGemmPathTest, StreamedBTaskRowsFollowTheirRules) {
  const QGemmUkernel& level = *GetParam()->qgemm;
  const bool packs_whole = level.seven_bit_b != nullptr || level.many_rows != nullptr;
  constexpr uint64_t kMaxTaskRows = 4 * kQGemmRowBlock;
  EXPECT_EQ(StreamedBTaskRows(level, kQGemmRowBlock, 4096, 4096), 0u);        // few rows
  EXPECT_EQ(StreamedBTaskRows(level, 2 * kMaxTaskRows + 1, 4096, 4096), 0u);  // many rows
  if (level.blocking.streamed_b_min_bytes == 0) {
    EXPECT_EQ(StreamedBTaskRows(level, 256, 1000, 777), 0u);  // a B that stays in the caches
  } else {
    EXPECT_NE(StreamedBTaskRows(level, 256, 1000, 777), 0u) << level.name;  // a test's threshold
  }
  for (uint64_t rows : {uint64_t{97}, uint64_t{256}, kMaxTaskRows, kMaxTaskRows + 1, uint64_t{500},
                        2 * kMaxTaskRows}) {
    const size_t task_rows = StreamedBTaskRows(level, rows, 4096, 4096);
    if (packs_whole) {
      EXPECT_EQ(task_rows, 0u) << level.name << " " << rows;
      continue;
    }
    EXPECT_EQ(task_rows % static_cast<size_t>(level.mr), 0u) << level.name << " " << rows;
    EXPECT_LE(task_rows, kMaxTaskRows) << level.name << " " << rows;
    EXPECT_GE(2 * task_rows, rows) << level.name << " " << rows;  // at most two row blocks
    if (rows <= kMaxTaskRows) {
      EXPECT_GE(task_rows, rows) << level.name << " " << rows;  // one row block
    }
  }
}

// A large B (8.4 MB, K and N off every block) sent with the request and
// multiplied by more rows than a task's, in one row block (100 rows) and two
// (500): packed a panel at a time inside the tasks, the product is bit for
// bit the one B packed whole gives (registered; the other tests check that
// path against the reference, which would take seconds at this size).
TEST_P(QGemmPathTest, LargeBPerRequestStreamedIntoTasksIsExact) {
  const QGemmUkernel& level = *GetParam()->qgemm;
  constexpr uint32_t kK = 2050, kN = 4100;
  if (StreamedBTaskRows(level, 500, kK, kN) == 0) {
    GTEST_SKIP() << level.name << " packs such a B whole";
  }
  if (level.isa == CpuIsa::kGeneric) {
    // The scalar kernels and the tile model run this path on small products
    // against the reference instead (the *_streamed_b tables).
    GTEST_SKIP() << level.name << " is scalar: too slow at this size";
  }
  std::mt19937_64 rng(21);
  for (const uint32_t m : {100u, 500u}) {
    ASSERT_NE(StreamedBTaskRows(level, m, kK, kN), 0u);
    const bool second = m == 500;
    const QuantizedMatMulOperation op = RandomProduct(
        {m, kK, kN}, second ? DataType::kInt8 : DataType::kUint8,
        second ? DataType::kUint8 : DataType::kInt8, DataType::kInt8, /*per_axis=*/second, rng);
    const Tensor streamed = Compute(op, false);
    const Tensor whole = Compute(op, true);
    ASSERT_EQ(streamed.byte_size(), whole.byte_size());
    EXPECT_EQ(std::memcmp(streamed.data(), whole.data(), whole.byte_size()), 0)
        << level.name << " " << reference::Describe(op);
  }
}

TEST_P(QGemmPathTest, LargePerAxisProductIsExact) {
  std::mt19937_64 rng(14);
  const QuantizedMatMulOperation op =
      RandomProduct({300, 700, 333}, DataType::kInt8, DataType::kUint8, DataType::kInt8, true, rng);
  ExpectExact(op, false);
  ExpectExact(op, true);
}

// A random product whose B' (B, or B - 128 for UINT8) lies in [-64, 63],
// both ends included many times.
QuantizedMatMulOperation SevenBitProduct(Shape3 s, DataType a_type, DataType b_type,
                                         std::mt19937_64& rng) {
  QuantizedMatMulOperation op = RandomProduct(s, a_type, b_type, DataType::kInt8, true, rng);
  const int shift = b_type == DataType::kUint8 ? 128 : 0;
  std::uniform_int_distribution<int> value(-64, 63);
  uint8_t* b = op.b.mutable_data();
  for (uint64_t i = 0; i < op.b.byte_size(); ++i) {
    const int v = i % 11 == 0 ? -64 : i % 13 == 0 ? 63 : value(rng);
    b[i] = static_cast<uint8_t>(v + shift);
  }
  return op;
}

// A B whose strips take 8 MiB or more is packed a chunk at a time in L2 and
// streamed out: 7-bit (the strips kept for the 7-bit kernel where a level has
// one), and with one wider value in its last chunk (the chunks before it
// repacked afterwards from the streamed strips). Registered: PackB for any
// rows, read by the few-rows kernels (3 rows) and the many-rows one (12).
TEST_P(QGemmPathTest, LargeStreamedStripsAreExact) {
  std::mt19937_64 rng(21);
  for (bool outlier : {false, true}) {
    for (uint32_t rows : {3u, 12u}) {
      QuantizedMatMulOperation op =
          SevenBitProduct({rows, 4100, 2100}, DataType::kUint8, DataType::kInt8, rng);
      if (outlier) op.b.mutable_data()[uint64_t{4099} * 2100 + 2099] = static_cast<uint8_t>(-128);
      ExpectExact(op, true);
    }
  }
}

// 7-bit weights, int8 or uint8, packed whole (registered, or many rows) or
// streamed: where the kernel has a seven_bit_b kernel it runs, and must be
// exact.
TEST_P(QGemmPathTest, SevenBitWeightsAreExact) {
  std::mt19937_64 rng(16);
  for (DataType a_type : {DataType::kUint8, DataType::kInt8}) {
    for (DataType b_type : {DataType::kInt8, DataType::kUint8}) {
      for (Shape3 s : {Shape3{130, 1003, 40}, Shape3{7, 64, 33}, Shape3{200, 2051, 16}}) {
        const QuantizedMatMulOperation op = SevenBitProduct(s, a_type, b_type, rng);
        ExpectExact(op, true);
        ExpectExact(op, false);
      }
    }
  }
}

// One quad just outside 7 bits in an otherwise 7-bit B must keep the exact
// kernel. The product is built so that vpmaddubsw's saturation would show:
// column 37 is zero but for 4 values of -65 (or 65) against A' = 255, so its
// sum is 4 * 255 * -65 = -66300 where saturated pairs give -65536, and the
// output scale puts the two 1.4 output steps apart.
TEST_P(QGemmPathTest, WeightsJustPastSevenBitsAreExact) {
  std::mt19937_64 rng(17);
  constexpr uint32_t kM = 130, kK = 516, kN = 40;
  for (DataType b_type : {DataType::kInt8, DataType::kUint8}) {
    for (int outside : {-65, 65}) {
      const int shift = b_type == DataType::kUint8 ? 128 : 0;
      QuantizedMatMulTensors t;
      auto filled = [](DataType type, Shape sizes, uint8_t byte) {
        Tensor tensor = Tensor::Allocate(type, sizes);
        std::memset(tensor.mutable_data(), byte, tensor.byte_size());
        return tensor;
      };
      auto scalar = [](float value) {
        Tensor tensor = Tensor::Allocate(DataType::kFloat32, {1, 1, 1, 1});
        std::memcpy(tensor.mutable_data(), &value, 4);
        return tensor;
      };
      t.a = filled(DataType::kUint8, {kM, kK}, 255);
      t.a_zero_point = filled(DataType::kUint8, {1, 1, 1, 1}, 0);
      t.b = filled(b_type, {kK, kN}, static_cast<uint8_t>(shift));
      t.b_zero_point = filled(b_type, {1, 1, 1, 1}, static_cast<uint8_t>(shift));
      std::uniform_int_distribution<int> value(-64, 63);
      for (uint32_t i = 0; i < kK * kN; i += 5) {
        if (i % kN != 37) t.b.mutable_data()[i] = static_cast<uint8_t>(value(rng) + shift);
      }
      for (uint32_t k = 508; k < 512; ++k) {
        t.b.mutable_data()[k * kN + 37] = static_cast<uint8_t>(outside + shift);
      }
      t.a_scale = scalar(1);
      t.b_scale = scalar(1);
      t.output_scale = scalar(552.5f);
      t.output_zero_point = filled(DataType::kInt8, {1, 1, 1, 1}, 0);
      absl::StatusOr<QuantizedMatMulOperation> op =
          MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8);
      ASSERT_TRUE(op.ok()) << op.status();
      ExpectExact(*op, true);
      ExpectExact(*op, false);
    }
  }
}

// Which of AVX2's kernels multiplies a product: the 7-bit kernel first, the
// one-strip kernel for N <= 16, the many-rows kernel from 24 rows, or from 12
// when B's repacked copy already exists (a registered B), else the level's.
// A kernel whose blocking asks for A copied (QGemmBlocking::copy_a) gets A'
// in rows of whole 64-byte lines plus one (never a multiple of 4 KiB, so 64
// consecutive rows start in 64 different L1 sets), zeros past K, and the
// same sums as the bytes it would have used in place.
TEST(QGemmPackingTest, CopiedARowsDodgeL1Sets) {
  std::mt19937 rng(23);
  static const QGemmUkernel* const copying_kernel =
      QGemmUkernelWithBlocking(*AmxModelQGemmUkernel(), {.copy_a = true}, "amx_model_copy_a");
  const QGemmUkernel& copying = *copying_kernel;
  for (bool is_signed : {false, true}) {
    for (size_t k : {size_t{3}, size_t{64}, size_t{1000}, size_t{4096}}) {
      std::vector<uint8_t> source(7 * k);
      for (uint8_t& v : source) v = static_cast<uint8_t>(rng());
      std::vector<ARowSource> rows;
      for (size_t i = 0; i < 7; ++i) rows.push_back({source.data() + i * k, is_signed});
      PackedA copied;
      PackA(rows, k, copying, AmxModelCpuKernels(), /*sums=*/true, copied);
      EXPECT_FALSE(copied.raw_signed);
      EXPECT_NE(copied.data, source.data());
      EXPECT_EQ(copied.stride, PackedAStride(k, copying));
      EXPECT_EQ(copied.stride, (k + 63) / 64 * 64 + 64) << "k=" << k;
      EXPECT_NE(copied.stride % 4096, 0u) << "k=" << k;
      PackedA shifted;  // the portable level's copy: A' and its sums
      PackA(rows, k, *GenericQGemmUkernel(), PortableTable(), /*sums=*/true, shifted);
      EXPECT_EQ(copied.row_sums, shifted.row_sums) << "k=" << k;
      for (size_t i = 0; i < rows.size(); ++i) {
        const uint8_t* row =
            copied.rows(i / copying.mr * copying.mr) + (i % copying.mr) * copied.stride;
        for (size_t j = 0; j < copied.stride; ++j) {
          const int expected = j < k ? (source[i * k + j] ^ (is_signed ? 0x80 : 0)) : 0;
          ASSERT_EQ(row[j], expected) << "row " << i << " byte " << j << " k=" << k;
        }
      }
    }
  }
}

TEST(QGemmPackingTest, ChooseQGemmUkernelPicksByBRowsAndColumns) {
  const QGemmUkernel* avx2 = Avx2QGemmUkernel();
  if (avx2 == nullptr) GTEST_SKIP() << "not x86-64";
  struct Case {
    bool seven_bit;
    size_t n;
    uint64_t rows;
    bool b_repacked;
    const QGemmUkernel* expected;
  };
  for (const Case& c :
       {Case{true, 4096, 256, true, avx2->seven_bit_b}, Case{false, 16, 256, true, avx2->one_strip},
        Case{false, 17, 24, false, avx2->many_rows}, Case{false, 17, 23, false, avx2},
        Case{false, 17, 12, true, avx2->many_rows}, Case{false, 17, 11, true, avx2},
        Case{false, 17, 1, true, avx2}}) {
    EXPECT_EQ(&ChooseQGemmUkernel(*avx2, c.seven_bit, c.n, c.rows, c.b_repacked), c.expected)
        << "seven_bit " << c.seven_bit << " n " << c.n << " rows " << c.rows << " b_repacked "
        << c.b_repacked;
  }
}

// PackB says whether B' fits 7 bits, and only then (and only for a level
// with a 7-bit kernel).
TEST(QGemmPackingTest, PackBFindsSevenBitWeights) {
  std::mt19937_64 rng(18);
  for (DataType b_type : {DataType::kInt8, DataType::kUint8}) {
    const int shift = b_type == DataType::kUint8 ? 128 : 0;
    for (auto [low, high, fits] :
         {std::tuple{-64, 63, true}, std::tuple{-65, 63, false}, std::tuple{-64, 64, false},
          std::tuple{-128, 127, false}, std::tuple{0, 0, true}}) {
      QuantizedMatMulOperation op =
          RandomProduct({3, 67, 45}, DataType::kUint8, b_type, DataType::kInt8, false, rng);
      uint8_t* b = op.b.mutable_data();
      std::uniform_int_distribution<int> value(low, high);
      for (uint64_t i = 0; i < op.b.byte_size(); ++i)
        b[i] = static_cast<uint8_t>(value(rng) + shift);
      b[66 * 45 + 44] = static_cast<uint8_t>(low + shift);  // both ends present
      b[0] = static_cast<uint8_t>(high + shift);
      for (const CpuKernels* table : AvailableCpuKernels()) {
        // Checked only for a kernel that has a 7-bit kernel to use.
        EXPECT_EQ(PackB(op, 0, *table)->seven_bit, fits && table->qgemm->seven_bit_b != nullptr)
            << table->qgemm->name << " [" << low << ", " << high << "]";
      }
    }
  }
}

// Strips of 8 MiB or more are packed a chunk at a time in L2 and streamed
// out: the same bytes, column sums and repacked copy as packing B whole in
// place, at every level, packed for any rows (registered) and for one product
// of 200 rows; 7-bit, and with one wider value in the last chunk.
TEST(QGemmPackingTest, LargeStripsAreStreamedExactly) {
  std::mt19937_64 rng(22);
  constexpr uint32_t kK = 4100, kN = 2100;
  for (bool outlier : {false, true}) {
    QuantizedMatMulOperation op =
        SevenBitProduct({3, kK, kN}, DataType::kUint8, DataType::kInt8, rng);
    if (outlier) op.b.mutable_data()[uint64_t{kK - 1} * kN + kN - 1] = static_cast<uint8_t>(-128);
    for (const CpuKernels* table : AvailableCpuKernels()) {
      std::shared_ptr<const PackedB> any = PackB(op, 0, *table);
      // PackB streams strips from 8 MiB (kStreamBytes): keep this case above.
      ASSERT_GE(any->strips * any->strip_stride(), size_t{8} << 20);
      // The reference: B packed whole, in place, by one call.
      std::vector<int8_t> strips(any->strips * any->strip_stride());
      std::vector<int32_t> sums(any->strips * kQGemmStripColumns, 0);
      PackBPanel({BSource::Of(op, 0), 0, any->quads, 0, any->strips, strips.data(),
                  any->strip_stride(), sums.data()},
                 *table);
      std::vector<int32_t> corrections(kN);
      for (size_t j = 0; j < kN; ++j) {
        corrections[j] =
            static_cast<int32_t>(static_cast<uint32_t>(sums[j]) -
                                 kK * static_cast<uint32_t>(any->columns.zero_points[j]));
      }
      std::vector<int8_t> repacked;
      if (any->repacked_by != nullptr) {
        repacked.resize(any->strips * any->repacked_strip_stride());
        for (size_t s = 0; s < any->strips; ++s) {
          any->repacked_by(strips.data() + s * any->strip_stride(), any->quads,
                           repacked.data() + s * any->repacked_strip_stride());
        }
      }
      for (std::shared_ptr<const PackedB> packed : {any, PackB(op, 0, *table, 200)}) {
        const std::string where = std::string(table->qgemm->name) + (outlier ? " outlier" : "") +
                                  (packed == any ? " any rows" : " 200 rows");
        EXPECT_EQ(packed->corrections, corrections) << where;
        if (packed->values != nullptr) {
          for (size_t s = 0; s < packed->strips; ++s) {
            ASSERT_EQ(0, std::memcmp(packed->strip(s), strips.data() + s * any->strip_stride(),
                                     packed->quads * kQGemmQuadBytes))
                << where << " strip " << s;
          }
        }
        if (packed->repacked_by != nullptr) {
          ASSERT_EQ(packed->repacked_by, any->repacked_by) << where;
          EXPECT_EQ(0, std::memcmp(packed->repacked.get(), repacked.data(), repacked.size()))
              << where;
        }
        // Every level keeps what its kernels read: the strips, or (AVX2, B
        // wider than 7 bits, for one product) the repacked copy alone.
        EXPECT_TRUE(packed->values != nullptr || packed->repacked_by != nullptr) << where;
      }
    }
  }
}

// One value past 7 bits anywhere (any task of 16 strips, any chunk of 128
// quads, the last row and column) clears PackB's 7-bit flag; and the copy
// repacked for AVX2's many-rows kernel exists exactly when that kernel would
// read it (N > 16, B not 7-bit).
TEST(QGemmPackingTest, PackBChecksEveryValueAndRepacksOnlyWhatIsRead) {
  if (!CpuRunsIsa(CpuIsa::kAvx2)) GTEST_SKIP() << "no AVX2";
  const CpuKernels& avx2_table = CpuKernelsFor(CpuIsa::kAvx2);
  const QGemmUkernel* avx2 = avx2_table.qgemm;
  std::mt19937_64 rng(19);
  constexpr uint32_t kK = 1030, kN = 290;  // 3 chunks of quads, 2 tasks of strips
  for (auto [k, j] : {std::pair{kK - 1, kN - 1}, std::pair{600u, 270u}, std::pair{5u, 3u},
                      std::pair{kK - 1, 0u}, std::pair{1u << 31, 0u}}) {
    for (DataType b_type : {DataType::kInt8, DataType::kUint8}) {
      QuantizedMatMulOperation op = SevenBitProduct({3, kK, kN}, DataType::kUint8, b_type, rng);
      const bool outlier = k < kK;
      const int shift = b_type == DataType::kUint8 ? 128 : 0;
      if (outlier) op.b.mutable_data()[uint64_t{k} * kN + j] = static_cast<uint8_t>(-65 + shift);
      std::shared_ptr<const PackedB> packed = PackB(op, 0, avx2_table);
      EXPECT_EQ(packed->seven_bit, !outlier) << "k=" << k << " j=" << j;
      EXPECT_EQ(packed->repacked_by != nullptr, outlier) << "k=" << k << " j=" << j;
      EXPECT_NE(packed->values, nullptr);
      EXPECT_EQ(packed->byte_size(),
                packed->strips * (packed->strip_stride() + packed->repacked_strip_stride()) +
                    kN * (2 * sizeof(int32_t) + sizeof(float)));
      // Packed for one product of many rows: the strips are kept only when
      // the 7-bit kernel reads them, the repacked copy only otherwise.
      std::shared_ptr<const PackedB> once = PackB(op, 0, avx2_table, 200);
      EXPECT_EQ(once->seven_bit, !outlier);
      EXPECT_EQ(once->values != nullptr, !outlier) << "k=" << k << " j=" << j;
      EXPECT_EQ(once->repacked_by != nullptr, outlier) << "k=" << k << " j=" << j;
      EXPECT_EQ(once->byte_size(), once->strips * ((outlier ? 0 : once->strip_stride()) +
                                                   once->repacked_strip_stride()) +
                                       kN * (2 * sizeof(int32_t) + sizeof(float)));
      if (outlier) {
        // The repacked copy is the strips repacked whole, including the
        // chunks packed before the outlier was seen (repacked after the pass).
        std::vector<int8_t> expected(packed->strips * packed->repacked_strip_stride());
        for (size_t s = 0; s < packed->strips; ++s) {
          packed->repacked_by(packed->strip(s), packed->quads,
                              expected.data() + s * packed->repacked_strip_stride());
        }
        EXPECT_EQ(0, std::memcmp(packed->repacked.get(), expected.data(), expected.size()))
            << "k=" << k << " j=" << j;
        // For one product the chunks after the outlier's are packed straight
        // into the repacked layout (pack_repacked_b), with the same bytes and
        // column sums.
        EXPECT_EQ(0, std::memcmp(once->repacked.get(), packed->repacked.get(),
                                 once->strips * once->repacked_strip_stride()))
            << "k=" << k << " j=" << j;
        EXPECT_EQ(once->corrections, packed->corrections) << "k=" << k << " j=" << j;
      }
    }
  }
  // One strip: B is repacked (widened) for the one-strip kernel, whatever
  // the rows.
  QuantizedMatMulOperation narrow =
      RandomProduct({3, 100, 16}, DataType::kUint8, DataType::kInt8, DataType::kInt8, false, rng);
  std::shared_ptr<const PackedB> narrow_packed = PackB(narrow, 0, avx2_table);
  ASSERT_NE(avx2->one_strip, nullptr);
  EXPECT_EQ(narrow_packed->repacked_by, avx2->one_strip->repack_b);
  EXPECT_EQ(narrow_packed->repacked_quad_bytes, avx2->one_strip->repacked_quad_bytes);
}

INSTANTIATE_TEST_SUITE_P(EveryMicroKernel, QGemmPathTest, testing::ValuesIn(TablesUnderTest()),
                         [](const testing::TestParamInfo<const CpuKernels*>& info) {
                           return std::string(info.param->qgemm->name);
                         });

}  // namespace
}  // namespace dmlserve

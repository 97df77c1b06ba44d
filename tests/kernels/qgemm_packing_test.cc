// The int8 GEMM's packing of A and B: every ISA level's packers against the
// portable ones and the documented layouts, A copied for the tiles, B's 7-bit
// check, its repacked copy and its strips streamed, and the kernel choice.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "kernels/core/data_type.h"
#include "kernels/core/operation.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_a.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_ukernel.h"
#include "tests/kernels/qgemm_test_util.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::PortableTable;
using ::dmlserve::testing::RandomProduct;
using ::dmlserve::testing::SevenBitProduct;
using ::dmlserve::testing::SimdTables;

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

// Which of AVX2's kernels multiplies a product: the 7-bit kernel first, the
// one-strip kernel for N <= 16, the many-rows kernel from 24 rows, or from 12
// when B's repacked copy already exists (a registered B), else the level's.
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

}  // namespace
}  // namespace dmlserve

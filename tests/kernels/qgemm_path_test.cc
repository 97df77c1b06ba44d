// Whole int8 products through the driver on every micro-kernel (every level
// the CPU runs, the tile model, the blockings and streamed-B thresholds
// lowered for the tests), against the reference bit for bit: B registered,
// per request, streamed into tasks, 7-bit, every edge.

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/core/data_type.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_driver.h"
#include "kernels/cpu/qgemm_ukernel.h"
#include "kernels/cpu/quantized_matmul_kernels.h"
#include "tests/kernels/qgemm_test_util.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::ComputeWithTable;
using ::dmlserve::testing::RandomProduct;
using ::dmlserve::testing::SevenBitProduct;
using ::dmlserve::testing::Shape3;
using ::dmlserve::testing::TablesUnderTest;

class QGemmPathTest : public ::testing::TestWithParam<const CpuKernels*> {
 protected:
  // Runs `op` on this test's micro-kernel, B registered or not.
  Tensor Compute(const QuantizedMatMulOperation& op, bool registered) {
    return ComputeWithTable(op, *GetParam(), registered);
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

// Many rows with per-row and per-column quantization, through the path that
// packs B whole and splits rows into blocks and A into panels.
TEST_P(QGemmPathTest, LargePerAxisProductIsExact) {
  std::mt19937_64 rng(14);
  const QuantizedMatMulOperation op =
      RandomProduct({300, 700, 333}, DataType::kInt8, DataType::kUint8, DataType::kInt8, true, rng);
  ExpectExact(op, false);
  ExpectExact(op, true);
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

INSTANTIATE_TEST_SUITE_P(EveryMicroKernel, QGemmPathTest, ::testing::ValuesIn(TablesUnderTest()),
                         [](const ::testing::TestParamInfo<const CpuKernels*>& info) {
                           return std::string(info.param->qgemm->name);
                         });

}  // namespace
}  // namespace dmlserve

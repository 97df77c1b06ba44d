// The scalar model of the AMX tile instructions against their definition
// (Intel SDM), the faults it shares with the hardware, and how the tile
// kernel is chosen and leaves the thread's tiles. The tile kernel's exactness
// is in qgemm_*_test.cc (the model's table and, on AMX CPUs, the real one, in
// every suite there).

#include "kernels/cpu/amx_tiles.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_a.h"
#include "kernels/cpu/qgemm_ukernel.h"
#include "kernels/cpu/quantized_matmul_kernels.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

TileConfig Config(std::initializer_list<std::tuple<int, int, int>> tiles) {
  TileConfig config;
  for (auto [tile, rows, colsb] : tiles) {
    config.rows[tile] = static_cast<uint8_t>(rows);
    config.colsb[tile] = static_cast<uint16_t>(colsb);
  }
  return config;
}

// TDPBUSD and TDPBSSD over partial shapes (rows < 16, fewer than 16 dwords of depth and
// columns), from memory with strides, against the SDM's definition computed
// here; a load reads only the configured rows and bytes (the buffers end
// there: ASan catches more), and a store writes only them.
TEST(AmxTileModelTest, DotProductFollowsTheDefinition) {
  std::mt19937 rng(3);
  for (auto [m, depth, n] :
       {std::tuple{16, 16, 16}, std::tuple{5, 3, 7}, std::tuple{1, 16, 1}, std::tuple{13, 9, 16}}) {
    const size_t a_stride = 4 * depth + 9, b_stride = 4 * n + 3, c_stride = 4 * n + 12;
    std::vector<uint8_t> a((m - 1) * a_stride + 4 * depth);
    std::vector<int8_t> b((depth - 1) * b_stride + 4 * n);
    std::vector<int32_t> c_in((m - 1) * c_stride / 4 + n);
    for (uint8_t& v : a) v = static_cast<uint8_t>(rng());
    for (int8_t& v : b) v = static_cast<int8_t>(rng());
    for (int32_t& v : c_in) v = static_cast<int32_t>(rng());
    a[0] = b[0] = 0;  // and extremes
    a[1] = 255;
    b[1] = -128;
    for (bool signed_a : {false, true}) {
      AmxTileModel::LoadConfig(Config({{0, m, 4 * n}, {1, m, 4 * depth}, {2, depth, 4 * n}}));
      AmxTileModel::LoadTile(0, c_in.data(), c_stride);
      AmxTileModel::LoadTile(1, a.data(), a_stride);
      AmxTileModel::LoadTile(2, b.data(), b_stride);
      if (signed_a) {
        AmxTileModel::DotProductBssd(0, 1, 2);
      } else {
        AmxTileModel::DotProductBusd(0, 1, 2);
      }
      std::vector<int32_t> got(c_in.size(), 77);
      AmxTileModel::StoreTile(0, got.data(), c_stride);
      AmxTileModel::Release();
      EXPECT_FALSE(AmxTileModel::Configured());
      std::vector<int32_t> want(c_in.size(), 77);
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          uint32_t sum = static_cast<uint32_t>(c_in[i * c_stride / 4 + j]);
          for (int k = 0; k < 4 * depth; ++k) {
            const uint8_t byte = a[i * a_stride + k];
            const int32_t x = signed_a ? int32_t{static_cast<int8_t>(byte)} : int32_t{byte};
            sum += static_cast<uint32_t>(x * int32_t{b[(k / 4) * b_stride + 4 * j + k % 4]});
          }
          want[i * c_stride / 4 + j] = static_cast<int32_t>(sum);
        }
      }
      EXPECT_EQ(got, want) << m << "x" << depth << "x" << n << (signed_a ? " tdpbssd" : " tdpbusd");
    }
  }
}

// Where the hardware faults (#UD or #GP), the model stops the program and
// names the rule: a test that breaks one fails even without AMX.
TEST(AmxTileModelTest, FaultsWhereTheHardwareWould) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  uint8_t bytes[16 * 64] = {};
  EXPECT_DEATH(AmxTileModel::LoadTile(0, bytes, 64), "before LDTILECFG");
  EXPECT_DEATH(AmxTileModel::LoadConfig(Config({{0, 17, 64}})), "rows <= 16");
  EXPECT_DEATH(AmxTileModel::LoadConfig(Config({{0, 16, 68}})), "colsb <= 64");
  EXPECT_DEATH(AmxTileModel::LoadConfig(Config({{0, 16, 0}})), "both zero or both not");
  EXPECT_DEATH(AmxTileModel::LoadConfig(Config({{8, 1, 4}})), "tiles 8..15");
  EXPECT_DEATH(
      {
        AmxTileModel::LoadConfig(Config({{0, 16, 64}, {1, 16, 64}}));
        AmxTileModel::LoadTile(2, bytes, 64);
      },
      "not configured");
  EXPECT_DEATH(
      {
        AmxTileModel::LoadConfig(Config({{0, 8, 64}, {1, 16, 64}, {2, 16, 64}}));
        AmxTileModel::DotProductBusd(0, 1, 2);
      },
      "rows\\[a\\] == rows\\[c\\]");
  EXPECT_DEATH(
      {
        AmxTileModel::LoadConfig(Config({{0, 16, 64}, {1, 16, 64}, {2, 15, 64}}));
        AmxTileModel::DotProductBusd(0, 1, 2);
      },
      "rows\\[b\\] == colsb\\[a\\] / 4");
  EXPECT_DEATH(
      {
        AmxTileModel::LoadConfig(Config({{0, 16, 64}, {1, 16, 64}, {2, 16, 32}}));
        AmxTileModel::DotProductBusd(0, 1, 2);
      },
      "colsb\\[b\\] == colsb\\[c\\]");
}

// The amx level hands products of fewer than kQGemmAmxMinRows rows whole to
// the AVX-512 VNNI kernel (memory-bound: the tiles gain nothing there), and
// runs the rest on the tiles; registered B is packed the same for both.
TEST(AmxLevelTest, FewRowsGoToTheVectorKernel) {
  const QGemmUkernel& tiles = *AmxModelCpuKernels().qgemm;
  ASSERT_NE(tiles.few_rows, nullptr);
  EXPECT_EQ(tiles.few_rows, CpuKernelsFor(CpuIsa::kAvx512Vnni).qgemm);
  EXPECT_EQ(&QGemmLevelKernel(tiles, 1), tiles.few_rows);
  EXPECT_EQ(&QGemmLevelKernel(tiles, kQGemmAmxMinRows - 1), tiles.few_rows);
  EXPECT_EQ(&QGemmLevelKernel(tiles, kQGemmAmxMinRows), &tiles);
  EXPECT_EQ(&QGemmLevelKernel(tiles, kPackBAnyRows), &tiles);
  // A level without a few_rows kernel keeps every product.
  const QGemmUkernel& vnni = *CpuKernelsFor(CpuIsa::kAvx512Vnni).qgemm;
  EXPECT_EQ(&QGemmLevelKernel(vnni, 1), &vnni);
  if (const QGemmUkernel* amx = AmxQGemmUkernel()) {
    EXPECT_EQ(amx->few_rows, Avx512VnniQGemmUkernel());
    EXPECT_EQ(amx->min_rows, kQGemmAmxMinRows);
    EXPECT_EQ(amx->mr, tiles.mr);
    EXPECT_EQ(amx->max_strips, tiles.max_strips);
  }
}

// On the tiles an INT8 A, like a UINT8 one, is read in place (the signed_a
// kernel multiplies it as it is): PackA copies neither, and sums the INT8
// rows as signed values; the vector levels copy it shifted, as before.
TEST(AmxLevelTest, Int8AIsReadInPlace) {
  constexpr size_t kRows = 40, kK = 100;
  std::vector<uint8_t> bytes(kRows * kK);
  std::mt19937 rng(9);
  for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng());
  std::vector<ARowSource> rows(kRows);
  for (size_t i = 0; i < kRows; ++i) rows[i] = {bytes.data() + i * kK, /*is_signed=*/true};
  const CpuKernels& tiles = AmxModelCpuKernels();
  PackedA packed;
  PackA(rows, kK, *tiles.qgemm, tiles, /*sums=*/true, packed);
  EXPECT_TRUE(packed.raw_signed);
  EXPECT_EQ(packed.rows(0), bytes.data());
  for (size_t i = 0; i < kRows; ++i) {
    int32_t want = 0;
    for (size_t k = 0; k < kK; ++k) want += static_cast<int8_t>(bytes[i * kK + k]);
    ASSERT_EQ(packed.row_sums[i], want) << i;
  }
  const CpuKernels& vnni = CpuKernelsFor(CpuIsa::kAvx512Vnni);
  PackedA copied;
  PackA(rows, kK, *vnni.qgemm, vnni, /*sums=*/true, copied);
  EXPECT_FALSE(copied.raw_signed);
  EXPECT_NE(copied.rows(0), bytes.data());
}

// A product on the tiles leaves the thread's tiles released (the driver ends
// each task with QGemmUkernel::release): a small product runs on the calling
// thread alone, so its tiles are this thread's.
TEST(AmxLevelTest, TilesAreReleasedAfterEachProduct) {
  std::mt19937_64 rng(5);
  QuantizedMatMulTensors t;
  auto bytes = [&](DataType type, Shape sizes) {
    Tensor tensor = Tensor::Allocate(type, sizes);
    for (uint64_t i = 0; i < tensor.byte_size(); ++i) {
      tensor.mutable_data()[i] = static_cast<uint8_t>(rng());
    }
    return tensor;
  };
  auto scalar = [](float value) {
    Tensor tensor = Tensor::Allocate(DataType::kFloat32, {1, 1, 1, 1});
    std::memcpy(tensor.mutable_data(), &value, 4);
    return tensor;
  };
  t.a = bytes(DataType::kUint8, {40, 100});
  t.b = bytes(DataType::kInt8, {100, 40});
  t.a_scale = scalar(0.02f);
  t.b_scale = scalar(0.01f);
  t.output_scale = scalar(0.5f);
  t.a_zero_point = bytes(DataType::kUint8, {1, 1, 1, 1});
  t.b_zero_point = bytes(DataType::kInt8, {1, 1, 1, 1});
  t.output_zero_point = bytes(DataType::kInt8, {1, 1, 1, 1});
  absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8);
  ASSERT_TRUE(op.ok()) << op.status();
  Tensor output = Tensor::Allocate(op->output_data_type, op->output_sizes);
  const QuantizedMatMulOperation* ops[] = {&*op};
  Tensor* outputs[] = {&output};
  ComputeQuantizedMatMuls(ops, outputs, nullptr, &AmxModelCpuKernels());
  EXPECT_TRUE(reference::CheckExact(reference::Compute(*op), output).ok());
  EXPECT_FALSE(AmxTileModel::Configured());
}

// The level is reported by its name, and asked for by it.
TEST(AmxLevelTest, LevelIsNamedAmx) {
  EXPECT_EQ(CpuIsaName(CpuIsa::kAmx), "amx");
  EXPECT_EQ(ParseCpuIsa("amx"), CpuIsa::kAmx);
  // Where the CPU has tiles the OS refused, the note says so; else it is
  // empty and the level is what the CPU has.
  if (CpuIsaNote().empty()) {
    SUCCEED();
  } else {
    EXPECT_NE(CpuIsaNote().find("AMX tiles present but the OS refused them"),
              absl::string_view::npos);
    EXPECT_EQ(SupportedCpuIsa(), CpuIsa::kAvx512Vnni);
  }
}

}  // namespace
}  // namespace dmlserve

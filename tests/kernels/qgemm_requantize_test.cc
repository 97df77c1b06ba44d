// The int8 GEMM's epilogue: every ISA level's multipliers and requantized
// bytes against the portable code's, bit for bit, on random and extreme
// inputs.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/requantize.h"
#include "tests/kernels/qgemm_test_util.h"

namespace dmlserve {
namespace {

using ::dmlserve::testing::PortableTable;
using ::dmlserve::testing::SimdTables;

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
          ::testing::Message where;
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

}  // namespace
}  // namespace dmlserve

#include "kernels/cpu/scan_kernels.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/core/parallel_for.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/float16.h"
#include "tests/reference/random_operations.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

template <typename T>
Tensor Make(DataType type, Shape sizes, const std::vector<T>& values) {
  Tensor tensor = Tensor::Allocate(type, sizes);
  std::memcpy(tensor.mutable_data(), values.data(), values.size() * sizeof(T));
  return tensor;
}

template <typename T>
std::vector<T> Values(const Tensor& tensor) {
  std::vector<T> values(tensor.element_count());
  std::memcpy(values.data(), tensor.data(), tensor.byte_size());
  return values;
}

ScanOperation Scan(OperatorKind kind, Tensor input, uint32_t axis,
                   AxisDirection direction = AxisDirection::kIncreasing, bool exclusive = false) {
  absl::StatusOr<ScanOperation> op =
      MakeScanOperation(kind, std::move(input), axis, direction, exclusive);
  EXPECT_TRUE(op.ok()) << op.status();
  return *op;
}

Tensor RunKernel(const ScanOperation& op) {
  Tensor output = Tensor::Allocate(op.input.data_type, op.input.sizes);
  ComputeScan(op, output);
  return output;
}

TEST(ScanKernelsTest, Int32SumsWrapModulo2To32) {
  const int32_t max = std::numeric_limits<int32_t>::max();
  const ScanOperation op = Scan(OperatorKind::kCumulativeSummation,
                                Make<int32_t>(DataType::kInt32, {3}, {max, 1, -2}), 0);
  EXPECT_EQ(Values<int32_t>(RunKernel(op)),
            (std::vector<int32_t>{max, std::numeric_limits<int32_t>::min(), max - 1}));
}

TEST(ScanKernelsTest, Uint64AndInt64SumsWrap) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(Values<uint64_t>(RunKernel(Scan(OperatorKind::kCumulativeSummation,
                                            Make<uint64_t>(DataType::kUint64, {2}, {max, 3}), 0))),
            (std::vector<uint64_t>{max, 2}));
  const int64_t min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(Values<int64_t>(RunKernel(Scan(OperatorKind::kCumulativeSummation,
                                           Make<int64_t>(DataType::kInt64, {2}, {min, -1}), 0))),
            (std::vector<int64_t>{min, std::numeric_limits<int64_t>::max()}));
}

TEST(ScanKernelsTest, Uint16ProductsWrapModulo2To16) {
  // 300 * 300 = 90000 = 65536 + 24464; then * 3 = 73392 -> 7856.
  const ScanOperation op = Scan(OperatorKind::kCumulativeProduct,
                                Make<uint16_t>(DataType::kUint16, {3}, {300, 300, 3}), 0);
  EXPECT_EQ(Values<uint16_t>(RunKernel(op)), (std::vector<uint16_t>{300, 24464, 7856}));
}

TEST(ScanKernelsTest, Uint32ProductsWrapModulo2To32) {
  const ScanOperation op = Scan(OperatorKind::kCumulativeProduct,
                                Make<uint32_t>(DataType::kUint32, {3}, {0x10000u, 0x10001u, 2u}), 0,
                                AxisDirection::kIncreasing, true);
  EXPECT_EQ(Values<uint32_t>(RunKernel(op)), (std::vector<uint32_t>{1, 0x10000u, 0x10000u}));
}

TEST(ScanKernelsTest, Float16RoundsEachWrittenValueAndAccumulatesInFloat32) {
  // 2048 + 1 is a tie in half precision (spacing 2 above 2048): it rounds to
  // even (2048). The accumulator keeps 2049 exactly, so adding 1 again gives
  // 2050, which a half-precision accumulator would not.
  std::vector<uint16_t> input = {FloatToHalf(2048.0f), FloatToHalf(1.0f), FloatToHalf(1.0f)};
  const ScanOperation op =
      Scan(OperatorKind::kCumulativeSummation, Make(DataType::kFloat16, {3}, input), 0);
  const std::vector<uint16_t> out = Values<uint16_t>(RunKernel(op));
  EXPECT_EQ(HalfToFloat(out[0]), 2048.0f);
  EXPECT_EQ(HalfToFloat(out[1]), 2048.0f);
  EXPECT_EQ(HalfToFloat(out[2]), 2050.0f);
}

TEST(ScanKernelsTest, Float16ProductOverflowsToInfinity) {
  std::vector<uint16_t> input = {FloatToHalf(300.0f), FloatToHalf(300.0f), FloatToHalf(0.001f)};
  const std::vector<uint16_t> out = Values<uint16_t>(
      RunKernel(Scan(OperatorKind::kCumulativeProduct, Make(DataType::kFloat16, {3}, input), 0)));
  EXPECT_EQ(out[0], FloatToHalf(300.0f));
  EXPECT_EQ(out[1], 0x7c00);  // 90000 > 65504
  // The float32 accumulator still holds 90000, so the next value is finite.
  EXPECT_EQ(out[2], FloatToHalf(90000.0f * HalfToFloat(FloatToHalf(0.001f))));
}

TEST(ScanKernelsTest, ExclusiveDecreasingAlongAMiddleAxis) {
  // [2,3,2]: scan axis 1 from the last index down, exclusive.
  const std::vector<float> in = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const ScanOperation op =
      Scan(OperatorKind::kCumulativeSummation, Make(DataType::kFloat32, {2, 3, 2}, in), 1,
           AxisDirection::kDecreasing, true);
  EXPECT_EQ(Values<float>(RunKernel(op)),
            (std::vector<float>{8, 10, 5, 6, 0, 0, 20, 22, 11, 12, 0, 0}));
}

// FLOAT16 scans accumulate sequentially in float32 and round every written
// value to nearest even: exactly this loop, bit for bit, whichever conversion
// instructions the kernel uses.
TEST(ScanKernelsTest, Float16MatchesFloat32AccumulationBitForBit) {
  reference::RandomOperationGenerator generator(13);
  for (OperatorKind kind : {OperatorKind::kCumulativeSummation, OperatorKind::kCumulativeProduct}) {
    for (const Shape& sizes : {Shape{37, 3}, Shape{5, 11, 19}, Shape{300}}) {
      for (bool exclusive : {false, true}) {
        // The last axis (one line per row) or the first (lanes across rows).
        const uint32_t axis = exclusive ? static_cast<uint32_t>(sizes.size() - 1) : 0;
        const ScanOperation op = Scan(kind, generator.RandomTensor(kind, DataType::kFloat16, sizes),
                                      axis, AxisDirection::kIncreasing, exclusive);
        std::vector<uint16_t> want(op.input.element_count());
        const uint16_t* in = op.input.data_as<uint16_t>();
        for (uint64_t o = 0; o < op.outer; ++o) {
          for (uint64_t n = 0; n < op.inner; ++n) {
            float acc = kind == OperatorKind::kCumulativeSummation ? 0.0f : 1.0f;
            for (uint64_t i = 0; i < op.axis_size; ++i) {
              const uint64_t index = (o * op.axis_size + i) * op.inner + n;
              if (exclusive) want[index] = FloatToHalf(acc);
              const float x = HalfToFloat(in[index]);
              acc = kind == OperatorKind::kCumulativeSummation ? acc + x : acc * x;
              if (!exclusive) want[index] = FloatToHalf(acc);
            }
          }
        }
        EXPECT_EQ(Values<uint16_t>(RunKernel(op)), want) << reference::Describe(op);
      }
    }
  }
}

// Every axis, direction and exclusivity of one integer tensor, exactly.
TEST(ScanKernelsTest, EveryAxisAndDirectionMatchesTheReference) {
  reference::RandomOperationGenerator generator(11);
  for (OperatorKind kind : {OperatorKind::kCumulativeSummation, OperatorKind::kCumulativeProduct}) {
    for (DataType type : SupportedDataTypes(kind)) {
      const Tensor input = generator.RandomTensor(kind, type, {3, 5, 1, 7, 2});
      for (uint32_t axis = 0; axis < 5; ++axis) {
        for (AxisDirection direction : {AxisDirection::kIncreasing, AxisDirection::kDecreasing}) {
          for (bool exclusive : {false, true}) {
            const ScanOperation op = Scan(kind, input, axis, direction, exclusive);
            const absl::Status status = reference::CheckOutput(op, RunKernel(op));
            EXPECT_TRUE(status.ok()) << reference::Describe(op) << ": " << status;
          }
        }
      }
    }
  }
}

// Large enough for ParallelFor to split the work: across lane chunks, across
// outer slabs, and along the axis itself (two-pass segmented scan).
TEST(ScanKernelsTest, LargeTensorsTakeTheMultiThreadedPaths) {
  reference::RandomOperationGenerator generator(5);
  const std::vector<std::pair<Shape, uint32_t>> shapes = {
      {{1 << 20}, 0},      // one long line: segmented
      {{3, 300000}, 1},    // a few long lines: segmented, several units
      {{512, 2048}, 1},    // many rows along the last axis
      {{256, 4096}, 0},    // lane chunks across the inner dimension
      {{2, 40000, 3}, 1},  // short lanes, long axis: segmented
  };
  for (const auto& [sizes, axis] : shapes) {
    for (OperatorKind kind :
         {OperatorKind::kCumulativeSummation, OperatorKind::kCumulativeProduct}) {
      for (DataType type : {DataType::kFloat32, DataType::kUint32, DataType::kFloat16}) {
        for (bool exclusive : {false, true}) {
          const AxisDirection direction =
              exclusive ? AxisDirection::kDecreasing : AxisDirection::kIncreasing;
          const ScanOperation op =
              Scan(kind, generator.RandomTensor(kind, type, sizes), axis, direction, exclusive);
          const absl::Status status = reference::CheckOutput(op, RunKernel(op));
          EXPECT_TRUE(status.ok()) << reference::Describe(op) << ": " << status;
        }
      }
    }
  }
}

// Integer scans are exact whatever the association order, so the split scan
// must equal the sequential one bit for bit.
TEST(ScanKernelsTest, SegmentedIntegerScanIsExact) {
  reference::RandomOperationGenerator generator(9);
  for (DataType type : {DataType::kInt64, DataType::kInt32, DataType::kUint64}) {
    const ScanOperation op =
        Scan(OperatorKind::kCumulativeSummation,
             generator.RandomTensor(OperatorKind::kCumulativeSummation, type, {1 << 19}), 0,
             AxisDirection::kDecreasing, true);
    const absl::Status status = reference::CheckExact(reference::Compute(op), RunKernel(op));
    EXPECT_TRUE(status.ok()) << DataTypeName(type) << ": " << status;
  }
}

// Every instruction-set path this CPU has (generic C++, AVX2, AVX-512), forced
// in turn, against the reference: every kind, type, axis, direction and
// exclusivity on shapes whose lines and rows end in every vector tail
// (1..15 leftover elements), plus the large-tensor paths (chained pieces
// along the axis, non-temporal stores, decreasing). Integers exactly; floats
// within the spec's tolerance.
class ScanIsaTest : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    if (GetParam() > SupportedCpuIsa()) {
      GTEST_SKIP() << CpuIsaName(GetParam()) << " is not supported by this CPU";
    }
    SetCpuIsaForTesting(GetParam());
  }
  void TearDown() override { SetCpuIsaForTesting(std::nullopt); }

  // Into a separate output, and in place (the CPU device scans a request's
  // own bytes in place when nothing else holds them).
  static void Check(const ScanOperation& op) {
    const absl::Status status = reference::CheckOutput(op, RunKernel(op));
    EXPECT_TRUE(status.ok()) << CpuIsaName(GetParam()) << " " << reference::Describe(op) << ": "
                             << status;
    ScanOperation in_place = op;
    in_place.input.bytes = Buffer::Copy(op.input.bytes->view());
    Tensor output = in_place.input;
    ComputeScan(in_place, output);
    const absl::Status in_place_status = reference::CheckOutput(op, output);
    EXPECT_TRUE(in_place_status.ok()) << CpuIsaName(GetParam()) << " in place "
                                      << reference::Describe(op) << ": " << in_place_status;
  }

  // A tensor big enough for the multi-threaded and streaming paths.
  struct LargeCase {
    OperatorKind kind;
    DataType type;
    Shape sizes;
    uint32_t axis;
  };
  static constexpr OperatorKind kSum = OperatorKind::kCumulativeSummation;
  static constexpr OperatorKind kProduct = OperatorKind::kCumulativeProduct;

  // Each case inclusive and exclusive, in the given directions.
  static void CheckLarge(uint64_t seed, const std::vector<LargeCase>& cases,
                         std::initializer_list<std::pair<bool, AxisDirection>> variants) {
    ASSERT_GE(ParallelismLevel(), 2) << "CTest runs this with DMLSERVE_CPU_THREADS=4";
    reference::RandomOperationGenerator generator(seed);
    for (const LargeCase& c : cases) {
      const Tensor input = generator.RandomTensor(c.kind, c.type, c.sizes);
      for (const auto& [exclusive, direction] : variants) {
        Check(Scan(c.kind, input, c.axis, direction, exclusive));
      }
    }
  }
};

TEST_P(ScanIsaTest, EveryAxisTypeAndTailMatchesTheReference) {
  reference::RandomOperationGenerator generator(21);
  const std::vector<Shape> shapes = {{1},         {5},          {17},          {33},
                                     {3, 70},     {4, 19, 5},   {2, 3, 1, 41}, {1, 130, 17},
                                     {2, 47, 31}, {6, 1, 9, 24}};
  for (OperatorKind kind : {OperatorKind::kCumulativeSummation, OperatorKind::kCumulativeProduct}) {
    for (DataType type : SupportedDataTypes(kind)) {
      for (const Shape& sizes : shapes) {
        const Tensor input = generator.RandomTensor(kind, type, sizes);
        for (uint32_t axis = 0; axis < sizes.size(); ++axis) {
          for (AxisDirection direction : {AxisDirection::kIncreasing, AxisDirection::kDecreasing}) {
            for (bool exclusive : {false, true}) {
              Check(Scan(kind, input, axis, direction, exclusive));
            }
          }
        }
      }
    }
  }
}

TEST_P(ScanIsaTest, LargeTensorsChainPiecesAndStreamStores) {
  CheckLarge(23,
             {
                 // One line longer than the cache: chained pieces, non-temporal stores.
                 {kSum, DataType::kFloat32, {(1 << 22) + 13}, 0},
                 {kSum, DataType::kInt64, {(1 << 21) + 7}, 0},
                 {kProduct, DataType::kUint16, {(1 << 23) + 3}, 0},
                 // Three long lines (fewer than the threads): chained per line.
                 {kSum, DataType::kFloat16, {3, (1 << 21) + 5}, 1},
                 // Rows: lane chunks across a wide inner dimension, streamed.
                 {kProduct, DataType::kUint32, {1025, 4099}, 0},
                 // Rows with few lanes and a long axis: chained pieces of rows.
                 {kSum, DataType::kUint32, {2, 300001, 5}, 1},
                 {kProduct, DataType::kFloat32, {1, 200003, 19}, 1},
             },
             {{false, AxisDirection::kIncreasing}, {true, AxisDirection::kDecreasing}});
}

// Rows narrower than a vector (every inner width 1..17 across the strided
// axis) and short contiguous lines (lengths 1..33): several rows or lines per
// vector, with vector tails, slabs restarting inside a vector, both
// directions and exclusive, every type.
TEST_P(ScanIsaTest, NarrowRowsAndShortLinesMatchTheReference) {
  reference::RandomOperationGenerator generator(29);
  std::vector<std::pair<Shape, uint32_t>> shapes;
  for (uint32_t width = 1; width <= 17; ++width) {
    shapes.push_back({{83, width}, 0});       // one slab, long axis, tails
    shapes.push_back({{3, 41, width}, 1});    // a few slabs, each a stream
    shapes.push_back({{7, 3, width}, 1});     // short slabs: restart in a vector
    shapes.push_back({{5, 2, 2, width}, 2});  // two rows per slab
  }
  for (uint32_t length = 1; length <= 33; ++length) shapes.push_back({{29, length}, 1});
  // Many short segments of odd length, one or several lines each: streams
  // long enough for the vectors (16 of them) on every level, whose phases
  // cycle through every in-segment offset.
  for (const auto& [sizes, axis] : std::vector<std::pair<Shape, uint32_t>>{
           {{64, 7}, 1}, {{40, 5, 3}, 1}, {{50, 3, 2}, 1}, {{33, 2, 5}, 1}, {{23, 11}, 1}}) {
    shapes.push_back({sizes, axis});
  }
  for (OperatorKind kind : {OperatorKind::kCumulativeSummation, OperatorKind::kCumulativeProduct}) {
    for (DataType type : SupportedDataTypes(kind)) {
      for (const auto& [sizes, axis] : shapes) {
        const Tensor input = generator.RandomTensor(kind, type, sizes);
        for (AxisDirection direction : {AxisDirection::kIncreasing, AxisDirection::kDecreasing}) {
          for (bool exclusive : {false, true}) {
            Check(Scan(kind, input, axis, direction, exclusive));
          }
        }
      }
    }
  }
}

// Narrow rows and short lines big enough to split across threads: one slab
// chained in pieces along the axis (reduce, then scan), slabs whose starts
// are not vector-aligned, and outputs past the non-temporal threshold.
TEST_P(ScanIsaTest, LargeNarrowRowsChainAndStream) {
  CheckLarge(31,
             {
                 {kSum, DataType::kFloat32, {(1 << 20) + 3, 4}, 0},  // streamed
                 {kSum, DataType::kInt32, {(1 << 19) + 5, 7}, 0},
                 {kSum, DataType::kInt64, {(1 << 18) + 1, 3}, 0},
                 {kSum, DataType::kUint64, {3, 100003, 8}, 1},
                 {kSum, DataType::kFloat16, {(1 << 19) + 7, 2}, 0},
                 {kProduct, DataType::kUint16, {(1 << 20) + 9, 5}, 0},
                 {kProduct, DataType::kUint32, {2, 200001, 16}, 1},
                 {kProduct, DataType::kFloat32, {1, 300007, 12}, 1},
                 {kSum, DataType::kFloat32, {(1 << 20) + 1, 7}, 1},  // short lines
                 {kSum, DataType::kUint32, {(1 << 19) + 3, 3}, 1},
                 {kSum, DataType::kInt64, {(1 << 17) + 1, 5, 3}, 1},  // short slabs
             },
             {{false, AxisDirection::kIncreasing},
              {false, AxisDirection::kDecreasing},
              {true, AxisDirection::kIncreasing},
              {true, AxisDirection::kDecreasing}});
}

INSTANTIATE_TEST_SUITE_P(Isa, ScanIsaTest,
                         ::testing::Values(CpuIsa::kGeneric, CpuIsa::kAvx2, CpuIsa::kAvx512Vnni),
                         [](const ::testing::TestParamInfo<CpuIsa>& info) {
                           return std::string(CpuIsaName(info.param));
                         });

}  // namespace
}  // namespace dmlserve

#include "tests/reference/random_operations.h"

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/kernels/run_on_cpu.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

// Hundreds of random operations of every kind, each checked against the
// reference under the spec's comparison rules.
TEST(RandomOperationsTest, CpuMatchesTheReference) {
  reference::RandomOperationGenerator generator(20240601);
  std::map<std::string, int> coverage;
  for (int i = 0; i < 600; ++i) {
    const Operation operation = generator.Next();
    absl::StatusOr<Tensor> output = RunOnCpu(operation);
    ASSERT_TRUE(output.ok()) << output.status();
    const absl::Status status = reference::CheckOutput(operation, *output);
    ASSERT_TRUE(status.ok()) << "case " << i << ": " << reference::Describe(operation) << ": "
                             << status;
    if (const auto* scan = std::get_if<ScanOperation>(&operation)) {
      coverage[std::string(OperatorName(scan->kind)) + " " +
               std::string(DataTypeName(scan->input.data_type))]++;
    } else {
      const auto& m = std::get<QuantizedMatMulOperation>(operation);
      coverage[std::string("matmul ") + std::string(DataTypeName(m.a.data_type)) + "x" +
               std::string(DataTypeName(m.b.data_type)) + "->" +
               std::string(DataTypeName(m.output_data_type))]++;
    }
  }
  // Every scan type and all eight matmul type combinations came up.
  EXPECT_EQ(coverage.size(), 6u + 4u + 8u);
}

// Integer results are exact, and so are the CPU's matrix multiplies (it
// requantizes in float64 exactly like the reference).
TEST(RandomOperationsTest, IntegerResultsAreBitExact) {
  reference::RandomOperationGenerator generator(77);
  for (int i = 0; i < 300; ++i) {
    const Operation operation = generator.Next();
    if (const auto* scan = std::get_if<ScanOperation>(&operation)) {
      const DataType type = scan->input.data_type;
      if (type == DataType::kFloat32 || type == DataType::kFloat16) continue;
    }
    absl::StatusOr<Tensor> output = RunOnCpu(operation);
    ASSERT_TRUE(output.ok()) << output.status();
    const absl::Status status = reference::CheckExact(reference::Compute(operation), *output);
    ASSERT_TRUE(status.ok()) << reference::Describe(operation) << ": " << status;
  }
}

// The checker itself must catch wrong answers.
TEST(RandomOperationsTest, CheckerRejectsPerturbedOutputs) {
  reference::RandomOperationGenerator generator(5);
  int checked = 0;
  for (int i = 0; i < 100; ++i) {
    const Operation operation = generator.Next();
    Tensor output = reference::Compute(operation);
    ASSERT_TRUE(reference::CheckOutput(operation, output).ok());
    // Flip a high bit of the last element's most significant byte.
    const size_t size = DataTypeSize(output.data_type);
    uint8_t* last = output.mutable_data() + output.byte_size() - 1;
    *last ^= (size == 1) ? 0x40 : 0x20;
    EXPECT_FALSE(reference::CheckOutput(operation, output).ok()) << reference::Describe(operation);
    ++checked;
  }
  EXPECT_EQ(checked, 100);
}

}  // namespace
}  // namespace dmlserve

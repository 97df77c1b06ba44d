#include "tests/reference/conformance.h"

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/kernels/run_on_cpu.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

std::vector<reference::ConformanceCase> Cases() {
  absl::StatusOr<std::vector<reference::ConformanceCase>> cases = reference::LoadConformanceCases();
  EXPECT_TRUE(cases.ok()) << cases.status();
  return cases.ok() ? *cases : std::vector<reference::ConformanceCase>{};
}

TEST(ConformanceTest, LoadsEveryExample) {
  const std::vector<reference::ConformanceCase> cases = Cases();
  // Both shared files: the eight documented scan examples and the matmuls.
  int scans = 0, matmuls = 0;
  for (const auto& c : cases) {
    (KindOf(c.operation) == OperatorKind::kQuantizedLinearMatrixMultiply ? matmuls : scans)++;
  }
  EXPECT_EQ(scans, 8);
  EXPECT_GE(matmuls, 5);
}

TEST(ConformanceTest, CpuDeviceReproducesEveryExampleExactly) {
  for (const reference::ConformanceCase& c : Cases()) {
    SCOPED_TRACE(c.file + ": " + c.name);
    absl::StatusOr<Tensor> output = RunOnCpu(c.operation);
    ASSERT_TRUE(output.ok()) << output.status();
    EXPECT_TRUE(reference::CheckExact(c.expected, *output).ok())
        << reference::CheckExact(c.expected, *output);
  }
}

TEST(ConformanceTest, ReferenceReproducesEveryExampleExactly) {
  for (const reference::ConformanceCase& c : Cases()) {
    SCOPED_TRACE(c.file + ": " + c.name);
    const Tensor output = reference::Compute(c.operation);
    EXPECT_TRUE(reference::CheckExact(c.expected, output).ok())
        << reference::CheckExact(c.expected, output);
  }
}

TEST(ConformanceTest, ExamplesRunTogetherAsOneBatch) {
  std::vector<reference::ConformanceCase> cases = Cases();
  std::vector<Operation> operations;
  for (const auto& c : cases) operations.push_back(c.operation);
  absl::StatusOr<std::vector<Tensor>> outputs = RunBatchOnCpu(operations);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  ASSERT_EQ(outputs->size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(reference::CheckExact(cases[i].expected, (*outputs)[i]).ok()) << cases[i].name;
  }
}

TEST(ConformanceTest, MissingDirectoryIsAnError) {
  EXPECT_FALSE(reference::LoadConformanceCases("/nonexistent/conformance").ok());
}

}  // namespace
}  // namespace dmlserve

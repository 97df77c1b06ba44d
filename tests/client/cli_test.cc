// dmlserve-cli run as a subprocess against the real server: flags form,
// JSON request files, conformance cases, and errors with their exit codes.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/cli/json_tensor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "tests/client/conformance_file.h"
#include "tests/client/run_process.h"
#include "tests/client/shared_server.h"
#include "tests/reference/reference.h"
#include "tests/server/server_process.h"

namespace dmlserve::client {
namespace {

using cli::Json;
using ::testing::HasSubstr;
using testing::ProcessResult;

class CliTest : public ::testing::Test {
 protected:
  ProcessResult Cli(std::vector<std::string> args) {
    args.insert(args.begin(), {DMLSERVE_CLI, "--server", testing::SharedServer().grpc_address()});
    absl::StatusOr<ProcessResult> result = testing::RunProcess(args);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : ProcessResult();
  }

  static Json ParseOutput(const ProcessResult& result) {
    Json json = Json::parse(result.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(json.is_discarded()) << "stdout: " << result.out << "\nstderr: " << result.err;
    return json;
  }

  std::string WriteTemp(const std::string& name, const std::string& text) {
    const std::string path = absl::StrCat(::testing::TempDir(), "/", name);
    std::ofstream(path) << text;
    temp_files_.push_back(path);
    return path;
  }

  void TearDown() override {
    for (const std::string& path : temp_files_) std::remove(path.c_str());
  }

  std::vector<std::string> temp_files_;
};

TEST_F(CliTest, CumsumFromFlags) {
  const std::vector<float> input = {2, 1, 3, 5, 3, 8, 7, 3, 9, 6, 2, 4};
  const ProcessResult result =
      Cli({"cumsum", "--sizes", "1,1,3,4", "--values", "2,1,3,5,3,8,7,3,9,6,2,4", "--axis", "3",
           "--exclusive", "--reverse", "--deadline_ms", "30000"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const Json json = ParseOutput(result);
  EXPECT_EQ(json["output"]["data_type"], "FLOAT32");
  EXPECT_EQ(json["output"]["sizes"], Json::array({1, 1, 3, 4}));
  const absl::StatusOr<ScanOperation> op = MakeScanOperation(
      OperatorKind::kCumulativeSummation,
      reference::TensorFromValues(::dmlserve::DataType::kFloat32, {1, 1, 3, 4},
                                  std::vector<double>(input.begin(), input.end())),
      3, AxisDirection::kDecreasing, /*exclusive=*/true);
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(json["output"]["values"].get<std::vector<double>>(),
            reference::TensorToValues(reference::ComputeScan(*op)));
  EXPECT_FALSE(json["info"]["device"].get<std::string>().empty());
}

TEST_F(CliTest, CumprodOfIntegersFromFlags) {
  const ProcessResult result = Cli({"cumprod", "--dtype", "UINT16", "--sizes", "2,3", "--values",
                                    "1,2,3,4,5,6", "--axis", "1", "--request_id", "p1"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const Json json = ParseOutput(result);
  EXPECT_EQ(json["request_id"], "p1");
  EXPECT_EQ(json["output"]["values"], Json::array({1, 2, 6, 4, 20, 120}));
}

TEST_F(CliTest, RunsRequestFileInProtoJsonForm) {
  const std::string path = WriteTemp("request.json", R"({
    "request_id": "from-file",
    "cumulative_summation": {
      "input": {"data_type": "INT64", "sizes": [2, 2], "values": [1, -2, 3, 4]},
      "axis": 0, "axis_direction": "AXIS_DIRECTION_INCREASING"}})");
  const ProcessResult result = Cli({"run", path});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const Json json = ParseOutput(result);
  EXPECT_EQ(json["request_id"], "from-file");
  EXPECT_EQ(json["output"]["data_type"], "INT64");
  EXPECT_EQ(json["output"]["values"], Json::array({1, -2, 4, 2}));
}

TEST_F(CliTest, RunsAConformanceCaseDirectly) {
  for (const std::string& file : testing::ConformanceFiles()) {
    const Json whole = Json::parse(testing::ReadTextFile(file));
    for (const char* op :
         {"cumulative_summation", "cumulative_product", "quantized_linear_matrix_multiply"}) {
      bool has_op = false;
      for (const Json& c : whole["cases"]) has_op = has_op || c["operator"] == op;
      if (!has_op) continue;
      const Json test_case = testing::FirstCaseJson(file, op);
      SCOPED_TRACE(test_case["name"].get<std::string>());
      const std::string path = WriteTemp("case.json", test_case.dump(1));
      const ProcessResult result = Cli({"run", path, "--check"});
      ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
      const Json json = ParseOutput(result);
      EXPECT_EQ(json["request_id"], test_case["name"]);
      EXPECT_EQ(json["check"], "PASS");
      // Independently of --check: the printed tensor is the expected one.
      EXPECT_EQ(json["output"]["data_type"], test_case["expected"]["data_type"]);
      EXPECT_EQ(json["output"]["sizes"], test_case["expected"]["sizes"]);
      EXPECT_EQ(json["output"]["values"].get<std::vector<double>>(),
                test_case["expected"]["values"].get<std::vector<double>>());
    }
  }
}

TEST_F(CliTest, RunsWholeConformanceFilesOverAStream) {
  for (const std::string& file : testing::ConformanceFiles()) {
    SCOPED_TRACE(file);
    const Json cases = Json::parse(testing::ReadTextFile(file))["cases"];
    const ProcessResult result = Cli({"run", file, "--check"});
    ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
    const Json json = ParseOutput(result);
    ASSERT_EQ(json["responses"].size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(json["responses"][i]["request_id"], cases[i]["name"]);
      EXPECT_EQ(json["responses"][i]["check"], "PASS") << json["responses"][i].dump();
    }
  }
  // --case_name picks one case and sends it alone.
  const std::string file = testing::ConformanceFiles().front();
  const Json first = Json::parse(testing::ReadTextFile(file))["cases"][0];
  const ProcessResult one = Cli({"run", file, "--case_name", first["name"], "--check"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(ParseOutput(one)["request_id"], first["name"]);
}

TEST_F(CliTest, CheckReportsAMismatch) {
  Json test_case = testing::FirstCaseJsonOfAnyFile("cumulative_summation");
  test_case["expected"]["values"][0] = 12345;
  const ProcessResult result = Cli({"run", WriteTemp("wrong.json", test_case.dump()), "--check"});
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_THAT(ParseOutput(result)["check"].get<std::string>(), HasSubstr("FAIL: values[0]"));
}

TEST_F(CliTest, StreamFileWithABadItemReportsItAndTheRest) {
  const std::string path = WriteTemp("requests.json", R"({"requests": [
    {"request_id": "a", "cumulative_summation": {
      "input": {"data_type": "UINT32", "sizes": [3], "values": [1, 2, 3]}}},
    {"request_id": "b", "cumulative_summation": {
      "input": {"data_type": "UINT32", "sizes": [3], "values": [1, 2, 3]}, "axis": 4}},
    {"request_id": "c", "cumulative_product": {
      "input": {"data_type": "FLOAT16", "sizes": [3], "values": [0.5, 4, -1]}}}]})");
  const ProcessResult result = Cli({"run", path});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("b: INVALID_ARGUMENT"));
  EXPECT_THAT(result.err, HasSubstr("axis"));
  const Json json = ParseOutput(result);
  ASSERT_EQ(json["responses"].size(), 3u);
  EXPECT_EQ(json["responses"][0]["output"]["values"], Json::array({1, 3, 6}));
  EXPECT_EQ(json["responses"][1]["error"]["code"], "INVALID_ARGUMENT");
  EXPECT_EQ(json["responses"][2]["output"]["data_type"], "FLOAT16");
  EXPECT_EQ(json["responses"][2]["output"]["values"], Json::array({0.5, 2.0, -2.0}));
}

TEST_F(CliTest, ServerRejectionPrintsCodeAndExitsTwo) {
  const ProcessResult result =
      Cli({"cumsum", "--sizes", "1,1,3,4", "--values", "2,1,3,5,3,8,7,3,9,6,2,4", "--axis", "4"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_TRUE(result.out.empty()) << result.out;
  EXPECT_THAT(result.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(result.err, HasSubstr("axis"));

  const ProcessResult mismatch = Cli({"cumsum", "--sizes", "2,2", "--values", "1,2,3"});
  EXPECT_EQ(mismatch.exit_code, 2);
  EXPECT_THAT(mismatch.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(mismatch.err, HasSubstr("data"));
}

TEST_F(CliTest, LocalInputErrorsNameTheValue) {
  const std::string path = WriteTemp("bad.json", R"({"cumulative_summation": {
      "input": {"data_type": "UINT8", "sizes": [2], "values": [1, 300]}}})");
  const ProcessResult bad_file = Cli({"run", path});
  EXPECT_EQ(bad_file.exit_code, 2);
  EXPECT_THAT(bad_file.err,
              HasSubstr("INVALID_ARGUMENT: cumulative_summation.input.values[1]: 300 is out of "
                        "range for UINT8"));

  const ProcessResult bad_flag = Cli({"cumsum", "--dtype", "INT8", "--values", "1,x"});
  EXPECT_EQ(bad_flag.exit_code, 2);
  EXPECT_THAT(bad_flag.err, HasSubstr("\"x\" is not a number"));

  const ProcessResult missing = Cli({"run", "/nonexistent/request.json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND"));

  const ProcessResult unknown = Cli({"frobnicate"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown subcommand"));
}

TEST_F(CliTest, UnreachableServerExitsOne) {
  absl::StatusOr<ProcessResult> result = testing::RunProcess(
      {DMLSERVE_CLI, "--server", "127.0.0.1:1", "health", "--deadline_ms", "5000"});
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->exit_code, 1);
  EXPECT_THAT(result->err, HasSubstr("UNAVAILABLE"));
}

// Without --deadline_ms a call still ends: against a server whose batches
// wait 35 s (fault injection), the CLI's 30 s default deadline expires.
TEST(CliDeadlineTest, CallsHaveADefaultDeadline) {
  // The deadline is the CLI's own: once, on the default backend, is enough.
  if (std::getenv("DMLSERVE_SERVER_ARGS") != nullptr) GTEST_SKIP() << "covered without them";
  setenv("DMLSERVE_INJECT_BATCH_DELAY_US", "35000000", 1);
  absl::StatusOr<std::unique_ptr<dmlserve::testing::ServerProcess>> server =
      dmlserve::testing::ServerProcess::Start(DMLSERVE_BINARY, {"--shutdown_timeout=1s"});
  unsetenv("DMLSERVE_INJECT_BATCH_DELAY_US");
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<ProcessResult> result =
      testing::RunProcess({DMLSERVE_CLI, "--server", (*server)->grpc_address(), "cumsum", "--sizes",
                           "3", "--values", "1,2,3"});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 1);
  EXPECT_THAT(result->err, HasSubstr("DEADLINE_EXCEEDED"));
}

TEST_F(CliTest, RegisteredWeightsThroughQmatmul) {
  ProcessResult registered = Cli({"register", "--id", "cli-weights", "--dtype", "UINT8", "--sizes",
                                  "1,1,3,2", "--values", "1,2,3,4,5,6"});
  ASSERT_EQ(registered.exit_code, 0) << registered.err;
  EXPECT_EQ(ParseOutput(registered)["tensor_id"], "cli-weights");

  const std::vector<std::string> qmatmul = {
      "qmatmul", "--a_sizes",      "1,1,2,3",     "--a_values", "1,0,1,2,1,0", "--a_scale",
      "1",       "--b_id",         "cli-weights", "--b_scale",  "2,1",         "--output_scale",
      "1",       "--output_dtype", "UINT8"};
  ProcessResult product = Cli(qmatmul);
  ASSERT_EQ(product.exit_code, 0) << product.err;
  // [[1,0,1],[2,1,0]] x [[1,2],[3,4],[5,6]] = [[6,8],[5,8]], then per-column
  // B scales 2 and 1.
  EXPECT_EQ(ParseOutput(product)["output"]["values"], Json::array({12, 8, 10, 8}));
  EXPECT_EQ(ParseOutput(product)["output"]["sizes"], Json::array({1, 1, 2, 2}));

  ProcessResult released = Cli({"release", "--id", "cli-weights"});
  ASSERT_EQ(released.exit_code, 0) << released.err;
  product = Cli(qmatmul);
  EXPECT_EQ(product.exit_code, 2);
  EXPECT_THAT(product.err, HasSubstr("cli-weights"));
  released = Cli({"release", "--id", "cli-weights"});
  EXPECT_EQ(released.exit_code, 2);
  EXPECT_THAT(released.err, HasSubstr("NOT_FOUND"));
}

TEST_F(CliTest, RegisterFromTensorFile) {
  const std::string path =
      WriteTemp("tensor.json", R"({"data_type": "FLOAT32", "sizes": [2], "values": [1.5, 2.5]})");
  const ProcessResult registered = Cli({"register", "--file", path});
  ASSERT_EQ(registered.exit_code, 0) << registered.err;
  const Json json = ParseOutput(registered);
  EXPECT_EQ(json["byte_size"], "8");  // uint64 is a string in proto3 JSON.
  const std::string id = json["tensor_id"];
  const ProcessResult sum = Cli({"cumsum", "--id", id});
  ASSERT_EQ(sum.exit_code, 0) << sum.err;
  EXPECT_EQ(ParseOutput(sum)["output"]["values"], Json::array({1.5, 4.0}));
  EXPECT_EQ(Cli({"release", "--id", id}).exit_code, 0);
}

TEST_F(CliTest, InfoAndHealth) {
  const ProcessResult info = Cli({"info"});
  ASSERT_EQ(info.exit_code, 0) << info.err;
  const Json json = ParseOutput(info);
  EXPECT_FALSE(json["version"].get<std::string>().empty());
  EXPECT_FALSE(json["devices"].empty());
  EXPECT_EQ(json["operators"].size(), 3u);

  const ProcessResult health = Cli({"health"});
  EXPECT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "SERVING\n");
}

}  // namespace
}  // namespace dmlserve::client

// --tensor_repository against the real server: tensors from DIR/manifest.json
// (.npy and raw files) serve requests by name, are read-only, reload on
// SIGHUP without failing requests in flight, and a bad repository stops
// start-up (or, on reload, changes nothing).

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/server_process.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

using ::testing::HasSubstr;

void WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A .npy file (format 1.0) of `descr` elements shaped `shape`.
std::string Npy(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': ", shape, ", }");
  // NumPy pads the header with spaces to a multiple of 64 bytes, ending in \n.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

class TensorRepositoryTest : public ServerTest {
 protected:
  static void TearDownTestSuite() { std::filesystem::remove_all(Directory()); }

  static std::filesystem::path Directory() {
    static const std::filesystem::path directory = [] {
      std::filesystem::path path = std::filesystem::path(::testing::TempDir()) /
                                   absl::StrCat("dmlserve-repository-", getpid());
      std::filesystem::create_directories(path);
      return path;
    }();
    return directory;
  }

  // Weights B (UINT8 {3,4}, .npy) and a scan input (INT32 {4}, raw).
  static void WriteRepository(int32_t first_value) {
    std::vector<uint8_t> b(12);
    for (int i = 0; i < 12; ++i) b[i] = static_cast<uint8_t>(10 * i);
    WriteFile(Directory() / "b.npy", Npy("|u1", "(3, 4)", Bytes(b)));
    WriteFile(Directory() / "values.bin", Bytes(std::vector<int32_t>{first_value, 2, 3, 4}));
    WriteFile(Directory() / "manifest.json", R"({"tensors": [
      {"id": "weights", "file": "b.npy"},
      {"id": "values", "file": "values.bin", "data_type": "INT32", "sizes": [4]}]})");
  }

  std::vector<std::string> ServerFlags() const override {
    WriteRepository(1);
    return {absl::StrCat("--tensor_repository=", Directory().string())};
  }

  // The cumulative sum of the repository's "values".
  std::vector<double> SumOfValues(grpc::Status* status) {
    v1::ExecuteRequest request;
    *request.mutable_cumulative_summation()->mutable_input() = TensorRef("values");
    v1::ExecuteResponse response;
    *status = Execute(request, &response);
    return status->ok() ? TensorValues(response.output()) : std::vector<double>{};
  }
};

TEST_F(TensorRepositoryTest, RepositoryTensorsServeRequestsByName) {
  grpc::Status status;
  EXPECT_EQ(SumOfValues(&status), (std::vector<double>{1, 3, 6, 10}));
  ASSERT_TRUE(status.ok()) << status.error_message();

  QuantizedMatMulCase c;
  c.m = 2, c.k = 3, c.n = 4;
  c.a = {1, 2, 3, 4, 5, 6};
  for (int i = 0; i < 12; ++i) c.b.push_back(10 * i);
  c.output_scale = 16;
  v1::ExecuteResponse response;
  status = Execute(MatMulRequest("by-name", c, "weights"), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(TensorValues(response.output()), QuantizedMatMulReference(c));
  EXPECT_EQ(Metric("dmlserve_tensor_repository_tensors"), 2.0);
}

TEST_F(TensorRepositoryTest, RepositoryTensorsAreReadOnly) {
  const grpc::Status released = Release("values");
  EXPECT_EQ(released.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(released.error_message(), HasSubstr("--tensor_repository"));
  std::string id;
  v1::Tensor tensor = MakeTensor(v1::INT32, {1}, {7});
  tensor.set_tensor_id("weights");
  EXPECT_EQ(Register(tensor, &id).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  grpc::Status status;
  EXPECT_EQ(SumOfValues(&status), (std::vector<double>{1, 3, 6, 10}));
}

TEST_F(TensorRepositoryTest, SighupReloadsWithoutFailingRequestsInFlight) {
  std::atomic<bool> stop{false};
  std::atomic<int> answered{0}, failed{0}, odd{0};
  std::thread load([&] {
    while (!stop.load()) {
      grpc::Status status;
      const std::vector<double> sum = SumOfValues(&status);
      if (!status.ok()) {
        ++failed;
      } else if (sum != std::vector<double>{1, 3, 6, 10} &&
                 sum != std::vector<double>{100, 102, 105, 109}) {
        ++odd;  // a mix of the old and the new set, or anything else
      }
      ++answered;
    }
  });
  WriteRepository(100);
  server_->Signal(SIGHUP);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  grpc::Status status;
  while (SumOfValues(&status) != std::vector<double>{100, 102, 105, 109} &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  stop = true;
  load.join();
  EXPECT_EQ(SumOfValues(&status), (std::vector<double>{100, 102, 105, 109}));
  EXPECT_GT(answered.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(odd.load(), 0);
  EXPECT_TRUE(WaitForMetric("dmlserve_tensor_repository_reloads_total", {{"result", "ok"}},
                            [](double count) { return count == 1; }));

  // A repository that no longer loads changes nothing.
  WriteFile(Directory() / "manifest.json", R"({"tensors": [{"id": "values"}]})");
  server_->Signal(SIGHUP);
  EXPECT_TRUE(WaitForMetric("dmlserve_tensor_repository_reloads_total", {{"result", "error"}},
                            [](double count) { return count == 1; }));
  EXPECT_EQ(SumOfValues(&status), (std::vector<double>{100, 102, 105, 109}));
  // The error line follows the metric (and comes through the server's pipe).
  EXPECT_TRUE(server_->WaitForOutput("not reloaded, the 2 tensors loaded before keep"))
      << server_->Output();
  WriteRepository(1);
}

TEST(TensorRepositoryStartupTest, ARepositoryThatDoesNotLoadStopsStartUp) {
  const std::filesystem::path directory =
      std::filesystem::path(::testing::TempDir()) / absl::StrCat("dmlserve-bad-", getpid());
  std::filesystem::create_directories(directory);
  WriteFile(directory / "values.bin", Bytes(std::vector<int32_t>{1, 2, 3}));
  WriteFile(directory / "manifest.json", R"({"tensors": [
    {"id": "values", "file": "values.bin", "data_type": "INT32", "sizes": [4]}]})");
  absl::StatusOr<ServerProcess::Exit> exit = ServerProcess::RunToExit(
      ServerBinary(), {"--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
                       absl::StrCat("--tensor_repository=", directory.string())});
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_NE(exit->exit_code, 0);
  EXPECT_THAT(exit->output, HasSubstr("manifest.json: tensors[0] (\"values\"): values.bin: "));
  EXPECT_THAT(exit->output, HasSubstr("tensor.data: 12 bytes, expected 16"));
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace dmlserve::testing

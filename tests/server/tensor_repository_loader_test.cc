// LoadTensorRepository (server/tensor_repository.h) on files made here: .npy
// headers of every supported format version, raw files, and each rule an entry
// can break, with the message naming the entry.

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/tensor_repository.h"

namespace dmlserve {
namespace {

using ::testing::HasSubstr;

std::string NpyHeader(int major, const std::string& dict) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const size_t length = header.size();
  for (size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>(length >> (8 * i));
  return out + header;
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::path(::testing::TempDir()) /
                 absl::StrCat("repository-", getpid(), "-",
                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(directory_ / name, std::ios::binary) << bytes;
  }
  absl::StatusOr<std::vector<RepositoryTensor>> Load(const std::string& manifest) {
    Write("manifest.json", manifest);
    return LoadTensorRepository(directory_.string(), 1 << 20);
  }
  void ExpectError(const std::string& manifest, const std::string& detail) {
    absl::StatusOr<std::vector<RepositoryTensor>> loaded = Load(manifest);
    ASSERT_FALSE(loaded.ok()) << manifest;
    EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(detail)) << manifest;
  }

  std::filesystem::path directory_;
};

TEST_F(LoaderTest, NpyOfEveryFormatVersionAndRawFiles) {
  const std::string floats("\0\0\x80\x3f\0\0\0\x40\0\0\x40\x40\0\0\x80\x40\0\0\xa0\x40\0\0\xc0\x40",
                           24);  // 1..6 as little-endian FLOAT32
  for (int major : {1, 2, 3}) {
    Write(absl::StrCat("v", major, ".npy"),
          NpyHeader(major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") + floats);
  }
  Write("scalar.npy", NpyHeader(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (), }") +
                          std::string(1, '\x07'));
  Write("raw.bin", floats);
  absl::StatusOr<std::vector<RepositoryTensor>> loaded = Load(R"({"tensors": [
    {"id": "v1", "file": "v1.npy"}, {"id": "v2", "file": "v2.npy", "data_type": "FLOAT32"},
    {"id": "v3", "file": "v3.npy", "sizes": [2, 3]}, {"id": "scalar", "file": "scalar.npy"},
    {"id": "raw", "file": "raw.bin", "data_type": "FLOAT32", "sizes": [3, 2]}]})");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->size(), 5u);
  for (int i = 0; i < 3; ++i) {
    const Tensor& tensor = (*loaded)[i].tensor;
    EXPECT_EQ(tensor.data_type, DataType::kFloat32);
    EXPECT_EQ(tensor.sizes, (Shape{2, 3}));
    EXPECT_EQ(tensor.data_as<float>()[5], 6.0f);
  }
  EXPECT_EQ((*loaded)[3].tensor.sizes, (Shape{1}));
  EXPECT_EQ((*loaded)[3].tensor.data()[0], 7);
  EXPECT_EQ((*loaded)[4].tensor.sizes, (Shape{3, 2}));
  EXPECT_EQ((*loaded)[4].id, "raw");
}

TEST_F(LoaderTest, EveryBrokenRuleNamesTheEntry) {
  Write("big_endian.npy",
        NpyHeader(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") + "abcd");
  Write("fortran.npy",
        NpyHeader(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }") + "abcd");
  Write("four.npy", NpyHeader(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }") +
                        std::string(4, '\0'));
  Write("raw.bin", std::string(12, '\0'));
  ExpectError("[]", "not a JSON object");
  ExpectError("{}", "needs \"tensors\"");
  ExpectError("{", "not a JSON object");
  ExpectError(R"({"tensors": [{"file": "raw.bin"}]})", "tensors[0]: needs \"id\"");
  ExpectError(R"({"tensors": [{"id": "x", "file": "missing.bin"}]})",
              "tensors[0] (\"x\"): missing.bin: cannot be read");
  ExpectError(R"({"tensors": [{"id": "x", "file": "../raw.bin"}]})", "inside the repository");
  ExpectError(R"({"tensors": [{"id": "x", "file": "/etc/passwd"}]})", "inside the repository");
  ExpectError(R"({"tensors": [{"id": "x", "file": "big_endian.npy"}]})", "dtype '>f4'");
  ExpectError(R"({"tensors": [{"id": "x", "file": "fortran.npy"}]})", "Fortran-ordered");
  ExpectError(R"({"tensors": [{"id": "x", "file": "four.npy", "data_type": "FLOAT32"}]})",
              "FLOAT32 but the file holds INT32");
  ExpectError(R"({"tensors": [{"id": "x", "file": "four.npy", "sizes": [2]}]})",
              "differ from the .npy file's shape");
  ExpectError(R"({"tensors": [{"id": "x", "file": "raw.bin"}]})",
              "a raw file needs \"data_type\" and \"sizes\"");
  ExpectError(
      R"({"tensors": [{"id": "x", "file": "raw.bin", "data_type": "FLOAT99", "sizes": [3]}]})",
      "\"FLOAT99\" is not a data type");
  ExpectError(
      R"({"tensors": [{"id": "x", "file": "raw.bin", "data_type": "INT32", "sizes": [4]}]})",
      "tensors[0] (\"x\"): raw.bin: tensor.data: 12 bytes, expected 16");
  ExpectError(R"({"tensors": [{"id": "x", "file": "raw.bin", "data_type": "INT32", "sizes": [3]},
                              {"id": "x", "file": "raw.bin", "data_type": "INT32", "sizes": [3]}]})",
              "tensors[1]: id \"x\" is given twice");
}

}  // namespace
}  // namespace dmlserve

#include "tests/client/conformance_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace dmlserve::client::testing {

std::vector<std::string> ConformanceFiles() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(DMLSERVE_CONFORMANCE_DIR)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << "cannot read " << path;
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<cli::FileRequest> LoadConformanceCases() {
  std::vector<cli::FileRequest> cases;
  for (const std::string& path : ConformanceFiles()) {
    absl::StatusOr<cli::RequestFile> file = cli::ParseRequestFile(ReadTextFile(path));
    EXPECT_TRUE(file.ok()) << path << ": " << file.status();
    if (!file.ok()) continue;
    for (cli::FileRequest& request : file->requests) cases.push_back(std::move(request));
  }
  return cases;
}

cli::Json FirstCaseJson(const std::string& file, const std::string& op) {
  const cli::Json json = cli::Json::parse(ReadTextFile(file));
  for (const cli::Json& item : json["cases"]) {
    if (item["operator"] == op) return item;
  }
  ADD_FAILURE() << "no " << op << " case in " << file;
  return cli::Json::object();
}

cli::Json FirstCaseJsonOfAnyFile(const std::string& op) {
  for (const std::string& file : ConformanceFiles()) {
    const cli::Json json = cli::Json::parse(ReadTextFile(file));
    for (const cli::Json& item : json["cases"]) {
      if (item["operator"] == op) return item;
    }
  }
  ADD_FAILURE() << "no " << op << " case in " << DMLSERVE_CONFORMANCE_DIR;
  return cli::Json::object();
}

}  // namespace dmlserve::client::testing

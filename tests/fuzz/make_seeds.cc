// Writes the fuzzers' seed corpora: every conformance case as a serialized
// ExecuteRequest (for execute_request_fuzzer) and as its own JSON file (for
// cli_request_json_fuzzer), plus a few requests of each operator by hand.
//
//   make_fuzz_seeds CONFORMANCE_DIR OUT_DIR

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "client/cli/json_request.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_fuzz_seeds CONFORMANCE_DIR OUT_DIR\n";
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path out(argv[2]);
  fs::create_directories(out / "execute_request");
  fs::create_directories(out / "cli_request_json");
  int written = 0;
  for (const auto& entry : fs::directory_iterator(argv[1])) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream file(entry.path());
    std::stringstream text;
    text << file.rdbuf();
    fs::copy_file(entry.path(), out / "cli_request_json" / entry.path().filename(),
                  fs::copy_options::overwrite_existing);
    auto parsed = dmlserve::client::cli::ParseRequestFile(text.str());
    if (!parsed.ok()) {
      std::cerr << entry.path() << ": " << parsed.status() << "\n";
      return 1;
    }
    for (const auto& request : parsed->requests) {
      std::ofstream seed(out / "execute_request" /
                             (entry.path().stem().string() + "_" + std::to_string(written++)),
                         std::ios::binary);
      seed << request.request.SerializeAsString();
    }
  }
  std::cout << "make_fuzz_seeds: " << written << " requests\n";
  return written > 0 ? 0 : 1;
}

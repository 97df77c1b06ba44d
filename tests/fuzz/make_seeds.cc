// Writes the fuzzers' seed corpora: every conformance case as a serialized
// ExecuteRequest (for execute_request_fuzzer), as its own JSON file (for
// cli_request_json_fuzzer) and as one stream of its requests (for
// execute_stream_fuzzer, whose record format that fuzzer describes; some
// streams also carry an item that is not a message, or cancel part way);
// every D3D12 kernel variant as a DXBC container and as bare program
// tokens (for dxbc_fuzzer); and KernelCaseSeed's random inputs for
// kernel_exactness_fuzzer, which reads its operation's shape, types and
// kernel path from them (short inputs read as the smallest of everything:
// these start it from shapes spread over its whole range).
//
//   make_fuzz_seeds CONFORMANCE_DIR OUT_DIR

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "client/cli/json_request.h"
#include "kernels/d3d12/shaders/kernel_abi.h"
#include "kernels/d3d12/shaders/kernel_registry.h"
#include "kernels/dxbc/container.h"
#include "tests/kernels/kernel_case.h"

namespace {

// execute_stream_fuzzer records.
void AppendSend(const std::string& message, std::string* stream) {
  stream->push_back('\0');
  stream->push_back(static_cast<char>(message.size() & 0xff));
  stream->push_back(static_cast<char>((message.size() >> 8) & 0xff));
  stream->append(message);
}
constexpr char kRepeat = 1;
constexpr char kCancel = 2;
constexpr char kHalfClose = 3;

void WriteFile(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Every kernel variant; the count written.
int WriteKernelSeeds(const std::filesystem::path& dir) {
  int written = 0;
  for (const dmlserve::d3d12::KernelKey& key : dmlserve::d3d12::AllKernelKeys()) {
    absl::StatusOr<std::vector<uint8_t>> blob = dmlserve::d3d12::BuildKernel(key);
    if (!blob.ok()) continue;
    WriteFile(dir / ("container_" + std::to_string(written)),
              "\x01" + std::string(blob->begin(), blob->end()));
    absl::StatusOr<std::vector<uint32_t>> program = dmlserve::dxbc::ExtractProgram(*blob);
    if (program.ok()) {
      WriteFile(dir / ("tokens_" + std::to_string(written)),
                "\x02" + std::string(reinterpret_cast<const char*>(program->data()),
                                     program->size() * 4));
    }
    ++written;
  }
  return written;
}

// kernel_exactness_fuzzer's seeds, the cases KernelCaseTest runs; the count
// written.
int WriteExactnessSeeds(const std::filesystem::path& dir) {
  constexpr int kSeeds = 256;
  for (int i = 0; i < kSeeds; ++i) {
    WriteFile(dir / ("random_" + std::to_string(i)), dmlserve::testing::KernelCaseSeed(i));
  }
  return kSeeds;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_fuzz_seeds CONFORMANCE_DIR OUT_DIR\n";
    return 2;
  }
  namespace fs = std::filesystem;
  const fs::path out(argv[2]);
  fs::create_directories(out / "execute_request");
  fs::create_directories(out / "cli_request_json");
  fs::create_directories(out / "execute_stream");
  fs::create_directories(out / "dxbc");
  fs::create_directories(out / "kernel_exactness");
  int written = 0;
  int file_index = 0;
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
    std::string stream;
    for (const auto& request : parsed->requests) {
      const std::string bytes = request.request.SerializeAsString();
      WriteFile(out / "execute_request" /
                    (entry.path().stem().string() + "_" + std::to_string(written++)),
                bytes);
      AppendSend(bytes, &stream);
    }
    // Every third stream also repeats its last item, then breaks (an item
    // that is not an ExecuteRequest: field 1 with a truncated length) or
    // cancels, so each ending has a seed.
    switch (file_index++ % 3) {
      case 1:
        stream.push_back(kRepeat);
        AppendSend("\x0a\xff", &stream);
        break;
      case 2:
        stream.push_back(kRepeat);
        stream.push_back(kCancel);
        break;
    }
    stream.push_back(kHalfClose);
    WriteFile(out / "execute_stream" / entry.path().stem(), stream);
  }
  const int kernels = WriteKernelSeeds(out / "dxbc");
  const int exactness = WriteExactnessSeeds(out / "kernel_exactness");
  std::cout << "make_fuzz_seeds: " << written << " requests, " << file_index << " streams, "
            << kernels << " kernels, " << exactness << " random operations\n";
  return written > 0 && kernels > 0 ? 0 : 1;
}

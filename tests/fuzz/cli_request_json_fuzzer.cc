// libFuzzer target: dmlserve-cli's request files (an ExecuteRequest in JSON,
// a list of them, a conformance case or file), parsed as `dmlserve-cli run`
// does. Every input must end in requests or an error status.

#include <cstddef>
#include <cstdint>
#include <string>

#include "client/cli/json_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)dmlserve::client::cli::ParseRequestFile(text);
  return 0;
}

#ifndef DMLSERVE_TESTS_DXBC_VKD3D_COMPILER_H_
#define DMLSERVE_TESTS_DXBC_VKD3D_COMPILER_H_

// Runs /usr/bin/vkd3d-compiler (vkd3d 1.2's DXBC -> SPIR-V compiler) on a
// blob: the independent check that vkd3d parses our containers and programs.

#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace dmlserve::dxbc::testing {

struct CompileResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

inline CompileResult RunVkd3dCompiler(const std::vector<uint8_t>& blob, const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name + ".dxbc";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(blob.data()),
              static_cast<std::streamsize>(blob.size()));
  }
  const std::string command = std::string(DMLSERVE_VKD3D_COMPILER) +
                              " -x dxbc-tpf -b spirv-binary -o /dev/null " + path + " 2>&1";
  CompileResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::remove(path.c_str());
  return result;
}

}  // namespace dmlserve::dxbc::testing

#endif  // DMLSERVE_TESTS_DXBC_VKD3D_COMPILER_H_

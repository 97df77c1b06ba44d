// dmlserve-dxbc: dumps the D3D12 kernels dmlserve builds at run time, for
// inspection with vkd3d-compiler or a D3D disassembler.
//
//   dmlserve-dxbc --list                      every kernel key the planners use
//   dmlserve-dxbc --kernel KEY -o out.dxbc    write one kernel's DXBC container
//   dmlserve-dxbc --kernel KEY --disasm       print its assembly
//   dmlserve-dxbc --disasm-file in.dxbc       verify and print any container
//   dmlserve-dxbc --all DIR                   write every kernel to DIR/<n>.dxbc
//                                             and DIR/index.txt ("<n> <key>")

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/d3d12/shaders/kernel_abi.h"
#include "kernels/d3d12/shaders/kernel_registry.h"
#include "kernels/dxbc/disassembler.h"

namespace {

int Usage() {
  std::cerr << "usage: dmlserve-dxbc --list\n"
               "       dmlserve-dxbc --kernel KEY (-o OUT.dxbc | --disasm)\n"
               "       dmlserve-dxbc --disasm-file IN.dxbc\n"
               "       dmlserve-dxbc --all DIR\n";
  return 2;
}

bool WriteFile(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

int Build(const std::string& key, std::vector<uint8_t>* blob) {
  absl::StatusOr<std::vector<uint8_t>> built = dmlserve::d3d12::BuildKernel(key);
  if (!built.ok()) {
    std::cerr << key << ": " << built.status() << "\n";
    return 1;
  }
  *blob = std::move(*built);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) return Usage();
  if (args[0] == "--list") {
    for (const std::string& key : dmlserve::d3d12::AllKernelKeys()) std::cout << key << "\n";
    return 0;
  }
  if (args[0] == "--all" && args.size() == 2) {
    std::ofstream index(args[1] + "/index.txt");
    int n = 0;
    for (const std::string& key : dmlserve::d3d12::AllKernelKeys()) {
      std::vector<uint8_t> blob;
      if (Build(key, &blob) != 0) return 1;
      const std::string path = absl::StrCat(args[1], "/", n, ".dxbc");
      if (!WriteFile(path, blob)) {
        std::cerr << "cannot write " << path << "\n";
        return 1;
      }
      index << n << " " << key << "\n";
      ++n;
    }
    return index ? 0 : 1;
  }
  if (args[0] == "--disasm-file" && args.size() == 2) {
    std::ifstream in(args[1], std::ios::binary);
    std::vector<uint8_t> blob((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    absl::StatusOr<std::string> text = dmlserve::dxbc::DisassembleContainer(blob);
    if (!text.ok()) {
      std::cerr << args[1] << ": " << text.status() << "\n";
      return 1;
    }
    std::cout << *text;
    return 0;
  }
  if (args[0] == "--kernel" && args.size() >= 3) {
    std::vector<uint8_t> blob;
    if (Build(args[1], &blob) != 0) return 1;
    if (args[2] == "--disasm") {
      absl::StatusOr<std::string> text = dmlserve::dxbc::DisassembleContainer(blob);
      if (!text.ok()) {
        std::cerr << text.status() << "\n";
        return 1;
      }
      std::cout << "// " << args[1] << "\n" << *text;
      return 0;
    }
    if (args[2] == "-o" && args.size() == 4) {
      if (!WriteFile(args[3], blob)) {
        std::cerr << "cannot write " << args[3] << "\n";
        return 1;
      }
      return 0;
    }
  }
  return Usage();
}

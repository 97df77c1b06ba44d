#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/d3d12/shaders/kernel_assembler.h"

namespace dmlserve::d3d12 {
namespace {

constexpr const char* kShapeName = "t16x16m8n8k8";
const char* TypeName(bool is_signed) { return is_signed ? "s8" : "u8"; }

const char* OutputName(QmmOutput output) {
  switch (output) {
    case QmmOutput::kInt8:
      return "s8";
    case QmmOutput::kUint8:
      return "u8";
    case QmmOutput::kInt32Partial:
      return "i32";
  }
  return "?";
}

}  // namespace

std::string QuantizedMatMulKernelSpec::Key() const {
  return absl::StrCat("qmm.gemm/", TypeName(a_signed), "/", TypeName(b_signed), "/",
                      OutputName(output), "/", kShapeName, "/",
                      accumulate == QmmAccumulate::kFloat32 ? "f32" : "i32", masked ? "m" : "");
}

absl::StatusOr<QuantizedMatMulKernelSpec> QuantizedMatMulKernelSpec::Parse(absl::string_view key) {
  const std::vector<absl::string_view> parts = absl::StrSplit(key, '/');
  const absl::Status bad =
      absl::InvalidArgumentError(absl::StrCat("bad quantized matmul kernel key: ", key));
  if (parts.size() != 6 || parts[0] != "qmm.gemm" || parts[4] != kShapeName) return bad;
  QuantizedMatMulKernelSpec spec;
  absl::string_view accumulate = parts[5];
  spec.masked = absl::ConsumeSuffix(&accumulate, "m");
  if (accumulate == "f32") {
    spec.accumulate = QmmAccumulate::kFloat32;
  } else if (accumulate == "i32") {
    spec.accumulate = QmmAccumulate::kInt32;
  } else {
    return bad;
  }
  bool* fields[] = {&spec.a_signed, &spec.b_signed};
  for (int i = 0; i < 2; ++i) {
    if (parts[i + 1] != "s8" && parts[i + 1] != "u8") return bad;
    *fields[i] = parts[i + 1] == "s8";
  }
  if (parts[3] == "s8") {
    spec.output = QmmOutput::kInt8;
  } else if (parts[3] == "u8") {
    spec.output = QmmOutput::kUint8;
  } else if (parts[3] == "i32") {
    spec.output = QmmOutput::kInt32Partial;
  } else {
    return bad;
  }
  return spec;
}

std::string QuantizedMatMulReduceSpec::Key() const {
  return absl::StrCat("qmm.reduce/", TypeName(output_signed));
}

absl::StatusOr<QuantizedMatMulReduceSpec> QuantizedMatMulReduceSpec::Parse(absl::string_view key) {
  QuantizedMatMulReduceSpec spec;
  if (key == "qmm.reduce/s8" || key == "qmm.reduce/u8") {
    spec.output_signed = key == "qmm.reduce/s8";
    return spec;
  }
  return absl::InvalidArgumentError(absl::StrCat("bad quantized matmul reduce kernel key: ", key));
}

std::string QuantizedMatMulRowsSpec::Key() const {
  return absl::StrCat("qmm.rows/", TypeName(a_signed), "/", TypeName(b_signed), "/r", rows);
}

absl::StatusOr<QuantizedMatMulRowsSpec> QuantizedMatMulRowsSpec::Parse(absl::string_view key) {
  const std::vector<absl::string_view> parts = absl::StrSplit(key, '/');
  const absl::Status bad =
      absl::InvalidArgumentError(absl::StrCat("bad quantized matmul rows kernel key: ", key));
  if (parts.size() != 4 || parts[0] != "qmm.rows") return bad;
  QuantizedMatMulRowsSpec spec;
  bool* fields[] = {&spec.a_signed, &spec.b_signed};
  for (int i = 0; i < 2; ++i) {
    if (parts[i + 1] != "s8" && parts[i + 1] != "u8") return bad;
    *fields[i] = parts[i + 1] == "s8";
  }
  const absl::string_view r = parts[3];
  if (r == "r1" || r == "r2" || r == "r4" || r == "r8" || r == "r16") {
    spec.rows = static_cast<uint32_t>(std::stoi(std::string(r.substr(1))));
    return spec;
  }
  return bad;
}

absl::StatusOr<QuantizedMatMulKernelShape> QuantizedMatMulShapeOf(absl::string_view key) {
  QuantizedMatMulKernelShape shape;
  if (absl::StartsWith(key, "qmm.rows/")) {
    absl::StatusOr<QuantizedMatMulRowsSpec> spec = QuantizedMatMulRowsSpec::Parse(key);
    if (!spec.ok()) return spec.status();
    shape.tile_m = spec->rows;
    shape.tile_n = QuantizedMatMulRowsSpec::tile_n();
    shape.k_per_iteration = 8 * spec->octs_in_flight();
    shape.thread_macs_per_iteration =
        spec->rows * QuantizedMatMulRowsSpec::kColumnsPerThread * shape.k_per_iteration;
    shape.split_k_partials = true;
    return shape;
  }
  if (absl::StartsWith(key, "qmm.reduce/") || key == QuantizedMatMulPackSpec::kKey) {
    return absl::NotFoundError(absl::StrCat(key, " does no multiply-adds"));
  }
  absl::StatusOr<QuantizedMatMulKernelSpec> spec = QuantizedMatMulKernelSpec::Parse(key);
  if (!spec.ok()) return spec.status();
  shape.tile_m = QuantizedMatMulKernelSpec::tile_m();
  shape.tile_n = QuantizedMatMulKernelSpec::tile_n();
  shape.k_per_iteration = QuantizedMatMulKernelSpec::kStepValues;
  shape.thread_macs_per_iteration = QuantizedMatMulKernelSpec::kMicroM *
                                    QuantizedMatMulKernelSpec::kMicroN *
                                    QuantizedMatMulKernelSpec::kStepValues;
  shape.split_k_partials = spec->output == QmmOutput::kInt32Partial;
  return shape;
}

absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulKernelForKey(absl::string_view key) {
  if (absl::StartsWith(key, "qmm.rows/")) {
    absl::StatusOr<QuantizedMatMulRowsSpec> spec = QuantizedMatMulRowsSpec::Parse(key);
    if (!spec.ok()) return spec.status();
    return BuildQuantizedMatMulRowsKernel(*spec);
  }
  if (absl::StartsWith(key, "qmm.reduce/")) {
    absl::StatusOr<QuantizedMatMulReduceSpec> spec = QuantizedMatMulReduceSpec::Parse(key);
    if (!spec.ok()) return spec.status();
    return BuildQuantizedMatMulReduceKernel(*spec);
  }
  if (key == QuantizedMatMulPackSpec::kKey) return BuildQuantizedMatMulPackKernel();
  absl::StatusOr<QuantizedMatMulKernelSpec> spec = QuantizedMatMulKernelSpec::Parse(key);
  if (!spec.ok()) return spec.status();
  return BuildQuantizedMatMulKernel(*spec);
}

std::vector<std::string> AllQuantizedMatMulKernelKeys() {
  std::vector<std::string> keys;
  for (bool a : {true, false}) {
    for (bool b : {true, false}) {
      for (QmmOutput y : {QmmOutput::kInt8, QmmOutput::kUint8, QmmOutput::kInt32Partial}) {
        for (QmmAccumulate accumulate : {QmmAccumulate::kFloat32, QmmAccumulate::kInt32}) {
          for (bool masked : {false, true}) {
            QuantizedMatMulKernelSpec spec;
            spec.a_signed = a;
            spec.b_signed = b;
            spec.output = y;
            spec.accumulate = accumulate;
            spec.masked = masked;
            keys.push_back(spec.Key());
          }
        }
      }
    }
  }
  for (bool a : {true, false}) {
    for (bool b : {true, false}) {
      for (uint32_t rows : {1u, 2u, 4u, 8u, 16u}) {
        QuantizedMatMulRowsSpec spec;
        spec.a_signed = a;
        spec.b_signed = b;
        spec.rows = rows;
        keys.push_back(spec.Key());
      }
    }
  }
  for (bool y : {true, false}) {
    QuantizedMatMulReduceSpec spec;
    spec.output_signed = y;
    keys.push_back(spec.Key());
  }
  keys.push_back(QuantizedMatMulPackSpec::kKey);
  return keys;
}

}  // namespace dmlserve::d3d12

#include "server/tensor_repository.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/core/buffer.h"
#include "kernels/core/data_type.h"
#include "kernels/core/operation.h"
#include "nlohmann/json.hpp"
#include "server/client_text.h"

namespace dmlserve {
namespace {

using Json = nlohmann::json;

absl::Status Invalid(absl::string_view where, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", rule));
}

absl::StatusOr<DataType> DataTypeNamed(absl::string_view name) {
  for (int value = 1; value <= kMaxDataTypeValue; ++value) {
    const DataType type = static_cast<DataType>(value);
    if (DataTypeName(type) == name) return type;
  }
  return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" is not a data type"));
}

// NumPy's dtype strings for the types dmlserve has: little-endian ('<') or
// byte-sized ('|').
absl::StatusOr<DataType> NpyType(absl::string_view descr) {
  struct Entry {
    absl::string_view descr;
    DataType type;
  };
  static constexpr Entry kEntries[] = {
      {"|u1", DataType::kUint8},   {"|i1", DataType::kInt8},    {"<u2", DataType::kUint16},
      {"<i2", DataType::kInt16},   {"<u4", DataType::kUint32},  {"<i4", DataType::kInt32},
      {"<u8", DataType::kUint64},  {"<i8", DataType::kInt64},   {"<f2", DataType::kFloat16},
      {"<f4", DataType::kFloat32}, {"<f8", DataType::kFloat64},
  };
  for (const Entry& entry : kEntries) {
    if (entry.descr == descr) return entry.type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype '", descr,
                   "' is not one dmlserve has (little-endian or single-byte "
                   "integers and floats)"));
}

// The value of `key` in a NumPy header dict ({'descr': '<f4', 'fortran_order':
// False, 'shape': (2, 3), }), as written; empty when absent.
absl::string_view HeaderValue(absl::string_view header, absl::string_view key) {
  const std::string quoted = absl::StrCat("'", key, "':");
  const size_t at = header.find(quoted);
  if (at == absl::string_view::npos) return {};
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(header.substr(at + quoted.size()));
  if (!rest.empty() && rest.front() == '(') return rest.substr(0, rest.find(')') + 1);
  return rest.substr(0, rest.find_first_of(",}"));
}

struct Parsed {
  DataType type = DataType::kUnknown;
  Shape sizes;
  size_t data_offset = 0;
};

// Parses a .npy file's header (format 1.0, 2.0 or 3.0).
absl::StatusOr<Parsed> ParseNpy(const std::string& bytes) {
  static constexpr char kMagic[] = "\x93NUMPY";
  if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) {
    return absl::InvalidArgumentError("not a .npy file (no \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_length;
  size_t header_start;
  if (major == 1) {
    header_length = static_cast<unsigned char>(bytes[8]) |
                    static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return absl::InvalidArgumentError("truncated .npy header");
    header_length = 0;
    for (int i = 3; i >= 0; --i) {
      header_length = header_length << 8 | static_cast<unsigned char>(bytes[8 + i]);
    }
    header_start = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(".npy format ", major, " is not supported"));
  }
  if (bytes.size() < header_start + header_length) {
    return absl::InvalidArgumentError("truncated .npy header");
  }
  const absl::string_view header(bytes.data() + header_start, header_length);
  Parsed parsed;
  absl::string_view descr = HeaderValue(header, "descr");
  descr = absl::StripSuffix(absl::StripPrefix(descr, "'"), "'");
  absl::StatusOr<DataType> type = NpyType(descr);
  if (!type.ok()) return type.status();
  parsed.type = *type;
  if (HeaderValue(header, "fortran_order") != "False") {
    return absl::InvalidArgumentError("Fortran-ordered arrays are not supported (save C order)");
  }
  absl::string_view shape = HeaderValue(header, "shape");
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') {
    return absl::InvalidArgumentError("no shape in the .npy header");
  }
  for (absl::string_view size :
       absl::StrSplit(shape.substr(1, shape.size() - 2), ',', absl::SkipWhitespace())) {
    uint32_t value;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(size), &value)) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", shape, " is not a list of sizes"));
    }
    parsed.sizes.push_back(value);
  }
  if (parsed.sizes.empty()) parsed.sizes.push_back(1);  // a 0-d array: one element
  parsed.data_offset = header_start + header_length;
  return parsed;
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("cannot be read");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

absl::StatusOr<RepositoryTensor> LoadEntry(const std::filesystem::path& directory,
                                           const Json& entry, const std::string& where,
                                           uint64_t max_tensor_bytes) {
  if (!entry.is_object()) return Invalid(where, "must be an object");
  const auto id = entry.find("id");
  const auto file = entry.find("file");
  if (id == entry.end() || !id->is_string() || id->get<std::string>().empty()) {
    return Invalid(where, "needs \"id\", a non-empty string");
  }
  if (file == entry.end() || !file->is_string()) return Invalid(where, "needs \"file\", a string");
  RepositoryTensor out;
  out.id = id->get<std::string>();
  const std::string named = absl::StrCat(where, " (", QuotedClientText(out.id), ")");
  const std::filesystem::path relative(file->get<std::string>());
  if (relative.is_absolute() || relative.lexically_normal().string().rfind("..", 0) == 0) {
    return Invalid(
        named, absl::StrCat("file ", relative.string(), " must be a path inside the repository"));
  }
  const std::string in_file = absl::StrCat(named, ": ", relative.string());
  absl::StatusOr<std::string> bytes = ReadFile(directory / relative);
  if (!bytes.ok()) return Invalid(in_file, bytes.status().message());

  Parsed parsed;
  if (relative.extension() == ".npy") {
    absl::StatusOr<Parsed> npy = ParseNpy(*bytes);
    if (!npy.ok()) return Invalid(in_file, npy.status().message());
    parsed = *npy;
  }
  const auto data_type = entry.find("data_type");
  if (data_type != entry.end()) {
    absl::StatusOr<DataType> type =
        data_type->is_string() ? DataTypeNamed(data_type->get<std::string>())
                               : absl::InvalidArgumentError("must be a string such as \"FLOAT32\"");
    if (!type.ok()) return Invalid(absl::StrCat(named, ".data_type"), type.status().message());
    if (parsed.type != DataType::kUnknown && parsed.type != *type) {
      return Invalid(
          absl::StrCat(named, ".data_type"),
          absl::StrCat(DataTypeName(*type), " but the file holds ", DataTypeName(parsed.type)));
    }
    parsed.type = *type;
  }
  const auto sizes = entry.find("sizes");
  if (sizes != entry.end()) {
    Shape given;
    bool valid = sizes->is_array();
    for (const Json& size : valid ? *sizes : Json::array()) {
      valid = valid && size.is_number_unsigned() && size.get<uint64_t>() <= UINT32_MAX;
      if (valid) given.push_back(size.get<uint32_t>());
    }
    if (!valid) return Invalid(absl::StrCat(named, ".sizes"), "must be a list of sizes");
    if (!parsed.sizes.empty() && parsed.sizes != given) {
      return Invalid(absl::StrCat(named, ".sizes"), "differ from the .npy file's shape");
    }
    parsed.sizes = given;
  }
  if (parsed.type == DataType::kUnknown || parsed.sizes.empty()) {
    return Invalid(named, "a raw file needs \"data_type\" and \"sizes\"");
  }
  out.tensor.data_type = parsed.type;
  out.tensor.sizes = parsed.sizes;
  bytes->erase(0, parsed.data_offset);
  out.tensor.bytes = Buffer::Adopt(*std::move(bytes));
  if (absl::Status status = ValidateTensor(out.tensor, "tensor", max_tensor_bytes); !status.ok()) {
    return absl::Status(status.code(), absl::StrCat(in_file, ": ", status.message()));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<RepositoryTensor>> LoadTensorRepository(const std::string& directory,
                                                                   uint64_t max_tensor_bytes) {
  const std::filesystem::path root(directory);
  absl::StatusOr<std::string> manifest_text = ReadFile(root / "manifest.json");
  if (!manifest_text.ok()) {
    return absl::NotFoundError(
        absl::StrCat("manifest.json: ", manifest_text.status().message(), " in ", directory));
  }
  const Json manifest = Json::parse(*manifest_text, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object()) {
    return Invalid("manifest.json", "not a JSON object");
  }
  const auto tensors = manifest.find("tensors");
  if (tensors == manifest.end() || !tensors->is_array()) {
    return Invalid("manifest.json", "needs \"tensors\", a list");
  }
  std::vector<RepositoryTensor> loaded;
  for (size_t i = 0; i < tensors->size(); ++i) {
    const std::string where = absl::StrCat("manifest.json: tensors[", i, "]");
    absl::StatusOr<RepositoryTensor> tensor =
        LoadEntry(root, (*tensors)[i], where, max_tensor_bytes);
    if (!tensor.ok()) return tensor.status();
    for (const RepositoryTensor& earlier : loaded) {
      if (earlier.id == tensor->id) {
        return Invalid(where, absl::StrCat("id ", QuotedClientText(tensor->id), " is given twice"));
      }
    }
    loaded.push_back(*std::move(tensor));
  }
  return loaded;
}

}  // namespace dmlserve

#include "server/metrics/exposition_format.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

namespace dmlserve::metrics {
namespace {

bool IsAsciiLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }

// Length of the well-formed UTF-8 sequence at the start of `s`, or 0.
size_t Utf8SequenceLength(std::string_view s) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto continuation = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < s.size() && byte(i) >= lo && byte(i) <= hi;
  };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return continuation(1) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    // Overlong forms (E0 80..9F) and UTF-16 surrogates (ED A0..BF) are invalid.
    const unsigned char lo = lead == 0xE0 ? 0xA0 : 0x80;
    const unsigned char hi = lead == 0xED ? 0x9F : 0xBF;
    return continuation(1, lo, hi) && continuation(2) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    const unsigned char lo = lead == 0xF0 ? 0x90 : 0x80;
    const unsigned char hi = lead == 0xF4 ? 0x8F : 0xBF;
    return continuation(1, lo, hi) && continuation(2) && continuation(3) ? 4 : 0;
  }
  return 0;
}

template <typename EscapeAscii>
void AppendEscaped(std::string_view text, std::string* out, EscapeAscii escape_ascii) {
  while (!text.empty()) {
    const size_t length = Utf8SequenceLength(text);
    if (length == 0) {
      out->append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
      text.remove_prefix(1);
    } else if (length == 1) {
      escape_ascii(text[0], out);
      text.remove_prefix(1);
    } else {
      out->append(text.substr(0, length));
      text.remove_prefix(length);
    }
  }
}

}  // namespace

bool IsValidMetricName(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(IsAsciiLetter(c) || c == '_' || c == ':' || (i > 0 && IsAsciiDigit(c)))) return false;
  }
  return true;
}

bool IsValidLabelName(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__") return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(IsAsciiLetter(c) || c == '_' || (i > 0 && IsAsciiDigit(c)))) return false;
  }
  return true;
}

void AppendSampleValue(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
    return;
  }
  char buffer[32];
  std::to_chars_result result;
  // Counts and byte sizes read better without an exponent ("1000000", not
  // "1e+06"); below 2^53 every integer is exact, so plain digits round-trip.
  constexpr double kExactIntegerLimit = 9007199254740992.0;  // 2^53
  if (value != 0 && std::trunc(value) == value && std::fabs(value) < kExactIntegerLimit) {
    result = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<int64_t>(value));
  } else {
    result = std::to_chars(buffer, buffer + sizeof(buffer), value);  // shortest round-trip
  }
  out->append(buffer, result.ptr);
}

std::string FormatSampleValue(double value) {
  std::string text;
  AppendSampleValue(value, &text);
  return text;
}

void AppendEscapedHelp(std::string_view help, std::string* out) {
  AppendEscaped(help, out, [](char c, std::string* out) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  });
}

void AppendEscapedLabelValue(std::string_view value, std::string* out) {
  AppendEscaped(value, out, [](char c, std::string* out) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '"') {
      out->append("\\\"");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  });
}

}  // namespace dmlserve::metrics

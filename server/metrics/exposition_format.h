#ifndef DMLSERVE_SERVER_METRICS_EXPOSITION_FORMAT_H_
#define DMLSERVE_SERVER_METRICS_EXPOSITION_FORMAT_H_

// Lexical pieces of the Prometheus text exposition format 0.0.4:
// https://prometheus.io/docs/instrumenting/exposition_formats/

#include <string>
#include <string_view>

namespace dmlserve::metrics {

// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
bool IsValidMetricName(std::string_view name);
// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__` (reserved by Prometheus).
bool IsValidLabelName(std::string_view name);

// `+Inf`, `-Inf`, `NaN`; integers below 2^53 in plain digits; anything else
// in the shortest form that reads back as the same double.
void AppendSampleValue(double value, std::string* out);
std::string FormatSampleValue(double value);

// HELP text: `\` and newline escaped. Invalid UTF-8 becomes U+FFFD, since
// Prometheus rejects it.
void AppendEscapedHelp(std::string_view help, std::string* out);
// Label value: `\`, `"` and newline escaped; invalid UTF-8 becomes U+FFFD.
void AppendEscapedLabelValue(std::string_view value, std::string* out);

}  // namespace dmlserve::metrics

#endif  // DMLSERVE_SERVER_METRICS_EXPOSITION_FORMAT_H_

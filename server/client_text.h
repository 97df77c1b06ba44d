#ifndef DMLSERVE_SERVER_CLIENT_TEXT_H_
#define DMLSERVE_SERVER_CLIENT_TEXT_H_

// Client-supplied strings as error messages quote them: bounded, so that a
// hostile 1 MB tensor_id neither makes a 1 MB error nor pushes the status
// past gRPC's metadata limit (which the client would see as
// RESOURCE_EXHAUSTED "received initial metadata size exceeds limit" instead
// of the real error), and escaped, so that it cannot forge log lines.

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace dmlserve {

// The longest client string an error message quotes whole, in bytes.
inline constexpr size_t kMaxQuotedClientBytes = 200;

// `text` in double quotes, C-escaped; past kMaxQuotedClientBytes, its start
// and "... (N bytes)".
std::string QuotedClientText(absl::string_view text);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_CLIENT_TEXT_H_

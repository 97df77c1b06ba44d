#include "server/client_text.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace dmlserve {

std::string QuotedClientText(absl::string_view text) {
  if (text.size() <= kMaxQuotedClientBytes) return absl::StrCat("\"", absl::CHexEscape(text), "\"");
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMaxQuotedClientBytes)), "...\" (",
                      text.size(), " bytes)");
}

}  // namespace dmlserve

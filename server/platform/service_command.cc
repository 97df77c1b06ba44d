#include "server/platform/service_command.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dmlserve {
namespace {

constexpr absl::string_view kNameFlag = "--service_name=";

// Backslashes are literal unless they precede a quote, where each one
// doubles; a quote is escaped with a backslash. So a run of n backslashes
// before a quote (or before the closing quote) becomes 2n.
std::string QuoteWindowsArgument(absl::string_view argument) {
  if (!argument.empty() && argument.find_first_of(" \t\n\v\"") == absl::string_view::npos) {
    return std::string(argument);
  }
  std::string quoted = "\"";
  size_t backslashes = 0;
  for (char c : argument) {
    if (c == '\\') {
      ++backslashes;
      continue;
    }
    if (c == '"') {
      quoted.append(2 * backslashes + 1, '\\');
    } else {
      quoted.append(backslashes, '\\');
    }
    backslashes = 0;
    quoted.push_back(c);
  }
  quoted.append(2 * backslashes, '\\');
  quoted.push_back('"');
  return quoted;
}

}  // namespace

bool IsServiceCommand(int argc, char** argv) {
  return argc >= 2 && absl::string_view(argv[1]) == "service";
}

absl::StatusOr<ServiceCommand> ParseServiceCommand(int argc, char** argv) {
  if (!IsServiceCommand(argc, argv)) {
    return absl::InvalidArgumentError("not a `service` command line");
  }
  if (argc < 3) {
    return absl::InvalidArgumentError(
        "service: missing verb; expected install, uninstall, start, stop or run");
  }
  ServiceCommand command;
  command.verb = argv[2];
  if (command.verb != "install" && command.verb != "uninstall" && command.verb != "start" &&
      command.verb != "stop" && command.verb != "run") {
    return absl::InvalidArgumentError(
        absl::StrCat("service: unknown verb \"", command.verb,
                     "\"; expected install, uninstall, start, stop or run"));
  }
  for (int i = 3; i < argc; ++i) {
    absl::string_view argument = argv[i];
    if (absl::StartsWith(argument, kNameFlag)) {
      command.name = std::string(argument.substr(kNameFlag.size()));
      if (command.name.empty() || command.name.find_first_of("/\\") != std::string::npos) {
        return absl::InvalidArgumentError(
            "--service_name: must be non-empty and contain no '/' or '\\'");
      }
      continue;
    }
    command.server_arguments.emplace_back(argument);
  }
  const bool takes_flags = command.verb == "install" || command.verb == "run";
  if (!takes_flags && !command.server_arguments.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "service ", command.verb, ": takes only --service_name, not \"",
        command.server_arguments.front(), "\" (server flags go to `service install`)"));
  }
  return command;
}

std::string JoinWindowsCommandLine(const std::vector<std::string>& arguments) {
  std::string line;
  for (const std::string& argument : arguments) {
    if (!line.empty()) line.push_back(' ');
    line += QuoteWindowsArgument(argument);
  }
  return line;
}

}  // namespace dmlserve

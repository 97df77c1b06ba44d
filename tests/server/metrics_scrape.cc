#include "tests/server/metrics_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace dmlserve::testing {

absl::StatusOr<std::string> HttpGet(const std::string& address, const std::string& path) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError("address without a port");
  const std::string host = address.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in ", address));
  }
  sockaddr_in socket_address{};
  socket_address.sin_family = AF_INET;
  socket_address.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &socket_address.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", host));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  if (connect(fd, reinterpret_cast<sockaddr*>(&socket_address), sizeof(socket_address)) != 0) {
    const std::string error = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to ", address, ": ", error));
  }
  // Prometheus's default scrape timeout: a scrape answered later than this
  // failed.
  const timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", address, "\r\nConnection: close\r\n\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      close(fd);
      return absl::UnavailableError("send failed");
    }
    sent += static_cast<size_t>(n);
  }
  std::string response;
  char buffer[16384];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end == std::string::npos) return absl::DataLossError("no HTTP header end");
  const std::string status_line = response.substr(0, response.find("\r\n"));
  if (!absl::StrContains(status_line, " 200 ")) {
    return absl::UnavailableError(absl::StrCat("GET ", path, ": ", status_line));
  }
  std::string body = response.substr(header_end + 4);
  if (absl::StrContains(absl::AsciiStrToLower(response.substr(0, header_end)),
                        "transfer-encoding: chunked")) {
    // De-chunk: size line, data, CRLF, ... until a zero size.
    std::string plain;
    size_t position = 0;
    while (position < body.size()) {
      const size_t line_end = body.find("\r\n", position);
      if (line_end == std::string::npos) break;
      size_t chunk = 0;
      if (!absl::SimpleHexAtoi(body.substr(position, line_end - position), &chunk) || chunk == 0) {
        break;
      }
      plain += body.substr(line_end + 2, chunk);
      position = line_end + 2 + chunk + 2;
    }
    body = std::move(plain);
  }
  return body;
}

std::vector<Sample> ParseSamples(const std::string& exposition) {
  std::vector<Sample> samples;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    Sample sample;
    absl::string_view rest;
    const size_t brace = line.find('{');
    const size_t space = line.find(' ');
    if (brace != absl::string_view::npos && brace < space) {
      sample.name = std::string(line.substr(0, brace));
      const size_t close = line.rfind('}');
      if (close == absl::string_view::npos) continue;
      absl::string_view labels = line.substr(brace + 1, close - brace - 1);
      // name="value" pairs; values here never contain commas or quotes.
      for (absl::string_view pair : absl::StrSplit(labels, ',', absl::SkipEmpty())) {
        const size_t equals = pair.find('=');
        if (equals == absl::string_view::npos) continue;
        absl::string_view value = pair.substr(equals + 1);
        absl::ConsumePrefix(&value, "\"");
        absl::ConsumeSuffix(&value, "\"");
        sample.labels[std::string(pair.substr(0, equals))] = std::string(value);
      }
      rest = line.substr(close + 1);
    } else {
      if (space == absl::string_view::npos) continue;
      sample.name = std::string(line.substr(0, space));
      rest = line.substr(space);
    }
    rest = absl::StripAsciiWhitespace(rest);
    rest = rest.substr(0, rest.find(' '));  // drop a timestamp
    if (rest == "+Inf") {
      sample.value = HUGE_VAL;
    } else if (!absl::SimpleAtod(rest, &sample.value)) {
      continue;
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

std::optional<double> SumSamples(const std::vector<Sample>& samples, const std::string& name,
                                 const std::map<std::string, std::string>& labels) {
  std::optional<double> sum;
  for (const Sample& sample : samples) {
    if (sample.name != name) continue;
    bool matches = true;
    for (const auto& [key, value] : labels) {
      auto it = sample.labels.find(key);
      if (it == sample.labels.end() || it->second != value) matches = false;
    }
    if (matches) sum = sum.value_or(0) + sample.value;
  }
  return sum;
}

std::optional<double> ScrapeSum(const std::string& metrics_address, const std::string& name,
                                const std::map<std::string, std::string>& labels) {
  absl::StatusOr<std::string> body = HttpGet(metrics_address, "/metrics");
  if (!body.ok()) return std::nullopt;
  return SumSamples(ParseSamples(*body), name, labels);
}

}  // namespace dmlserve::testing

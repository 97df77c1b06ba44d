#include "tests/server/fake_dns_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dmlserve::testing {
namespace {

constexpr size_t kHeaderBytes = 12;
constexpr uint16_t kTypeA = 1;
constexpr uint16_t kClassIn = 1;

void PutU16(std::string& out, uint16_t value) {
  out.push_back(static_cast<char>(value >> 8));
  out.push_back(static_cast<char>(value & 0xff));
}

uint16_t GetU16(const unsigned char* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

}  // namespace

absl::StatusOr<std::unique_ptr<FakeDnsServer>> FakeDnsServer::Start(
    std::vector<std::string> addresses) {
  std::unique_ptr<FakeDnsServer> server(new FakeDnsServer());
  for (const std::string& address : addresses) {
    in_addr parsed;
    if (inet_pton(AF_INET, address.c_str(), &parsed) != 1) {
      return absl::InvalidArgumentError(absl::StrCat("not an IPv4 address: ", address));
    }
    server->addresses_.push_back(parsed.s_addr);
  }
  server->socket_ = socket(AF_INET, SOCK_DGRAM, 0);
  if (server->socket_ < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in bound{};
  bound.sin_family = AF_INET;
  bound.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(bound);
  if (bind(server->socket_, reinterpret_cast<sockaddr*>(&bound), sizeof(bound)) != 0 ||
      getsockname(server->socket_, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    return absl::InternalError(absl::StrCat("bind: ", strerror(errno)));
  }
  server->address_ = absl::StrCat("127.0.0.1:", ntohs(bound.sin_port));
  server->thread_ = std::thread([raw = server.get()] { raw->Serve(); });
  return server;
}

FakeDnsServer::~FakeDnsServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (socket_ >= 0) close(socket_);
}

void FakeDnsServer::Serve() {
  unsigned char query[512];
  while (!stop_) {
    pollfd ready{socket_, POLLIN, 0};
    if (poll(&ready, 1, /*timeout_ms=*/50) <= 0) continue;
    sockaddr_in from{};
    socklen_t from_length = sizeof(from);
    const ssize_t received = recvfrom(socket_, query, sizeof(query), 0,
                                      reinterpret_cast<sockaddr*>(&from), &from_length);
    if (received < static_cast<ssize_t>(kHeaderBytes) || GetU16(query + 4) != 1) continue;
    // The one question: labels up to the root, then type and class.
    size_t end = kHeaderBytes;
    while (end < static_cast<size_t>(received) && query[end] != 0) end += 1 + query[end];
    if (end + 5 > static_cast<size_t>(received)) continue;
    const uint16_t type = GetU16(query + end + 1);
    const uint16_t klass = GetU16(query + end + 3);
    const size_t question_end = end + 5;
    const bool answer = type == kTypeA && klass == kClassIn;
    if (answer) ++a_queries_;
    std::string reply(reinterpret_cast<const char*>(query), 2);  // the query's id
    // A response, recursion desired copied, recursion available, no error.
    PutU16(reply, static_cast<uint16_t>(0x8080 | (GetU16(query + 2) & 0x0100)));
    PutU16(reply, 1);                                                      // questions
    PutU16(reply, answer ? static_cast<uint16_t>(addresses_.size()) : 0);  // answers
    PutU16(reply, 0);                                                      // authority
    PutU16(reply, 0);                                                      // additional
    reply.append(reinterpret_cast<const char*>(query) + kHeaderBytes, question_end - kHeaderBytes);
    for (size_t i = 0; answer && i < addresses_.size(); ++i) {
      PutU16(reply, 0xc000 | kHeaderBytes);  // the name: a pointer to the question's
      PutU16(reply, kTypeA);
      PutU16(reply, kClassIn);
      PutU16(reply, 0);  // TTL 0: clients may ask again whenever they like
      PutU16(reply, 0);
      PutU16(reply, 4);
      reply.append(reinterpret_cast<const char*>(&addresses_[i]), 4);
    }
    sendto(socket_, reply.data(), reply.size(), 0, reinterpret_cast<sockaddr*>(&from), from_length);
  }
}

}  // namespace dmlserve::testing

#include "server/platform/wake_listener.h"

#if defined(_WIN32)
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

#include <cstdint>
#include <string>

namespace dmlserve {
namespace {

#if defined(_WIN32)
// Winsock is already initialized: the listener being woken uses it.
using Socket = SOCKET;
constexpr Socket kNoSocket = INVALID_SOCKET;
Socket OpenSocket(int family) { return socket(family, SOCK_STREAM, 0); }
void CloseSocket(Socket socket) { closesocket(socket); }
#else
using Socket = int;
constexpr Socket kNoSocket = -1;
Socket OpenSocket(int family) { return socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0); }
void CloseSocket(Socket socket) { close(socket); }
#endif

}  // namespace

void WakeListener(absl::string_view host_view, int port) {
  // Any local address reaches a wildcard listener; an explicit host is used
  // as given.
  std::string host(host_view);
  int family = AF_INET;
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  if (host.front() == '[') {
    family = AF_INET6;
    host = host.substr(1, host.size() - 2);
    if (host == "::") host = "::1";
  }
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (family == AF_INET) {
    auto* address = reinterpret_cast<sockaddr_in*>(&storage);
    address->sin_family = AF_INET;
    address->sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host.c_str(), &address->sin_addr) != 1) return;
    length = sizeof(*address);
  } else {
    auto* address = reinterpret_cast<sockaddr_in6*>(&storage);
    address->sin6_family = AF_INET6;
    address->sin6_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET6, host.c_str(), &address->sin6_addr) != 1) return;
    length = sizeof(*address);
  }
  const Socket fd = OpenSocket(family);
  if (fd == kNoSocket) return;
  connect(fd, reinterpret_cast<sockaddr*>(&storage), length);
  CloseSocket(fd);
}

}  // namespace dmlserve

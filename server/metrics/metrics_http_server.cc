#include "server/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace dmlserve::metrics {
namespace {

struct ListenAddress {
  std::string host;  // as civetweb wants it: "1.2.3.4", "[::1]" or empty (any)
  int port = 0;
};

// absl::string_view: Debian's Abseil does not alias it to std::string_view.
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text) {
  ListenAddress address;
  absl::string_view port_text = text;
  const size_t colon = text.rfind(':');
  if (colon != absl::string_view::npos) {
    address.host = std::string(text.substr(0, colon));
    port_text = text.substr(colon + 1);
    if (address.host.find(':') != std::string::npos && address.host.front() != '[') {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics address \"", text, "\": write IPv6 hosts as [addr]:port"));
    }
  }
  if (address.host == "localhost") address.host = "127.0.0.1";
  if (!address.host.empty() && address.host.front() == '[' &&
      mg_check_feature(MG_FEATURES_IPV6) == 0) {
    // Debian 12's libcivetweb is built without IPv6.
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address \"", text, "\": this civetweb build has no IPv6 support"));
  }
  if (!absl::SimpleAtoi(port_text, &address.port) || address.port < 0 || address.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address \"", text, "\": expected host:port"));
  }
  return address;
}

void InitializeCivetwebOnce() {
  // mg_init_library is not thread-safe; it is never undone, so several
  // servers in one process (tests) can come and go.
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    std::string listen_address, const Registry* registry) {
  if (registry == nullptr) return absl::InvalidArgumentError("metrics server needs a registry");
  absl::StatusOr<ListenAddress> address = ParseListenAddress(listen_address);
  if (!address.ok()) return address.status();
  InitializeCivetwebOnce();

  const std::string ports = address->host.empty() ? std::to_string(address->port)
                                                  : absl::StrCat(address->host, ":", address->port);
  // civetweb gives each connection a thread until its request is read and
  // answered. Scrapes are rare and quick, but a client that trickles its
  // header holds a thread for as long as the request timeout allows: enough
  // threads that a handful of such clients (or stuck ones) leave Prometheus
  // room, and a header deadline short enough that each is cut off soon.
  const char* options[] = {"listening_ports",    ports.c_str(), "num_threads", "16",
                           "request_timeout_ms", "2000",        nullptr};
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(registry));
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  mg_init_data init;
  init.callbacks = &callbacks;
  init.user_data = server.get();
  init.configuration_options = options;
  char error_text[256] = "";
  unsigned error_code = 0;
  mg_error_data error;
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof(error_text);
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on \"", listen_address, "\": ",
                                               error_text[0] ? error_text : "mg_start failed"));
  }
  // One handler for every path: it answers 404 itself, so nothing else
  // (civetweb's file serving included) is ever reachable.
  mg_set_request_handler(server->context_, "/", &MetricsHttpServer::HandleRequest, server.get());

  mg_server_port bound[4];
  const int count = mg_get_server_ports(server->context_, 4, bound);
  if (count < 1 || bound[0].port <= 0) {
    return absl::InternalError(
        absl::StrCat("metrics server on \"", listen_address, "\": no bound port"));
  }
  server->port_ = bound[0].port;
  server->host_ = address->host;
  server->address_ =
      absl::StrCat(address->host.empty() ? "0.0.0.0" : address->host, ":", server->port_);
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (context_ == nullptr) return;
  // civetweb's accept loop only notices mg_stop when its poll() wakes up,
  // which is every 2 s when idle; a connection wakes it at once, so a service
  // shutting down (and every test) does not wait for the poll timeout.
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load()) {
      WakeAcceptLoop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  mg_stop(context_);
  stopped = true;
  waker.join();
}

void MetricsHttpServer::WakeAcceptLoop() const {
  // Any local address reaches a wildcard listener; an explicit host is used
  // as given.
  std::string host = host_;
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
    address->sin_port = htons(static_cast<uint16_t>(port_));
    if (inet_pton(AF_INET, host.c_str(), &address->sin_addr) != 1) return;
    length = sizeof(*address);
  } else {
    auto* address = reinterpret_cast<sockaddr_in6*>(&storage);
    address->sin6_family = AF_INET6;
    address->sin6_port = htons(static_cast<uint16_t>(port_));
    if (inet_pton(AF_INET6, host.c_str(), &address->sin6_addr) != 1) return;
    length = sizeof(*address);
  }
  const int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  connect(fd, reinterpret_cast<sockaddr*>(&storage), length);
  close(fd);
}

int MetricsHttpServer::HandleRequest(mg_connection* connection, void* server) {
  const mg_request_info* request = mg_get_request_info(connection);
  const std::string_view path = request->local_uri != nullptr ? request->local_uri : "";
  const std::string_view method = request->request_method != nullptr ? request->request_method : "";
  if (path != "/metrics") {
    mg_send_http_error(connection, 404, "%s", "Not found: metrics are at /metrics\n");
    return 404;
  }
  if (method != "GET" && method != "HEAD") {
    mg_send_http_error(connection, 405, "%s", "Only GET and HEAD\n");
    return 405;
  }
  const std::string body = static_cast<MetricsHttpServer*>(server)->registry_->Serialize();
  mg_send_http_ok(connection, kExpositionContentType, static_cast<long long>(body.size()));
  if (method == "GET") mg_write(connection, body.data(), body.size());
  return 200;
}

}  // namespace dmlserve::metrics

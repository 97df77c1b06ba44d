#include "server/metrics/metrics_endpoint.h"

#include <atomic>
#include <chrono>
#include <exception>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "server/platform/wake_listener.h"

namespace dmlserve::metrics {
namespace {

struct ListenAddress {
  std::string host;  // as civetweb wants it: "1.2.3.4", "[::1]" or empty (any)
  int port = 0;
};

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
  if (!absl::SimpleAtoi(port_text, &address.port) || address.port < 0 || address.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address \"", text, "\": expected host:port"));
  }
  return address;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& listen_address,
    const std::vector<std::weak_ptr<prometheus::Collectable>>& collectables) {
  absl::StatusOr<ListenAddress> address = ParseListenAddress(listen_address);
  if (!address.ok()) return address.status();
  const std::string ports = address->host.empty() ? std::to_string(address->port)
                                                  : absl::StrCat(address->host, ":", address->port);
  std::unique_ptr<MetricsEndpoint> endpoint(new MetricsEndpoint());
  // civetweb gives each connection a thread until its request is read and
  // answered. Scrapes are rare and quick, but a client that trickles its
  // header holds a thread for as long as the request timeout allows: enough
  // threads that a handful of such clients (or stuck ones) leave Prometheus
  // room, and a header deadline short enough that each is cut off soon.
  try {
    // prometheus-cpp reports a port it cannot bind by throwing (civetweb's
    // CivetException); nothing else in dmlserve uses exceptions, so they
    // stop here.
    endpoint->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", ports, "num_threads", "16", "request_timeout_ms", "2000"});
  } catch (const std::exception& error) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on \"", listen_address, "\": ", error.what(),
        !address->host.empty() && address->host.front() == '[' ? " (is civetweb built with IPv6?)"
                                                               : ""));
  }
  for (const auto& collectable : collectables) endpoint->exposer_->RegisterCollectable(collectable);
  const std::vector<int> bound = endpoint->exposer_->GetListeningPorts();
  if (bound.empty() || bound.front() <= 0) {
    return absl::InternalError(
        absl::StrCat("metrics endpoint on \"", listen_address, "\": no bound port"));
  }
  endpoint->port_ = bound.front();
  endpoint->host_ = address->host;
  endpoint->address_ =
      absl::StrCat(address->host.empty() ? "0.0.0.0" : address->host, ":", endpoint->port_);
  return endpoint;
}

MetricsEndpoint::~MetricsEndpoint() {
  if (exposer_ == nullptr) return;
  // civetweb's accept loop only notices it should stop when its poll() wakes
  // up, which is every 2 s when idle; a connection wakes it at once, so a
  // service shutting down (and every test) does not wait for the timeout.
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load()) {
      WakeAcceptLoop();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer_.reset();
  stopped = true;
  waker.join();
}

void MetricsEndpoint::WakeAcceptLoop() const { WakeListener(host_, port_); }

}  // namespace dmlserve::metrics

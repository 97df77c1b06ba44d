#ifndef DMLSERVE_SERVER_METRICS_METRICS_ENDPOINT_H_
#define DMLSERVE_SERVER_METRICS_METRICS_ENDPOINT_H_

// The Prometheus scrape endpoint: prometheus-cpp's pull Exposer (civetweb)
// serving collectables at `GET /metrics`. Every other path answers 404.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"

namespace dmlserve::metrics {

class MetricsEndpoint {
 public:
  // `listen_address`: "ipv4:port", ":port" or "port" (all IPv4 interfaces),
  // or "[ipv6]:port" where civetweb was built with IPv6 (Debian 12's was not:
  // the error says so); "localhost" means 127.0.0.1. Port 0 picks a free port
  // (see port()). The endpoint holds `collectables` weakly: each must live
  // until the endpoint is destroyed. Serves on 16 threads; a request's header
  // must arrive within 2 s, so clients that trickle theirs (or stop sending)
  // cannot keep Prometheus out for long.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(
      const std::string& listen_address,
      const std::vector<std::weak_ptr<prometheus::Collectable>>& collectables);

  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;
  // Stops accepting, finishes in-flight scrapes and joins the threads.
  ~MetricsEndpoint();

  // The bound port (the picked one when asked for port 0).
  int port() const { return port_; }
  // host:port as bound, e.g. "127.0.0.1:9464": the scrape target.
  const std::string& address() const { return address_; }

 private:
  MetricsEndpoint() = default;
  // Connects to the listening port and hangs up (see the destructor).
  void WakeAcceptLoop() const;

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string host_;  // as given to civetweb; empty for all interfaces
  int port_ = 0;
  std::string address_;
};

}  // namespace dmlserve::metrics

#endif  // DMLSERVE_SERVER_METRICS_METRICS_ENDPOINT_H_

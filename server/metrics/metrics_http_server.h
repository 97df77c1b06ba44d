#ifndef DMLSERVE_SERVER_METRICS_METRICS_HTTP_SERVER_H_
#define DMLSERVE_SERVER_METRICS_METRICS_HTTP_SERVER_H_

// Serves a Registry at `GET /metrics` for Prometheus to scrape (civetweb).
// Every other path answers 404; other methods on /metrics answer 405.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/metrics/metrics.h"

struct mg_context;
struct mg_connection;

namespace dmlserve::metrics {

inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

class MetricsHttpServer {
 public:
  // `listen_address`: "ipv4:port", ":port" or "port" (all IPv4 interfaces),
  // or "[ipv6]:port" where civetweb has IPv6 (Debian 12's does not:
  // InvalidArgument); "localhost" means 127.0.0.1. Port 0 picks a free port (see
  // port()). `registry` must outlive the server. Serves on 16 threads; a request must arrive within
  // 2 s.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(std::string listen_address,
                                                                  const Registry* registry);

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;
  // Stops accepting, finishes in-flight scrapes and joins the threads.
  ~MetricsHttpServer();

  // The bound port (the picked one when asked for port 0).
  int port() const { return port_; }
  // host:port as bound, e.g. "127.0.0.1:9464"; the scrape target.
  const std::string& address() const { return address_; }

 private:
  explicit MetricsHttpServer(const Registry* registry) : registry_(registry) {}

  static int HandleRequest(mg_connection* connection, void* server);
  void WakeAcceptLoop() const;

  const Registry* const registry_;
  mg_context* context_ = nullptr;
  std::string host_;  // as given to civetweb; empty for all interfaces
  int port_ = 0;
  std::string address_;
};

}  // namespace dmlserve::metrics

#endif  // DMLSERVE_SERVER_METRICS_METRICS_HTTP_SERVER_H_

#include "server/grpc_listener.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/platform/log.h"
#include "server/tls_certificate.h"

namespace dmlserve {
namespace {

void ConfigureGrpc(const ServerConfig& config, grpc::ServerBuilder& builder) {
  // Oversized requests fail in gRPC itself with RESOURCE_EXHAUSTED, before
  // any of their bytes are buffered for the service.
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.max_request_bytes));
  // Detect dead peers on idle connections, and let clients keep connections
  // alive with pings as often as every 10 s without being disconnected.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 60 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20 * 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10 * 1000);
  // gRPC sets SO_REUSEPORT by default, which would let a second server start
  // on a busy port and silently share its traffic.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A client cannot open unbounded calls on one connection, hold idle
  // connections forever, or make gRPC buffer more than its quota.
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONCURRENT_STREAMS,
      static_cast<int>(std::min<uint32_t>(config.max_concurrent_streams, INT_MAX)));
  auto milliseconds = [](absl::Duration duration) {
    return duration == absl::InfiniteDuration()
               ? INT_MAX
               : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(duration), INT_MAX));
  };
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             milliseconds(config.max_connection_idle));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             milliseconds(config.max_connection_age));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, 30 * 1000);
  grpc::ResourceQuota quota("dmlserve");
  quota.Resize(static_cast<size_t>(config.grpc_memory_bytes));
  builder.SetResourceQuota(quota);
}

// Plaintext, TLS, or TLS with client certificates required (ServerConfig).
// With a reload interval, gRPC's file watcher reads the files again that
// often on a thread of its own and hands new connections what it read; the
// connections open keep their session. It takes whatever the files hold
// when it looks, so a key replaced long before its certificate fails
// handshakes until the certificate follows (a Kubernetes Secret's volume
// changes both at once), and it keeps what it had when a file cannot be
// read. The gauge of ReportTls shows which.
std::shared_ptr<grpc::ServerCredentials> ListenerCredentials(const ServerConfig& config) {
  if (config.tls_cert_pem.empty()) return grpc::InsecureServerCredentials();
  const bool mutual = !config.tls_client_ca_pem.empty();
  if (config.tls_reload_interval > absl::ZeroDuration()) {
    const auto seconds =
        static_cast<unsigned int>(absl::ToInt64Seconds(config.tls_reload_interval));
    auto files = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        config.tls_key_file, config.tls_cert_file, mutual ? config.tls_client_ca_file : "",
        seconds);
    grpc::experimental::TlsServerCredentialsOptions options(files);
    options.watch_identity_key_cert_pairs();
    if (mutual) options.watch_root_certs();
    options.set_cert_request_type(mutual
                                      ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                      : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    return grpc::experimental::TlsServerCredentials(options);
  }
  grpc::SslServerCredentialsOptions options(
      mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = config.tls_client_ca_pem;
  options.pem_key_cert_pairs.push_back({config.tls_key_pem, config.tls_cert_pem});
  return grpc::SslServerCredentials(options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<grpc::Server>> ListenForGrpc(
    const ServerConfig& config, std::initializer_list<grpc::Service*> services, int& port) {
  grpc::EnableDefaultHealthCheckService(true);
  if (config.reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.listen, ListenerCredentials(config), &port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  ConfigureGrpc(config, builder);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen=", config.listen, ": cannot listen for gRPC there"));
  }
  return server;
}

// The gauge reads the files at each scrape, since they serve within the
// reload interval; read once, it is the certificate read at start-up.
void ReportTls(const ServerConfig& config, metrics::ScrapeTimeGauges& gauges) {
  constexpr char kExpiry[] = "dmlserve_tls_certificate_expiry_timestamp_seconds";
  constexpr char kExpiryHelp[] =
      "When the server's TLS certificate expires (its notAfter, Unix time): the files', read at "
      "each scrape, which serve within --tls_reload_interval. No sample without TLS, or while "
      "the files do not hold a certificate and its key.";
  if (config.tls_cert_pem.empty()) {
    // The family is there, empty: dashboards and alerts find it on every server.
    gauges.Add(kExpiry, kExpiryHelp, [] { return metrics::ScrapeTimeGauges::Samples{}; });
    return;
  }
  std::string line = absl::StrCat(
      "gRPC over TLS", config.tls_client_ca_pem.empty() ? "" : ", client certificates required");
  const absl::StatusOr<absl::Time> expiry = KeyPairExpiry(config.tls_cert_pem, config.tls_key_pem);
  if (expiry.ok()) {
    absl::StrAppend(&line, "; certificate valid until ",
                    absl::FormatTime(absl::RFC3339_sec, *expiry, absl::UTCTimeZone()));
  }
  const bool reloads = config.tls_reload_interval > absl::ZeroDuration();
  absl::StrAppend(&line, reloads ? "; TLS files read again every " : "; TLS files read once",
                  reloads ? absl::FormatDuration(config.tls_reload_interval) : "");
  LogInfo(line);
  if (expiry.ok() && *expiry < absl::Now()) {
    LogWarning(absl::StrCat("--tls_cert_file=", config.tls_cert_file,
                            ": the certificate has expired; clients will refuse it"));
  }
  gauges.Add(kExpiry, kExpiryHelp,
             [reloads, cert_file = config.tls_cert_file, key_file = config.tls_key_file,
              start_up = expiry]() {
               absl::StatusOr<absl::Time> now_serving = start_up;
               if (reloads) {
                 const absl::StatusOr<std::string> cert = ReadTlsFile(cert_file);
                 const absl::StatusOr<std::string> key = ReadTlsFile(key_file);
                 now_serving = !cert.ok()  ? cert.status()
                               : !key.ok() ? key.status()
                                           : KeyPairExpiry(*cert, *key);
               }
               if (!now_serving.ok()) return metrics::ScrapeTimeGauges::Samples{};
               return metrics::ScrapeTimeGauges::Samples{
                   {{}, static_cast<double>(absl::ToUnixSeconds(*now_serving))}};
             });
}

}  // namespace dmlserve

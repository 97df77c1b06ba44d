#ifndef DMLSERVE_SERVER_GRPC_LISTENER_H_
#define DMLSERVE_SERVER_GRPC_LISTENER_H_

// The gRPC listener as the flags configure it (server_flags.h): its limits
// against hostile clients (message size, streams per connection, gRPC's own
// memory, idle and aged connections), keepalives, and its credentials:
// plaintext, TLS or mutual TLS, the TLS files read again every
// --tls_reload_interval so that a renewed certificate serves without a
// restart (docs/api.md, "TLS and a hardened deployment").

#include <grpcpp/grpcpp.h>

#include <initializer_list>
#include <memory>

#include "absl/status/statusor.h"
#include "server/metrics/scrape_time_gauges.h"
#include "server/server_flags.h"

namespace dmlserve {

// Starts gRPC on --listen with `services`, health checking and (unless
// turned off) reflection; `port` receives the port it listens on.
// UNAVAILABLE names --listen when it cannot listen there.
absl::StatusOr<std::unique_ptr<grpc::Server>> ListenForGrpc(
    const ServerConfig& config, std::initializer_list<grpc::Service*> services, int& port);

// TLS as the log and the metrics show it (tls_certificate.h): logs what is
// required, until when the certificate is valid and whether the files are
// read again (a warning when it has expired), and adds
// dmlserve_tls_certificate_expiry_timestamp_seconds to `gauges` (with no
// sample on a plaintext server). `gauges` must outlive its scrapes.
void ReportTls(const ServerConfig& config, metrics::ScrapeTimeGauges& gauges);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_GRPC_LISTENER_H_

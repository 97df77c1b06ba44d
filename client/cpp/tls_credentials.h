#ifndef DMLSERVE_CLIENT_CPP_TLS_CREDENTIALS_H_
#define DMLSERVE_CLIENT_CPP_TLS_CREDENTIALS_H_

// Channel credentials for a dmlserve server started with --tls_cert_file
// (and --tls_client_ca_file for mutual TLS), from PEM files; pass them as
// ClientOptions::credentials.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"

namespace dmlserve::client {

// `ca_file`: the CA certificates that signed the server's certificate (empty:
// the system's roots). `cert_file` and `key_file`: this client's certificate
// and key, for a server that requires them (both or neither). NOT_FOUND or
// INVALID_ARGUMENT naming the file that cannot be used.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentialsFromFiles(
    const std::string& ca_file, const std::string& cert_file = "",
    const std::string& key_file = "");

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_TLS_CREDENTIALS_H_

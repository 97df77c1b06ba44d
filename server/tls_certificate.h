#ifndef DMLSERVE_SERVER_TLS_CERTIFICATE_H_
#define DMLSERVE_SERVER_TLS_CERTIFICATE_H_

// The server's TLS certificate as an operator watches it: when the one in
// --tls_cert_file expires. The listener reads the file again every
// --tls_reload_interval (grpc_listener.cc), so a renewed certificate serves without a
// restart; what this reads is what serves, within that interval. Exported as
// dmlserve_tls_certificate_expiry_timestamp_seconds (docs/metrics.md), logged
// at start-up.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dmlserve {

// The notAfter time of the first certificate in `pem` (a server's own
// certificate leads its chain). INVALID_ARGUMENT when there is none.
absl::StatusOr<absl::Time> CertificateExpiry(absl::string_view pem);

// The same, once `key_pem` is checked to be the certificate's private key:
// what a listener given these two serves (FAILED_PRECONDITION when the key is
// another's, INVALID_ARGUMENT when either does not parse).
absl::StatusOr<absl::Time> KeyPairExpiry(absl::string_view cert_pem, absl::string_view key_pem);

// The contents of a file (NOT_FOUND "cannot be read": the caller names it).
absl::StatusOr<std::string> ReadTlsFile(const std::string& path);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_TLS_CERTIFICATE_H_

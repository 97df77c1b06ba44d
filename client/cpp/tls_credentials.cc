#include "client/cpp/tls_credentials.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace dmlserve::client {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsCredentialsFromFiles(
    const std::string& ca_file, const std::string& cert_file, const std::string& key_file) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs its key, and a key its certificate: give both or neither");
  }
  grpc::SslCredentialsOptions options;
  for (auto [path, pem] : {std::pair{&ca_file, &options.pem_root_certs},
                           std::pair{&cert_file, &options.pem_cert_chain},
                           std::pair{&key_file, &options.pem_private_key}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> contents = ReadPem(*path);
    if (!contents.ok()) return contents.status();
    *pem = *std::move(contents);
  }
  return grpc::SslCredentials(options);
}

}  // namespace dmlserve::client

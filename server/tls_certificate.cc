#include "server/tls_certificate.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <ctime>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/civil_time.h"

namespace dmlserve {

absl::StatusOr<absl::Time> CertificateExpiry(absl::string_view pem) {
  if (pem.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError("the PEM file is too large");
  }
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  if (bio == nullptr) return absl::ResourceExhaustedError("OpenSSL: BIO_new_mem_buf failed");
  std::unique_ptr<X509, decltype(&X509_free)> certificate(
      PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), &X509_free);
  if (certificate == nullptr) {
    return absl::InvalidArgumentError("no PEM certificate (-----BEGIN CERTIFICATE-----) in it");
  }
  std::tm expiry{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(certificate.get()), &expiry) != 1) {
    return absl::InvalidArgumentError("the certificate's notAfter time does not parse");
  }
  return absl::FromCivil(absl::CivilSecond(expiry.tm_year + 1900, expiry.tm_mon + 1, expiry.tm_mday,
                                           expiry.tm_hour, expiry.tm_min, expiry.tm_sec),
                         absl::UTCTimeZone());
}

absl::StatusOr<absl::Time> CertificateFileExpiry(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::ostringstream contents;
  contents << file.rdbuf();
  absl::StatusOr<absl::Time> expiry = CertificateExpiry(contents.str());
  if (!expiry.ok()) {
    return absl::Status(expiry.status().code(),
                        absl::StrCat(path, ": ", expiry.status().message()));
  }
  return expiry;
}

}  // namespace dmlserve

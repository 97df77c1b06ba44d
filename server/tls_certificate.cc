#include "server/tls_certificate.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
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

namespace {

// OpenSSL records why a read failed in the thread's error queue; these
// functions report their own errors, so the queue is left as they found it
// (empty) for whatever SSL call the thread makes next.
struct ClearOpenSslErrors {
  ~ClearOpenSslErrors() { ERR_clear_error(); }
};

// Never asks for a passphrase (OpenSSL's default prompts on the terminal):
// gRPC cannot use an encrypted key, so the read fails instead.
int NoPassphrase(char*, int, int, void*) { return 0; }

using Bio = std::unique_ptr<BIO, decltype(&BIO_free)>;
using Certificate = std::unique_ptr<X509, decltype(&X509_free)>;

absl::StatusOr<Bio> MemoryBio(absl::string_view pem) {
  if (pem.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError("the PEM file is too large");
  }
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), &BIO_free);
  if (bio == nullptr) return absl::ResourceExhaustedError("OpenSSL: BIO_new_mem_buf failed");
  return bio;
}

absl::StatusOr<Certificate> FirstCertificate(absl::string_view pem) {
  absl::StatusOr<Bio> bio = MemoryBio(pem);
  if (!bio.ok()) return bio.status();
  Certificate certificate(PEM_read_bio_X509(bio->get(), nullptr, nullptr, nullptr), &X509_free);
  if (certificate == nullptr) {
    return absl::InvalidArgumentError("no PEM certificate (-----BEGIN CERTIFICATE-----) in it");
  }
  return certificate;
}

absl::StatusOr<absl::Time> NotAfter(const X509& certificate) {
  std::tm expiry{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(&certificate), &expiry) != 1) {
    return absl::InvalidArgumentError("the certificate's notAfter time does not parse");
  }
  return absl::FromCivil(absl::CivilSecond(expiry.tm_year + 1900, expiry.tm_mon + 1, expiry.tm_mday,
                                           expiry.tm_hour, expiry.tm_min, expiry.tm_sec),
                         absl::UTCTimeZone());
}

}  // namespace

absl::StatusOr<absl::Time> CertificateExpiry(absl::string_view pem) {
  const ClearOpenSslErrors clear;
  absl::StatusOr<Certificate> certificate = FirstCertificate(pem);
  if (!certificate.ok()) return certificate.status();
  return NotAfter(**certificate);
}

absl::StatusOr<absl::Time> KeyPairExpiry(absl::string_view cert_pem, absl::string_view key_pem) {
  const ClearOpenSslErrors clear;
  absl::StatusOr<Certificate> certificate = FirstCertificate(cert_pem);
  if (!certificate.ok()) return certificate.status();
  absl::StatusOr<Bio> bio = MemoryBio(key_pem);
  if (!bio.ok()) return bio.status();
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(bio->get(), nullptr, NoPassphrase, nullptr), &EVP_PKEY_free);
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        key_pem.find("ENCRYPTED") != absl::string_view::npos
            ? "the private key is encrypted; gRPC needs it unencrypted (protect the file instead)"
            : "no PEM private key in the key file");
  }
  if (X509_check_private_key(certificate->get(), key.get()) != 1) {
    return absl::FailedPreconditionError("the key file holds another certificate's private key");
  }
  return NotAfter(**certificate);
}

absl::StatusOr<std::string> ReadTlsFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError("cannot be read");
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

}  // namespace dmlserve

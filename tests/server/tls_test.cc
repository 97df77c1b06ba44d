// TLS and mutual TLS on the gRPC listener, with real certificates made by
// openssl for this test run: unary calls and streams work over TLS, a
// plaintext client is refused, and with --tls_client_ca_file a client without
// a certificate the CA signed is refused.

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/server_fixture.h"
#include "tests/server/server_process.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// A CA, a server certificate for 127.0.0.1 and a client certificate, both
// signed by the CA, as PEM files in a fresh directory.
struct Certificates {
  std::string dir;
  std::string path(const std::string& name) const { return dir + "/" + name; }
  std::string pem(const std::string& name) const { return ReadFile(path(name)); }
};

bool MakeCertificates(Certificates& certs) {
  certs.dir = ::testing::TempDir() + "dmlserve_tls_" + std::to_string(getpid());
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script = absl::StrCat(
      "set -e; mkdir -p ", certs.dir, "; cd ", certs.dir, "; ", "openssl req -x509 ", key,
      " -keyout ca.key -out ca.pem -days 2 -subj '/CN=dmlserve test CA' ", "2>/dev/null; ",
      "openssl req ", key,
      " -keyout server.key -out server.csr -subj '/CN=localhost' 2>/dev/null; ",
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext; ",
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 ",
      "-extfile server.ext -out server.pem 2>/dev/null; ", "openssl req ", key,
      " -keyout client.key -out client.csr -subj '/CN=dmlserve client' ", "2>/dev/null; ",
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 ",
      "-out client.pem 2>/dev/null; ",
      // A second CA: its certificates must not open a mutual TLS server.
      "openssl req -x509 ", key, " -keyout other_ca.key -out other_ca.pem -days 2 ",
      "-subj '/CN=other CA' 2>/dev/null; ", "openssl req ", key,
      " -keyout stranger.key -out stranger.csr -subj '/CN=stranger' ", "2>/dev/null; ",
      "openssl x509 -req -in stranger.csr -CA other_ca.pem -CAkey other_ca.key -CAcreateserial ",
      "-days 2 -out stranger.pem 2>/dev/null; ",
      // The server's key under a passphrase, which gRPC cannot use.
      "openssl pkey -in server.key -aes256 -passout pass:secret -out encrypted.key 2>/dev/null");
  return std::system(script.c_str()) == 0;
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_TRUE(MakeCertificates(certs_)) << "openssl failed"; }
  // The keys are test keys, but a suite leaves nothing behind in /tmp.
  static void TearDownTestSuite() { std::filesystem::remove_all(certs_.dir); }

  void StartServer(bool mutual) {
    std::vector<std::string> flags = {"--tls_cert_file=" + certs_.path("server.pem"),
                                      "--tls_key_file=" + certs_.path("server.key")};
    if (mutual) flags.push_back("--tls_client_ca_file=" + certs_.path("ca.pem"));
    absl::StatusOr<std::unique_ptr<ServerProcess>> server =
        ServerProcess::Start(DMLSERVE_BINARY, flags);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void TearDown() override {
    if (server_ == nullptr) return;
    absl::StatusOr<int> exit_code = server_->Stop();
    ASSERT_TRUE(exit_code.ok()) << exit_code.status();
    EXPECT_EQ(*exit_code, 0) << server_->Output();
  }

  // A stub over TLS trusting the test CA, presenting `client` ("client",
  // "stranger" or "" for none).
  std::unique_ptr<v1::OperatorService::Stub> TlsStub(const std::string& client) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = certs_.pem("ca.pem");
    if (!client.empty()) {
      options.pem_private_key = certs_.pem(client + ".key");
      options.pem_cert_chain = certs_.pem(client + ".pem");
    }
    return v1::OperatorService::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::SslCredentials(options)));
  }

  // One unary cumulative sum and a stream of three; the first failure.
  static grpc::Status UnaryAndStream(v1::OperatorService::Stub& stub) {
    v1::ExecuteResponse response;
    auto context = MakeContext(absl::Seconds(30));
    grpc::Status status = stub.Execute(
        context.get(), ScanRequest("unary", v1::FLOAT32, {3}, {1, 2, 3}, 0), &response);
    if (!status.ok()) return status;
    EXPECT_EQ(TensorValues(response.output()), (std::vector<double>{1, 3, 6}));
    auto stream_context = MakeContext(absl::Seconds(30));
    auto stream = stub.ExecuteStream(stream_context.get());
    for (int i = 0; i < 3; ++i) {
      stream->Write(ScanRequest(absl::StrCat("item", i), v1::FLOAT32, {2}, {1.0 * i, 1}, 0));
    }
    stream->WritesDone();
    int answered = 0;
    while (stream->Read(&response)) {
      EXPECT_EQ(response.status().code(), 0) << response.status().message();
      ++answered;
    }
    status = stream->Finish();
    if (status.ok()) {
      EXPECT_EQ(answered, 3);
    }
    return status;
  }

  static Certificates certs_;
  std::unique_ptr<ServerProcess> server_;
};

Certificates TlsTest::certs_;

TEST_F(TlsTest, UnaryAndStreamOverTlsAndPlaintextIsRefused) {
  StartServer(/*mutual=*/false);
  auto stub = TlsStub("");
  const grpc::Status status = UnaryAndStream(*stub);
  EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();

  auto plaintext = v1::OperatorService::NewStub(
      grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  v1::ExecuteResponse response;
  auto context = MakeContext(absl::Seconds(10));
  EXPECT_EQ(plaintext->Execute(context.get(), ScanRequest("x", v1::FLOAT32, {1}, {1}, 0), &response)
                .error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsTest, MutualTlsRequiresACertificateTheCaSigned) {
  StartServer(/*mutual=*/true);
  auto with_certificate = TlsStub("client");
  const grpc::Status status = UnaryAndStream(*with_certificate);
  EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();

  for (const std::string client : {"", "stranger"}) {
    SCOPED_TRACE(client.empty() ? "no certificate" : client);
    auto stub = TlsStub(client);
    v1::ExecuteResponse response;
    auto context = MakeContext(absl::Seconds(10));
    EXPECT_EQ(stub->Execute(context.get(), ScanRequest("x", v1::FLOAT32, {1}, {1}, 0), &response)
                  .error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }
}

// dmlserve-cli's --tls_ca_file, --tls_cert_file and --tls_key_file.
TEST_F(TlsTest, TheCliConnectsOverMutualTls) {
  StartServer(/*mutual=*/true);
  const std::vector<std::string> call = {"cumsum", "--server=" + server_->grpc_address(),
                                         "--sizes=3", "--values=1,2,3", "--axis=0"};
  std::vector<std::string> args = call;
  for (const std::string& flag :
       {"--tls_ca_file=" + certs_.path("ca.pem"), "--tls_cert_file=" + certs_.path("client.pem"),
        "--tls_key_file=" + certs_.path("client.key")}) {
    args.push_back(flag);
  }
  absl::StatusOr<ServerProcess::Exit> exit = ServerProcess::RunToExit(DMLSERVE_CLI, args);
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(exit->exit_code, 0) << exit->output;
  EXPECT_THAT(exit->output, HasSubstr("\"values\":[1.0,3.0,6.0]"));
  // Without its certificate the server refuses it.
  std::vector<std::string> without = call;
  without.push_back("--tls_ca_file=" + certs_.path("ca.pem"));
  exit = ServerProcess::RunToExit(DMLSERVE_CLI, without);
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_NE(exit->exit_code, 0);
  EXPECT_THAT(exit->output, HasSubstr("UNAVAILABLE"));
}

TEST_F(TlsTest, IncompleteOrUnreadableTlsFlagsStopTheStart) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--tls_cert_file=" + certs_.path("server.pem")},
       "--tls_cert_file and --tls_key_file: give both"},
      {{"--tls_client_ca_file=" + certs_.path("ca.pem")},
       "--tls_client_ca_file: needs --tls_cert_file"},
      {{"--tls_cert_file=/no/such/cert.pem", "--tls_key_file=" + certs_.path("server.key")},
       "--tls_cert_file=/no/such/cert.pem: cannot be read"},
      {{"--tls_cert_file=" + certs_.path("server.ext"),
        "--tls_key_file=" + certs_.path("server.key")},
       "not a PEM file"},
      {{"--tls_cert_file=" + certs_.path("server.pem"),
        "--tls_key_file=" + certs_.path("client.key")},
       "the key file holds another certificate's private key"},
      {{"--tls_cert_file=" + certs_.path("server.pem"),
        "--tls_key_file=" + certs_.path("encrypted.key")},
       "the private key is encrypted; gRPC needs it unencrypted"},
      {{"--tls_cert_file=" + certs_.path("server.pem"),
        "--tls_key_file=" + certs_.path("server.key"),
        "--tls_client_ca_file=" + certs_.path("server.key")},
       "server.key: no PEM certificate (-----BEGIN CERTIFICATE-----) in it"},
      {{"--tls_cert_file=" + certs_.path("server.pem"),
        "--tls_key_file=" + certs_.path("server.key"), "--tls_reload_interval=500ms"},
       "--tls_reload_interval=500ms: must be 0 (read once) or whole seconds from 1s to 8760h"},
      {{"--tls_cert_file=" + certs_.path("server.pem"),
        "--tls_key_file=" + certs_.path("server.key"), "--tls_reload_interval=1500ms"},
       "--tls_reload_interval=1.5s: must be 0 (read once) or whole seconds"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    std::vector<std::string> args = {"--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    absl::StatusOr<ServerProcess::Exit> exit = ServerProcess::RunToExit(DMLSERVE_BINARY, args);
    ASSERT_TRUE(exit.ok()) << exit.status();
    EXPECT_NE(exit->exit_code, 0);
    EXPECT_THAT(exit->output, HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace dmlserve::testing

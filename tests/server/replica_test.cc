// Scale-out on loopback: three dmlserve processes started from one tensor
// repository, and one C++ client given all three endpoints. Requests (unary
// and streams) use the repository's weights and weights the client registers
// itself (RegisterTensor reaches every replica); every answer is checked.
// One replica is stopped with SIGTERM mid-run: its calls in flight finish,
// later calls go to the others, and no request is lost.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "client/cpp/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/fake_dns_server.h"
#include "tests/server/metrics_scrape.h"
#include "tests/server/server_process.h"
#include "tests/server/tensor_values.h"
#include "tests/server/test_requests.h"

namespace dmlserve::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kReplicas = 3;

// The replicas' tensor repository: one folder per test process.
std::filesystem::path RepositoryDirectory() {
  return std::filesystem::path(::testing::TempDir()) / absl::StrCat("dmlserve-replicas-", getpid());
}

// Writes a repository holding `weights`'s B as "repository-b" (raw UINT8).
std::filesystem::path WriteRepository(const QuantizedMatMulCase& weights) {
  const std::filesystem::path directory = RepositoryDirectory();
  std::filesystem::create_directories(directory);
  std::ofstream(directory / "b.bin", std::ios::binary) << MatMulB(weights).data();
  std::ofstream(directory / "manifest.json") << absl::StrCat(
      R"({"tensors": [{"id": "repository-b", "file": "b.bin", "data_type": "UINT8", "sizes": [1, 1, )",
      weights.k, ", ", weights.n, "]}]}");
  return directory;
}

// A TCP port free on each of `hosts` (IPv4 loopback addresses) right now.
absl::StatusOr<int> FreePortOnEvery(const std::vector<std::string>& hosts) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    std::vector<int> sockets;
    int port = 0;
    bool free = true;
    for (const std::string& host : hosts) {
      const int s = socket(AF_INET, SOCK_STREAM, 0);
      sockets.push_back(s);
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET, host.c_str(), &address.sin_addr);
      socklen_t length = sizeof(address);
      if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
          getsockname(s, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
        free = false;
        break;
      }
      port = ntohs(address.sin_port);
    }
    for (int s : sockets) {
      if (s >= 0) close(s);
    }
    if (free) return port;
  }
  return absl::UnavailableError("no port free on every loopback address");
}

class ReplicaTest : public ::testing::Test {
 protected:
  static void TearDownTestSuite() { std::filesystem::remove_all(RepositoryDirectory()); }

  void SetUp() override {
    absl::BitGen bitgen;
    repository_weights_ = RandomWeights(bitgen, 24, 8);
    own_weights_ = RandomWeights(bitgen, 16, 12);
    repository_ = WriteRepository(repository_weights_);
    StartReplicas({});
  }

  // Starts kReplicas servers (after stopping any running), each on
  // listen[i] or, without it, a free port of 127.0.0.1.
  void StartReplicas(const std::vector<std::string>& listen) {
    servers_.clear();
    std::vector<std::string> addresses;
    for (int i = 0; i < kReplicas; ++i) {
      std::vector<std::string> args = {absl::StrCat("--tensor_repository=", repository_.string())};
      if (i < static_cast<int>(listen.size())) args.push_back(absl::StrCat("--listen=", listen[i]));
      absl::StatusOr<std::unique_ptr<ServerProcess>> server =
          ServerProcess::Start(DMLSERVE_BINARY, args);
      ASSERT_TRUE(server.ok()) << server.status();
      addresses.push_back((*server)->grpc_address());
      servers_.push_back(*std::move(server));
    }
    targets_ = absl::StrJoin(addresses, ",");
  }

  // Four threads, each 60 rounds of one unary call and one 4-item stream
  // through `client`, alternating the repository's weights and "client-b"
  // (own_weights_, which every replica must hold); replica 1 is stopped with
  // SIGTERM a third of the way in. Every call must succeed with the right
  // answer, and the other replicas must take over the stopped one's share.
  void RunLoadStoppingOneReplica(client::Client& client) {
    constexpr int kThreads = 4, kRounds = 60, kStreamItems = 4;
    std::atomic<int> rounds_done{0}, answers_checked{0};
    absl::Mutex failures_mu;
    std::vector<std::string> failures;
    auto fail = [&](std::string what) {
      absl::MutexLock lock(&failures_mu);
      failures.push_back(std::move(what));
    };
    auto load = [&](int thread) {
      absl::BitGen bitgen;
      for (int round = 0; round < kRounds; ++round) {
        const bool own = (round + thread) % 2 == 1;
        const QuantizedMatMulCase& weights = own ? own_weights_ : repository_weights_;
        const std::string b_id = own ? "client-b" : "repository-b";
        const QuantizedMatMulCase unary = RandomMatMulCase(bitgen, weights);
        absl::StatusOr<v1::ExecuteResponse> response =
            client.Execute(MatMulRequest("unary", unary, b_id));
        if (!response.ok()) {
          fail(absl::StrCat("unary: ", response.status().ToString()));
        } else if (TensorValues(response->output()) != QuantizedMatMulReference(unary)) {
          fail("unary: a wrong answer");
        } else {
          ++answers_checked;
        }
        std::vector<QuantizedMatMulCase> cases;
        std::vector<v1::ExecuteRequest> requests;
        for (int i = 0; i < kStreamItems; ++i) {
          cases.push_back(RandomMatMulCase(bitgen, weights));
          requests.push_back(MatMulRequest(absl::StrCat("item-", i), cases.back(), b_id));
        }
        auto results = client.ExecuteMany(std::move(requests));
        if (!results.ok()) {
          fail(absl::StrCat("stream: ", results.status().ToString()));
        } else {
          for (int i = 0; i < kStreamItems; ++i) {
            const auto& item = (*results)[i];
            if (!item.ok()) {
              fail(absl::StrCat("stream item: ", item.status().ToString()));
            } else if (TensorValues(item->output()) != QuantizedMatMulReference(cases[i])) {
              fail("stream item: a wrong answer");
            } else {
              ++answers_checked;
            }
          }
        }
        ++rounds_done;
      }
    };

    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(load, t);
    // A third of the way in, replica 1 is stopped while calls are in flight.
    while (rounds_done.load() < kThreads * kRounds / 3) absl::SleepFor(absl::Milliseconds(1));
    const double answered_by_stopped = Answered(1);
    absl::StatusOr<int> exit_code = servers_[1]->Stop();
    const int rounds_at_stop = rounds_done.load();
    for (std::thread& thread : threads) thread.join();

    ASSERT_TRUE(exit_code.ok()) << exit_code.status();
    EXPECT_EQ(*exit_code, 0) << servers_[1]->Output();
    // The others still serve (a client that sends a call on to the next
    // replica would hide one that died).
    for (int i : {0, 2})
      EXPECT_TRUE(servers_[i]->Alive()) << "replica " << i << "\n" << servers_[i]->Output();
    {
      absl::MutexLock lock(&failures_mu);
      EXPECT_THAT(failures, ::testing::IsEmpty()) << servers_[1]->Output();
    }
    EXPECT_EQ(answers_checked.load(), kThreads * kRounds * (1 + kStreamItems));
    EXPECT_LT(rounds_at_stop, kThreads * kRounds) << "the stop came after the load had ended";
    // Every replica served a share before the stop; the other two after it.
    EXPECT_GT(answered_by_stopped, 0);
    for (int i : {0, 2}) EXPECT_GT(Answered(i), answered_by_stopped / 2) << "replica " << i;
    // The load the stopped replica no longer took went to the others.
    const double total = Answered(0) + Answered(2);
    EXPECT_GE(total + answered_by_stopped, kThreads * kRounds * (1 + kStreamItems) / 2);
  }

  // Requests answered OK by replica `i`, from its metrics.
  double Answered(int i) {
    return ScrapeSum(servers_[i]->metrics_address(), "dmlserve_requests_total", {{"code", "OK"}})
        .value_or(-1);
  }

  QuantizedMatMulCase repository_weights_;
  QuantizedMatMulCase own_weights_;
  std::filesystem::path repository_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
  std::string targets_;
};

TEST_F(ReplicaTest, RequestsSpreadOverReplicasAndNoneIsLostWhenOneStops) {
  client::ClientOptions options;
  options.default_timeout = absl::Seconds(60);
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Client::Connect(targets_, options);
  ASSERT_TRUE(client.ok()) << client.status();

  // Registered through the client: every replica must have it.
  absl::StatusOr<v1::RegisterTensorResponse> registered =
      (*client)->RegisterTensor(MatMulB(own_weights_), "client-b");
  ASSERT_TRUE(registered.ok()) << registered.status();
  for (const auto& server : servers_) {
    absl::StatusOr<std::unique_ptr<client::Client>> one =
        client::Client::Connect(server->grpc_address(), options);
    ASSERT_TRUE(one.ok());
    absl::BitGen bitgen;
    const QuantizedMatMulCase c = RandomMatMulCase(bitgen, own_weights_);
    absl::StatusOr<v1::ExecuteResponse> response =
        (*one)->Execute(MatMulRequest("on-each", c, "client-b"));
    ASSERT_TRUE(response.ok()) << server->grpc_address() << ": " << response.status();
    EXPECT_EQ(TensorValues(response->output()), QuantizedMatMulReference(c));
  }

  RunLoadStoppingOneReplica(**client);
}

// The same load through a dns: target, the Kubernetes setup (a headless
// Service): one name with the three replicas behind it (127.0.0.1-3, one
// port, served by a DNS server of the test's own that the target names as
// its authority). A call the stopping replica refuses (UNAVAILABLE) is sent
// again and lands on another (the channel's retry policy), as with a list.
TEST_F(ReplicaTest, ADnsTargetLosesNoRequestWhenOneReplicaStops) {
  absl::StatusOr<int> port = FreePortOnEvery({"127.0.0.1", "127.0.0.2", "127.0.0.3"});
  ASSERT_TRUE(port.ok()) << port.status();
  StartReplicas({absl::StrCat("127.0.0.1:", *port), absl::StrCat("127.0.0.2:", *port),
                 absl::StrCat("127.0.0.3:", *port)});
  absl::StatusOr<std::unique_ptr<FakeDnsServer>> dns =
      FakeDnsServer::Start({"127.0.0.1", "127.0.0.2", "127.0.0.3"});
  ASSERT_TRUE(dns.ok()) << dns.status();
  client::ClientOptions options;
  options.default_timeout = absl::Seconds(60);
  // Registered on each replica directly: the client would resolve the name
  // with the machine's resolver, which does not know it.
  for (const auto& server : servers_) {
    absl::StatusOr<std::unique_ptr<client::Client>> one =
        client::Client::Connect(server->grpc_address(), options);
    ASSERT_TRUE(one.ok());
    ASSERT_TRUE((*one)->RegisterTensor(MatMulB(own_weights_), "client-b").ok());
  }
  absl::StatusOr<std::unique_ptr<client::Client>> client = client::Client::Connect(
      absl::StrCat("dns://", (*dns)->address(), "/replicas.test:", *port), options);
  ASSERT_TRUE(client.ok()) << client.status();
  RunLoadStoppingOneReplica(**client);
  EXPECT_GT((*dns)->a_queries(), 0) << "the name was not resolved through the test's server";
}

// A replica that dies in the middle of an ExecuteMany stream, after some of
// its answers: the client sends the requests it left unanswered to the next
// replica, and every answer comes back. The first replica takes 1 s per
// batch (DMLSERVE_INJECT_BATCH_DELAY_US) and the four requests cannot share
// a batch (four scans with different attributes), so it is killed once its
// metrics show a first answer, with the others still being computed.
TEST_F(ReplicaTest, AStreamAReplicaBreaksOffGoesOnOnTheNextReplica) {
  setenv("DMLSERVE_INJECT_BATCH_DELAY_US", "1000000", /*overwrite=*/1);
  absl::StatusOr<std::unique_ptr<ServerProcess>> slow = ServerProcess::Start(DMLSERVE_BINARY);
  unsetenv("DMLSERVE_INJECT_BATCH_DELAY_US");
  ASSERT_TRUE(slow.ok()) << slow.status();
  client::ClientOptions options;
  options.default_timeout = absl::Seconds(60);
  // The first call of a new client goes to the first replica of the list.
  absl::StatusOr<std::unique_ptr<client::Client>> client = client::Client::Connect(
      absl::StrCat((*slow)->grpc_address(), ",", servers_[1]->grpc_address()), options);
  ASSERT_TRUE(client.ok()) << client.status();

  const std::vector<double> values = {1, 2, 3, 4};
  std::vector<v1::ExecuteRequest> requests = {
      ScanRequest("sum", v1::FLOAT32, {4}, values, 0),
      ScanRequest("product", v1::FLOAT32, {4}, values, 0, /*product=*/true),
      ScanRequest("decreasing", v1::FLOAT32, {4}, values, 0, false, /*decreasing=*/true),
      ScanRequest("exclusive", v1::FLOAT32, {4}, values, 0, false, false, /*exclusive=*/true)};
  const std::vector<std::vector<double>> expected = {
      {1, 3, 6, 10}, {1, 2, 6, 24}, {10, 9, 7, 4}, {0, 1, 3, 6}};
  std::thread killer([&] {
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (absl::Now() < give_up &&
           ScrapeSum((*slow)->metrics_address(), "dmlserve_requests_total", {{"code", "OK"}})
                   .value_or(0) < 1) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    // The metric counts an answer when it is handed to gRPC, before it is
    // on the wire: killed at once, the replica may take it along (seen on a
    // busy machine: the next replica then computed all four). Its next
    // answer is a whole injected second away.
    absl::SleepFor(absl::Milliseconds(500));
    (*slow)->Signal(SIGKILL);
  });
  auto results = (*client)->ExecuteMany(requests);
  killer.join();
  ASSERT_TRUE(results.ok()) << results.status();
  for (size_t i = 0; i < requests.size(); ++i) {
    const absl::StatusOr<v1::ExecuteResponse>& result = (*results)[i];
    ASSERT_TRUE(result.ok()) << requests[i].request_id() << ": " << result.status();
    EXPECT_EQ(result->request_id(), requests[i].request_id());
    EXPECT_EQ(TensorValues(result->output()), expected[i]) << requests[i].request_id();
  }
  // The next replica computed what the first left unanswered.
  EXPECT_GE(Answered(1), 1);
  EXPECT_LE(Answered(1), 3);
}

TEST_F(ReplicaTest, RegisterAndReleaseReachEveryReplicaAndNameTheOneThatRefused) {
  absl::StatusOr<std::unique_ptr<client::Client>> client = client::Client::Connect(targets_);
  ASSERT_TRUE(client.ok()) << client.status();
  // Without an id, the client makes one that every replica shares.
  absl::StatusOr<v1::RegisterTensorResponse> generated =
      (*client)->RegisterTensor(MatMulB(own_weights_));
  ASSERT_TRUE(generated.ok()) << generated.status();
  for (const auto& server : servers_) {
    absl::StatusOr<std::unique_ptr<client::Client>> one =
        client::Client::Connect(server->grpc_address());
    ASSERT_TRUE(one.ok());
    EXPECT_TRUE((*one)->ReleaseTensor(generated->tensor_id()).ok()) << server->grpc_address();
  }

  // Replica 2 already has "taken": registering it through the client names it.
  absl::StatusOr<std::unique_ptr<client::Client>> third =
      client::Client::Connect(servers_[2]->grpc_address());
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE((*third)->RegisterTensor(MatMulB(own_weights_), "taken").ok());
  absl::StatusOr<v1::RegisterTensorResponse> refused =
      (*client)->RegisterTensor(MatMulB(own_weights_), "taken");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.status().message(),
              HasSubstr(absl::StrCat("refused by replica ", servers_[2]->grpc_address())));
  EXPECT_THAT(refused.status().message(), HasSubstr(servers_[0]->grpc_address()));
  // Release reaches all three (each had it by now).
  EXPECT_TRUE((*client)->ReleaseTensor("taken").ok());
  EXPECT_EQ((*client)->ReleaseTensor("taken").code(), absl::StatusCode::kNotFound);
  // The repository's tensors are read-only on every replica.
  EXPECT_EQ((*client)->ReleaseTensor("repository-b").code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ReplicaTest, ADnsTargetBalancesAndRegistersOnTheAddressesItResolvesTo) {
  // A numeric name resolves to itself: one replica, through the dns: path.
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Client::Connect(absl::StrCat("dns:///", servers_[0]->grpc_address()));
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<v1::RegisterTensorResponse> registered =
      (*client)->RegisterTensor(MatMulB(own_weights_), "by-dns");
  ASSERT_TRUE(registered.ok()) << registered.status();
  absl::BitGen bitgen;
  const QuantizedMatMulCase c = RandomMatMulCase(bitgen, own_weights_);
  absl::StatusOr<v1::ExecuteResponse> response =
      (*client)->Execute(MatMulRequest("by-dns", c, "by-dns"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(TensorValues(response->output()), QuantizedMatMulReference(c));
  EXPECT_TRUE((*client)->ReleaseTensor("by-dns").ok());
  EXPECT_THAT(client::Client::Connect("dns:///").status().message(),
              HasSubstr("a dns: target names one host"));
}

TEST_F(ReplicaTest, TheCliRegistersAndReleasesOnEveryReplica) {
  const std::string server = absl::StrCat("--server=", targets_);
  absl::StatusOr<ServerProcess::Exit> registered = ServerProcess::RunToExit(
      DMLSERVE_CLI,
      {server, "register", "--dtype=INT32", "--sizes=4", "--values=1,2,3,4", "--id=cli-values"});
  ASSERT_TRUE(registered.ok()) << registered.status();
  ASSERT_EQ(registered->exit_code, 0) << registered->output;
  for (const auto& replica : servers_) {
    absl::StatusOr<std::unique_ptr<client::Client>> one =
        client::Client::Connect(replica->grpc_address());
    ASSERT_TRUE(one.ok());
    client::ScanOptions scan;
    absl::StatusOr<v1::ExecuteResponse> response =
        (*one)->CumulativeSummation(TensorRef("cli-values"), scan);
    ASSERT_TRUE(response.ok()) << replica->grpc_address() << ": " << response.status();
    EXPECT_EQ(TensorValues(response->output()), (std::vector<double>{1, 3, 6, 10}));
  }
  absl::StatusOr<ServerProcess::Exit> released =
      ServerProcess::RunToExit(DMLSERVE_CLI, {server, "release", "--id=cli-values"});
  ASSERT_TRUE(released.ok());
  EXPECT_EQ(released->exit_code, 0) << released->output;
  absl::StatusOr<ServerProcess::Exit> bad =
      ServerProcess::RunToExit(DMLSERVE_CLI, {"--server=127.0.0.1:1,,x:2", "info"});
  ASSERT_TRUE(bad.ok());
  EXPECT_NE(bad->exit_code, 0);
  EXPECT_THAT(bad->output, HasSubstr("an empty entry in the list"));
}

TEST(ReplicaTargetTest, BadTargetsAreRefusedNamingThePart) {
  EXPECT_THAT(client::Client::Connect("127.0.0.1:1,,127.0.0.1:2").status().message(),
              HasSubstr("an empty entry"));
  EXPECT_THAT(client::Client::Connect("127.0.0.1:1,dns:///x:1").status().message(),
              HasSubstr("give a dns: name on its own"));
  EXPECT_EQ(client::Client::Connect("").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dmlserve::testing

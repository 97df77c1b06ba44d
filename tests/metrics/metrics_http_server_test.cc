#include "server/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/metrics/metrics.h"
#include "server/metrics/text_registry.h"

namespace dmlserve::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// A plain HTTP/1.1 exchange over a loopback socket; the server closes the
// connection after the response ("Connection: close"), which ends the body.
HttpResponse Fetch(int port, const std::string& method, const std::string& target) {
  HttpResponse response;
  const int fd = ConnectLoopback(port);
  if (fd < 0) {
    ADD_FAILURE() << "cannot connect to 127.0.0.1:" << port;
    return response;
  }
  const std::string request = method + " " + target +
                              " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                              "\r\nConnection: close\r\n\r\n";
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) raw.append(buffer, n);
  close(fd);

  const size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    ADD_FAILURE() << "no complete response header in: " << raw;
    return response;
  }
  std::istringstream head(raw.substr(0, header_end));
  std::string line;
  std::getline(head, line);
  if (std::sscanf(line.c_str(), "HTTP/1.%*d %d", &response.status) != 1) {
    ADD_FAILURE() << "bad status line: " << line;
  }
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t value_start = colon + 1;
    while (value_start < line.size() && line[value_start] == ' ') ++value_start;
    response.headers[name] = line.substr(value_start);
  }
  response.body = raw.substr(header_end + 4);
  return response;
}

std::unique_ptr<MetricsHttpServer> StartOnLoopback(const Registry* registry) {
  auto server = MetricsHttpServer::Start("127.0.0.1:0", registry);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

// The families the service registers (docs/metrics.md), with samples.
void FillLikeTheService(Registry& registry) {
  const std::vector<std::string> operators = {"cumulative_summation", "cumulative_product",
                                              "quantized_linear_matrix_multiply"};
  Family<Counter>& requests = registry.AddCounter(
      "dmlserve_requests_total", "Execute requests by operator and gRPC status code.",
      {"operator", "code"});
  Family<Histogram>& duration = registry.AddHistogram(
      "dmlserve_request_duration_seconds", "Time from receiving a request to its response.",
      {"operator"}, LatencyBuckets());
  Family<Histogram>& queue = registry.AddHistogram("dmlserve_queue_duration_seconds",
                                                   "Time from admission until the batch started.",
                                                   {"operator"}, LatencyBuckets());
  Family<Histogram>& batch = registry.AddHistogram(
      "dmlserve_batch_size", "Requests per executed batch.", {"operator"}, PowerOfTwoBuckets(64));
  Family<Counter>& bytes = registry.AddCounter("dmlserve_request_bytes_total",
                                               "Bytes of tensor data received.", {"operator"});
  for (size_t i = 0; i < operators.size(); ++i) {
    requests.WithLabels({operators[i], "OK"}).Increment(10 * (i + 1));
    requests.WithLabels({operators[i], "INVALID_ARGUMENT"}).Increment();
    duration.WithLabels({operators[i]}).Observe(0.0004 * (i + 1));
    queue.WithLabels({operators[i]}).Observe(0.0001);
    batch.WithLabels({operators[i]}).Observe(static_cast<double>(i + 1));
    bytes.WithLabels({operators[i]}).Increment(4096);
  }
  registry
      .AddHistogram("dmlserve_compute_duration_seconds", "Device time per batch.", {"device"},
                    LatencyBuckets())
      .WithLabels({"cpu:0"})
      .Observe(0.002);
  registry.AddGauge("dmlserve_queue_depth", "Jobs waiting for a device.", {}).WithLabels({}).Set(3);
  registry.AddGauge("dmlserve_inflight_requests", "Requests being served.", {})
      .WithLabels({})
      .Set(5);
  registry.AddGauge("dmlserve_registered_tensor_bytes", "Bytes held by RegisterTensor.", {})
      .WithLabels({})
      .Set(1 << 20);
  registry.AddGauge("dmlserve_build_info", "Build version; always 1.", {"version"})
      .WithLabels({"0.1.0"})
      .Set(1);
  registry.AddCallbackGauge("dmlserve_device_memory_bytes", "Device memory in use.", {"device"},
                            [] {
                              return std::vector<std::pair<LabelValues, double>>{
                                  {{"cpu:0"}, 65536}, {{"d3d12:0"}, 1 << 24}};
                            });
  registry
      .AddCounter("dmlserve_device_removals_total", "Devices taken out of rotation.", {"device"})
      .WithLabels({"d3d12:0"})
      .Increment(0);
  // Exercise escaping and special values through the real parser too.
  registry.AddGauge("test_escaping", "Help with \\ and\nnewline.", {"value"})
      .WithLabels({"quote \" backslash \\ newline \n end"})
      .Set(std::numeric_limits<double>::quiet_NaN());
}

TEST(MetricsHttpServerTest, PicksAFreePortAndServesTheRegistry) {
  auto registry = CreateRegistry();
  registry->AddCounter("served_total", "Served.", {"path"}).WithLabels({"/x"}).Increment(7);
  auto server = StartOnLoopback(registry.get());
  ASSERT_NE(server, nullptr);
  EXPECT_GT(server->port(), 0);
  EXPECT_EQ(server->address(), "127.0.0.1:" + std::to_string(server->port()));

  const HttpResponse response = Fetch(server->port(), "GET", "/metrics");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.headers.at("content-type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(response.body, registry->Serialize());
  EXPECT_THAT(response.body, HasSubstr("served_total{path=\"/x\"} 7\n"));
}

TEST(MetricsHttpServerTest, EveryScrapeSeesCurrentValues) {
  auto registry = CreateRegistry();
  Counter& counter = registry->AddCounter("ticks_total", "Ticks.", {}).WithLabels({});
  auto server = StartOnLoopback(registry.get());
  ASSERT_NE(server, nullptr);
  for (int i = 1; i <= 3; ++i) {
    counter.Increment();
    EXPECT_THAT(Fetch(server->port(), "GET", "/metrics").body,
                HasSubstr("\nticks_total " + std::to_string(i) + "\n"));
  }
}

TEST(MetricsHttpServerTest, QueryStringIsIgnored) {
  auto registry = CreateRegistry();
  registry->AddGauge("g", "G.", {}).WithLabels({}).Set(2);
  auto server = StartOnLoopback(registry.get());
  ASSERT_NE(server, nullptr);
  const HttpResponse response = Fetch(server->port(), "GET", "/metrics?name[]=g");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, registry->Serialize());
}

TEST(MetricsHttpServerTest, OtherPathsAre404) {
  auto registry = CreateRegistry();
  registry->AddGauge("g", "G.", {}).WithLabels({}).Set(2);
  auto server = StartOnLoopback(registry.get());
  ASSERT_NE(server, nullptr);
  for (const char* path : {"/", "/metric", "/metrics/", "/metrics/x", "/index.html", "/..%2f"}) {
    const HttpResponse response = Fetch(server->port(), "GET", path);
    EXPECT_EQ(response.status, 404) << path;
    EXPECT_THAT(response.body, ::testing::Not(HasSubstr("g 2"))) << path;
  }
}

TEST(MetricsHttpServerTest, HeadHasNoBodyAndOtherMethodsAre405) {
  auto registry = CreateRegistry();
  registry->AddGauge("g", "G.", {}).WithLabels({}).Set(2);
  auto server = StartOnLoopback(registry.get());
  ASSERT_NE(server, nullptr);
  const HttpResponse head = Fetch(server->port(), "HEAD", "/metrics");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  EXPECT_EQ(head.headers.at("content-length"), std::to_string(registry->Serialize().size()));
  EXPECT_EQ(Fetch(server->port(), "POST", "/metrics").status, 405);
  EXPECT_EQ(Fetch(server->port(), "DELETE", "/metrics").status, 405);
}

TEST(MetricsHttpServerTest, StopClosesThePort) {
  auto registry = CreateRegistry();
  auto server = StartOnLoopback(registry.get());
  ASSERT_NE(server, nullptr);
  const int port = server->port();
  EXPECT_EQ(Fetch(port, "GET", "/metrics").status, 200);
  server.reset();
  const int fd = ConnectLoopback(port);
  EXPECT_LT(fd, 0) << "port " << port << " still accepts connections after Stop";
  if (fd >= 0) close(fd);
}

TEST(MetricsHttpServerTest, BusyPortIsAnError) {
  auto registry = CreateRegistry();
  auto first = StartOnLoopback(registry.get());
  ASSERT_NE(first, nullptr);
  auto second =
      MetricsHttpServer::Start("127.0.0.1:" + std::to_string(first->port()), registry.get());
  EXPECT_FALSE(second.ok());
  EXPECT_EQ(Fetch(first->port(), "GET", "/metrics").status, 200);
}

TEST(MetricsHttpServerTest, BadAddressesAreRejected) {
  auto registry = CreateRegistry();
  for (const char* address : {"", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", "::1:80"}) {
    auto server = MetricsHttpServer::Start(address, registry.get());
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << address;
  }
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1:0", nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricsHttpServerTest, Ipv6NeedsCivetwebSupport) {
  auto registry = CreateRegistry();
  auto server = MetricsHttpServer::Start("[::1]:0", registry.get());
  if (mg_check_feature(MG_FEATURES_IPV6) == 0) {
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(server.status().message(), HasSubstr("IPv6"));
  } else {
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_THAT((*server)->address(), StartsWith("[::1]:"));
  }
}

TEST(MetricsHttpServerTest, AllInterfaces) {
  auto registry = CreateRegistry();
  registry->AddGauge("g", "G.", {}).WithLabels({}).Set(2);
  for (const std::string address : {"0.0.0.0:0", ":0", "0"}) {
    auto server = MetricsHttpServer::Start(address, registry.get());
    ASSERT_TRUE(server.ok()) << address << ": " << server.status();
    EXPECT_EQ((*server)->address(), "0.0.0.0:" + std::to_string((*server)->port()));
    EXPECT_EQ(Fetch((*server)->port(), "GET", "/metrics").body, registry->Serialize()) << address;
  }
}

TEST(MetricsHttpServerTest, LocalhostMeansIpv4Loopback) {
  auto registry = CreateRegistry();
  auto server = MetricsHttpServer::Start("localhost:0", registry.get());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->address(), StartsWith("127.0.0.1:"));
  EXPECT_EQ(Fetch((*server)->port(), "GET", "/metrics").status, 200);
}

#ifdef DMLSERVE_PROMTOOL
// `promtool check metrics` parses with Prometheus' own parser and lints
// names (units, _total on counters); it prints nothing when all is well.
struct PromtoolResult {
  int exit_code = -1;
  std::string output;
};

PromtoolResult RunPromtool(const std::string& exposition) {
  PromtoolResult result;
  char path[] = "/tmp/promtool_output_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return result;
  close(fd);
  const std::string command = std::string(DMLSERVE_PROMTOOL) + " check metrics > " + path + " 2>&1";
  FILE* pipe = popen(command.c_str(), "w");
  if (pipe == nullptr) return result;
  fwrite(exposition.data(), 1, exposition.size(), pipe);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  result.output = text.str();
  unlink(path);
  return result;
}

TEST(PromtoolTest, AcceptsTheServiceMetricsFromTheEndpoint) {
  auto registry = CreateRegistry();
  FillLikeTheService(*registry);
  auto server = StartOnLoopback(registry.get());
  ASSERT_NE(server, nullptr);
  const HttpResponse response = Fetch(server->port(), "GET", "/metrics");
  ASSERT_EQ(response.status, 200);
  const PromtoolResult result = RunPromtool(response.body);
  EXPECT_EQ(result.exit_code, 0) << result.output << "\n--- input ---\n" << response.body;
  EXPECT_EQ(result.output, "") << "--- input ---\n" << response.body;
}

TEST(PromtoolTest, RejectsWhatPrometheusWouldRefuse) {
  // The check above can fail: promtool does flag broken input and bad names.
  const PromtoolResult malformed = RunPromtool("broken{label=unquoted} 1\n");
  EXPECT_NE(malformed.exit_code, 0) << malformed.output;
  auto registry = CreateRegistry();
  registry->AddCounter("requests", "Counter without the _total suffix.", {}).WithLabels({});
  const PromtoolResult lint = RunPromtool(registry->Serialize());
  EXPECT_NE(lint.exit_code, 0);
  EXPECT_THAT(lint.output, HasSubstr("_total"));
}
#endif  // DMLSERVE_PROMTOOL

}  // namespace
}  // namespace dmlserve::metrics

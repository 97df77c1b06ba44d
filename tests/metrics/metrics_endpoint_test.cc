#include "server/metrics/metrics_endpoint.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/metrics/buckets.h"
#include "server/metrics/scrape_time_gauges.h"

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

// A registry and scrape-time gauges served by one endpoint on loopback.
struct Served {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<ScrapeTimeGauges> gauges = std::make_shared<ScrapeTimeGauges>();
  std::unique_ptr<MetricsEndpoint> endpoint;

  bool Start(const std::string& address = "127.0.0.1:0") {
    auto started = MetricsEndpoint::Start(address, {registry, gauges});
    EXPECT_TRUE(started.ok()) << started.status();
    if (!started.ok()) return false;
    endpoint = *std::move(started);
    return true;
  }
  int port() const { return endpoint->port(); }
};

// The families the service registers (docs/metrics.md), with samples.
void FillLikeTheService(prometheus::Registry& registry, ScrapeTimeGauges& gauges) {
  const std::vector<std::string> operators = {"cumulative_summation", "cumulative_product",
                                              "quantized_linear_matrix_multiply"};
  auto& requests = prometheus::BuildCounter()
                       .Name("dmlserve_requests_total")
                       .Help("Execute requests by operator and gRPC status code.")
                       .Register(registry);
  auto& duration = prometheus::BuildHistogram()
                       .Name("dmlserve_request_duration_seconds")
                       .Help("Time from receiving a request to its response.")
                       .Register(registry);
  auto& queue = prometheus::BuildHistogram()
                    .Name("dmlserve_queue_duration_seconds")
                    .Help("Time from admission until the batch started.")
                    .Register(registry);
  auto& batch = prometheus::BuildHistogram()
                    .Name("dmlserve_batch_size")
                    .Help("Requests per executed batch.")
                    .Register(registry);
  auto& bytes = prometheus::BuildCounter()
                    .Name("dmlserve_request_bytes_total")
                    .Help("Bytes of tensor data received.")
                    .Register(registry);
  for (size_t i = 0; i < operators.size(); ++i) {
    requests.Add({{"operator", operators[i]}, {"code", "OK"}}).Increment(10.0 * (i + 1));
    requests.Add({{"operator", operators[i]}, {"code", "INVALID_ARGUMENT"}}).Increment();
    duration.Add({{"operator", operators[i]}}, LatencyBuckets()).Observe(0.0004 * (i + 1));
    queue.Add({{"operator", operators[i]}}, LatencyBuckets()).Observe(0.0001);
    batch.Add({{"operator", operators[i]}}, PowerOfTwoBuckets(64)).Observe(i + 1.0);
    bytes.Add({{"operator", operators[i]}}).Increment(4096);
  }
  prometheus::BuildHistogram()
      .Name("dmlserve_compute_duration_seconds")
      .Help("Device time per batch.")
      .Register(registry)
      .Add({{"device", "cpu:0"}}, LatencyBuckets())
      .Observe(0.002);
  prometheus::BuildGauge()
      .Name("dmlserve_queue_depth")
      .Help("Jobs waiting for a device.")
      .Register(registry)
      .Add({})
      .Set(3);
  prometheus::BuildGauge()
      .Name("dmlserve_build_info")
      .Help("Build version; always 1.")
      .Register(registry)
      .Add({{"version", "0.1.0"}})
      .Set(1);
  gauges.Add("dmlserve_device_memory_bytes", "Device memory in use.", [] {
    return ScrapeTimeGauges::Samples{{{{"device", "cpu:0"}}, 65536},
                                     {{{"device", "d3d12:0"}}, 1 << 24}};
  });
  gauges.Add("dmlserve_registered_tensor_bytes", "Bytes held by RegisterTensor.", [] {
    return ScrapeTimeGauges::Samples{{{}, 1 << 20}};
  });
  prometheus::BuildCounter()
      .Name("dmlserve_device_removals_total")
      .Help("Devices taken out of rotation.")
      .Register(registry)
      .Add({{"device", "d3d12:0"}});
  // Escaping and special values, through the real parser too. (Label values
  // only: prometheus-cpp 1.0.1 writes HELP text unescaped, so the service's
  // help strings have no backslash or newline.)
  prometheus::BuildGauge()
      .Name("test_escaping")
      .Help("Label values with quotes, backslashes and newlines.")
      .Register(registry)
      .Add({{"value", "quote \" backslash \\ newline \n end"}})
      .Set(std::numeric_limits<double>::quiet_NaN());
}

TEST(MetricsEndpointTest, PicksAFreePortAndServesRegistryAndGauges) {
  Served served;
  prometheus::BuildCounter()
      .Name("served_total")
      .Help("Served.")
      .Register(*served.registry)
      .Add({{"path", "/x"}})
      .Increment(7);
  served.gauges->Add("held_bytes", "Held.", [] {
    return ScrapeTimeGauges::Samples{{{{"device", "cpu:0"}}, 42}};
  });
  ASSERT_TRUE(served.Start());
  EXPECT_GT(served.port(), 0);
  EXPECT_EQ(served.endpoint->address(), "127.0.0.1:" + std::to_string(served.port()));

  const HttpResponse response = Fetch(served.port(), "GET", "/metrics");
  EXPECT_EQ(response.status, 200);
  EXPECT_THAT(response.headers.at("content-type"), StartsWith("text/plain"));
  EXPECT_THAT(response.body, HasSubstr("served_total{path=\"/x\"} 7\n"));
  EXPECT_THAT(response.body, HasSubstr("# TYPE held_bytes gauge\n"));
  EXPECT_THAT(response.body, HasSubstr("held_bytes{device=\"cpu:0\"} 42\n"));
}

TEST(MetricsEndpointTest, EveryScrapeSeesCurrentValues) {
  Served served;
  prometheus::Counter& counter = prometheus::BuildCounter()
                                     .Name("ticks_total")
                                     .Help("Ticks.")
                                     .Register(*served.registry)
                                     .Add({});
  int held = 0;
  served.gauges->Add("held", "Held.", [&held] {
    return ScrapeTimeGauges::Samples{{{}, static_cast<double>(held)}};
  });
  ASSERT_TRUE(served.Start());
  for (int i = 1; i <= 3; ++i) {
    counter.Increment();
    held = 10 * i;
    const std::string body = Fetch(served.port(), "GET", "/metrics").body;
    EXPECT_THAT(body, HasSubstr("\nticks_total " + std::to_string(i) + "\n"));
    EXPECT_THAT(body, HasSubstr("\nheld " + std::to_string(10 * i) + "\n"));
  }
  served.endpoint.reset();  // before `held` goes
}

TEST(MetricsEndpointTest, QueryStringIsIgnored) {
  Served served;
  prometheus::BuildGauge().Name("g").Help("G.").Register(*served.registry).Add({}).Set(2);
  ASSERT_TRUE(served.Start());
  const HttpResponse response = Fetch(served.port(), "GET", "/metrics?name[]=g");
  EXPECT_EQ(response.status, 200);
  EXPECT_THAT(response.body, HasSubstr("\ng 2\n"));
}

TEST(MetricsEndpointTest, OnlyGetOfMetricsServesMetrics) {
  Served served;
  prometheus::BuildGauge().Name("g").Help("G.").Register(*served.registry).Add({}).Set(2);
  ASSERT_TRUE(served.Start());
  // (civetweb matches handler paths by prefix: /metrics/x and /metricsx serve
  // metrics too.)
  for (const char* path : {"/", "/metric", "/index.html", "/..%2f"}) {
    const HttpResponse response = Fetch(served.port(), "GET", path);
    EXPECT_EQ(response.status, 404) << path;
    EXPECT_THAT(response.body, ::testing::Not(HasSubstr("g 2"))) << path;
  }
  // prometheus-cpp's handler answers GET only.
  for (const char* method : {"POST", "DELETE", "PUT"}) {
    const HttpResponse response = Fetch(served.port(), method, "/metrics");
    EXPECT_GE(response.status, 400) << method;
    EXPECT_THAT(response.body, ::testing::Not(HasSubstr("g 2"))) << method;
  }
}

TEST(MetricsEndpointTest, StopClosesThePortPromptly) {
  Served served;
  ASSERT_TRUE(served.Start());
  const int port = served.port();
  EXPECT_EQ(Fetch(port, "GET", "/metrics").status, 200);
  const absl::Time start = absl::Now();
  served.endpoint.reset();
  // civetweb polls for the stop every 2 s when idle; the endpoint wakes it.
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  const int fd = ConnectLoopback(port);
  EXPECT_LT(fd, 0) << "port " << port << " still accepts connections after Stop";
  if (fd >= 0) close(fd);
}

TEST(MetricsEndpointTest, BusyPortIsAnError) {
  Served first;
  ASSERT_TRUE(first.Start());
  Served second;
  auto started = MetricsEndpoint::Start("127.0.0.1:" + std::to_string(first.port()),
                                        {second.registry, second.gauges});
  EXPECT_EQ(started.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(started.status().message(), HasSubstr(std::to_string(first.port())));
  EXPECT_EQ(Fetch(first.port(), "GET", "/metrics").status, 200);
}

TEST(MetricsEndpointTest, BadAddressesAreRejected) {
  Served served;
  for (const char* address : {"", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000", "::1:80"}) {
    auto endpoint = MetricsEndpoint::Start(address, {served.registry, served.gauges});
    EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kInvalidArgument) << address;
  }
}

TEST(MetricsEndpointTest, Ipv6ServesOrSaysWhy) {
  Served served;
  auto endpoint = MetricsEndpoint::Start("[::1]:0", {served.registry, served.gauges});
  if (endpoint.ok()) {
    EXPECT_THAT((*endpoint)->address(), StartsWith("[::1]:"));
  } else {
    // Debian 12's civetweb is built without IPv6.
    EXPECT_EQ(endpoint.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(endpoint.status().message(), HasSubstr("IPv6"));
  }
}

TEST(MetricsEndpointTest, AllInterfaces) {
  for (const std::string address : {"0.0.0.0:0", ":0", "0"}) {
    Served served;
    prometheus::BuildGauge().Name("g").Help("G.").Register(*served.registry).Add({}).Set(2);
    ASSERT_TRUE(served.Start(address)) << address;
    EXPECT_EQ(served.endpoint->address(), "0.0.0.0:" + std::to_string(served.port()));
    EXPECT_THAT(Fetch(served.port(), "GET", "/metrics").body, HasSubstr("\ng 2\n")) << address;
  }
}

TEST(MetricsEndpointTest, LocalhostMeansIpv4Loopback) {
  Served served;
  ASSERT_TRUE(served.Start("localhost:0"));
  EXPECT_THAT(served.endpoint->address(), StartsWith("127.0.0.1:"));
  EXPECT_EQ(Fetch(served.port(), "GET", "/metrics").status, 200);
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
  Served served;
  FillLikeTheService(*served.registry, *served.gauges);
  ASSERT_TRUE(served.Start());
  const HttpResponse response = Fetch(served.port(), "GET", "/metrics");
  ASSERT_EQ(response.status, 200);
  const PromtoolResult result = RunPromtool(response.body);
  EXPECT_EQ(result.exit_code, 0) << result.output << "\n--- input ---\n" << response.body;
}

TEST(PromtoolTest, RejectsWhatPrometheusWouldRefuse) {
  // The check above can fail: promtool does flag broken input and bad names.
  const PromtoolResult malformed = RunPromtool("broken{label=unquoted} 1\n");
  EXPECT_NE(malformed.exit_code, 0) << malformed.output;
  const PromtoolResult lint = RunPromtool(
      "# HELP requests Counter without the _total suffix.\n# TYPE requests counter\n"
      "requests 0\n");
  EXPECT_NE(lint.exit_code, 0);
  EXPECT_THAT(lint.output, HasSubstr("_total"));
}
#endif  // DMLSERVE_PROMTOOL

}  // namespace
}  // namespace dmlserve::metrics

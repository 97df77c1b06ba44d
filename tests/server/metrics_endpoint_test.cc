// The /metrics endpoint against slow clients: connections that trickle their
// request header (or stop sending) must not keep Prometheus from scraping.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/server/metrics_scrape.h"
#include "tests/server/server_fixture.h"

namespace dmlserve::testing {
namespace {

// A TCP connection to HOST:PORT (IPv4), or -1.
int Connect(const std::string& address) {
  std::vector<std::string> parts = absl::StrSplit(address, ':');
  int port = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &port)) return -1;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, parts[0].c_str(), &peer.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

using MetricsEndpointTest = ServerTest;

// Eight clients each send a header byte every 300 ms, never finishing it
// (with two handler threads and a 10 s timeout six such clients blocked every
// scrape); and as each is cut off it comes straight back.
TEST_F(MetricsEndpointTest, ScrapesGoOnWhileClientsTrickleTheirHeaders) {
  constexpr int kSlowClients = 8;
  std::atomic<bool> stop{false};
  std::vector<std::thread> slow;
  for (int i = 0; i < kSlowClients; ++i) {
    slow.emplace_back([&] {
      const std::string header = "GET /metrics HTTP/1.1\r\nHost: slow\r\nX-Slow: ";
      while (!stop.load()) {
        const int fd = Connect(server_->metrics_address());
        if (fd < 0) return;
        for (size_t sent = 0; !stop.load(); ++sent) {
          const char byte = sent < header.size() ? header[sent] : 'x';
          if (send(fd, &byte, 1, MSG_NOSIGNAL) != 1) break;  // cut off: reconnect
          absl::SleepFor(absl::Milliseconds(300));
        }
        close(fd);
      }
    });
  }
  absl::SleepFor(absl::Seconds(1));  // every slow client holds a connection
  int answered = 0;
  for (int i = 0; i < 5; ++i) {
    if (ScrapeSum(server_->metrics_address(), "dmlserve_build_info").has_value()) ++answered;
    absl::SleepFor(absl::Milliseconds(500));
  }
  stop.store(true);
  for (std::thread& thread : slow) thread.join();
  EXPECT_EQ(answered, 5);
}

}  // namespace
}  // namespace dmlserve::testing

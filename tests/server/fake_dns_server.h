#ifndef DMLSERVE_TESTS_SERVER_FAKE_DNS_SERVER_H_
#define DMLSERVE_TESTS_SERVER_FAKE_DNS_SERVER_H_

// A DNS server on loopback UDP that answers every A query, whatever the name,
// with a fixed list of IPv4 addresses (and every other query with no
// records), for client tests of `dns://127.0.0.1:PORT/name:port` targets:
// gRPC's resolver asks the server the target's authority names, so a test
// gets a name with several replicas behind it (127.0.0.1, 127.0.0.2, ...,
// all loopback on Linux) without touching the machine's resolver.

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace dmlserve::testing {

class FakeDnsServer {
 public:
  // Binds 127.0.0.1:0 and starts answering. `addresses` are dotted IPv4.
  static absl::StatusOr<std::unique_ptr<FakeDnsServer>> Start(std::vector<std::string> addresses);
  ~FakeDnsServer();  // stops answering

  FakeDnsServer(const FakeDnsServer&) = delete;
  FakeDnsServer& operator=(const FakeDnsServer&) = delete;

  // "127.0.0.1:PORT", the authority of a dns:// target.
  const std::string& address() const { return address_; }
  // A queries answered so far.
  int a_queries() const { return a_queries_.load(); }

 private:
  FakeDnsServer() = default;
  void Serve();

  int socket_ = -1;
  std::string address_;
  std::vector<uint32_t> addresses_;  // network byte order
  std::atomic<bool> stop_{false};
  std::atomic<int> a_queries_{0};
  std::thread thread_;
};

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SERVER_FAKE_DNS_SERVER_H_

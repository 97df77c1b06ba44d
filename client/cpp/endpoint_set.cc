#include "client/cpp/endpoint_set.h"

#ifdef _WIN32
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <winsock2.h>
#include <ws2tcpip.h>
#else
#include <netdb.h>
#include <sys/socket.h>
#endif

#include <algorithm>
#include <climits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpc/grpc.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace dmlserve::client {
namespace {

std::shared_ptr<const Endpoint> MakeEndpoint(std::string name,
                                             std::shared_ptr<grpc::Channel> channel) {
  auto endpoint = std::make_shared<Endpoint>();
  endpoint->name = std::move(name);
  endpoint->stub = v1::OperatorService::NewStub(channel);
  endpoint->channel = std::move(channel);
  return endpoint;
}

// "name:port", "[v6]:port" or "name" -> host and port ("443", gRPC's default).
absl::Status SplitHostPort(absl::string_view host_port, std::string& host, std::string& port) {
  if (absl::ConsumePrefix(&host_port, "[")) {
    const size_t close = host_port.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("no closing ']'");
    host = std::string(host_port.substr(0, close));
    absl::string_view rest = host_port.substr(close + 1);
    port = absl::ConsumePrefix(&rest, ":") ? std::string(rest) : "443";
  } else if (const size_t colon = host_port.rfind(':'); colon != absl::string_view::npos) {
    host = std::string(host_port.substr(0, colon));
    port = std::string(host_port.substr(colon + 1));
  } else {
    host = std::string(host_port);
    port = "443";
  }
  if (host.empty()) return absl::InvalidArgumentError("no host name");
  if (port.empty()) return absl::InvalidArgumentError("no port after ':'");
  return absl::OkStatus();
}

// The name part of a dns: target: "dns:///n:p", "dns://authority/n:p" or "dns:n:p".
absl::string_view DnsName(absl::string_view target) {
  absl::ConsumePrefix(&target, "dns:");
  if (absl::ConsumePrefix(&target, "//")) {
    const size_t slash = target.find('/');
    target = slash == absl::string_view::npos ? absl::string_view() : target.substr(slash + 1);
  }
  return target;
}

// The addresses `host` resolves to, as gRPC targets ("ipv4:a.b.c.d:port",
// "ipv6:[...]:port"), in the resolver's order, without repeats.
absl::StatusOr<std::vector<std::string>> Resolve(const std::string& host, const std::string& port) {
#ifdef _WIN32
  // Winsock answers nothing before WSAStartup, which gRPC may not have run yet
  // (no channel exists). Its calls are counted, so one more is harmless.
  static const bool winsock_started = [] {
    WSADATA data;
    return WSAStartup(MAKEWORD(2, 2), &data) == 0;
  }();
  if (!winsock_started) return absl::UnavailableError("WSAStartup failed: no network stack");
#endif
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (error != 0) {
    return absl::UnavailableError(
        absl::StrCat("could not resolve \"", host, "\": ", gai_strerror(error)));
  }
  std::vector<std::string> targets;
  for (addrinfo* info = found; info != nullptr; info = info->ai_next) {
    char address[NI_MAXHOST];
    if (getnameinfo(info->ai_addr, info->ai_addrlen, address, sizeof(address), nullptr, 0,
                    NI_NUMERICHOST) != 0) {
      continue;
    }
    std::string target = info->ai_family == AF_INET6 ? absl::StrCat("ipv6:[", address, "]:", port)
                                                     : absl::StrCat("ipv4:", address, ":", port);
    if (std::find(targets.begin(), targets.end(), target) == targets.end()) {
      targets.push_back(std::move(target));
    }
  }
  freeaddrinfo(found);
  if (targets.empty()) {
    return absl::UnavailableError(absl::StrCat("\"", host, "\" resolved to no address"));
  }
  return targets;
}

// The balanced channel of a dns: target stands for every replica behind the
// name, so a unary call one of them refuses before computing it
// (UNAVAILABLE: it is draining, or its connection failed; CANCELLED: its
// connection closed under the call) is made again, and round_robin picks
// another replica for the new attempt: what Client::OnReplicas does over a
// list. The Python client (dmlserve_client/client.py,
// _BALANCED_SERVICE_CONFIG) uses the same. gRPC allows at most 5 attempts.
//
// ExecuteStream is left out: gRPC 1.51 replaying a stream's messages on a
// new attempt while the application still writes lost a message now and then
// (the next replica answered items 0, 1 and 3 and ended the stream OK) or
// stalled the stream until its deadline, when a replica stopped under a load
// of streams (ReplicaTest.ADnsTargetLosesNoRequestWhenOneReplicaStops, about
// 1 run in 15 on a busy 2-core machine). ExecuteMany sends what a stream left
// unanswered on a new stream itself (kBalancedStreamTries).
constexpr char kBalancedServiceConfig[] = R"({
  "methodConfig": [{
    "name": [{"service": "dmlserve.v1.OperatorService", "method": "Execute"},
             {"service": "dmlserve.v1.OperatorService", "method": "RegisterTensor"},
             {"service": "dmlserve.v1.OperatorService", "method": "ReleaseTensor"},
             {"service": "dmlserve.v1.OperatorService", "method": "GetServerInfo"}],
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.01s",
      "maxBackoff": "0.2s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"]
    }
  }]
})";

}  // namespace

absl::StatusOr<std::unique_ptr<EndpointSet>> EndpointSet::Create(const std::string& target,
                                                                 const ClientOptions& options) {
  if (target.empty()) return absl::InvalidArgumentError("empty server address");
  std::unique_ptr<EndpointSet> set(new EndpointSet());
  set->options_ = options;
  if (absl::StartsWith(target, "dns:")) {
    const absl::string_view name = DnsName(target);
    if (name.empty() || absl::StrContains(name, ',')) {
      return absl::InvalidArgumentError(absl::StrCat(
          "server address \"", target, "\": a dns: target names one host (dns:///name:port)"));
    }
    absl::Status split = SplitHostPort(name, set->dns_host_, set->dns_port_);
    if (!split.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("server address \"", target, "\": ", split.message()));
    }
    set->endpoints_.push_back(
        MakeEndpoint(target, set->MakeChannel(target, /*authority=*/"", /*round_robin=*/true)));
    return set;
  }
  for (absl::string_view part : absl::StrSplit(target, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("server address \"", target, "\": an empty entry in the list"));
    }
    if (absl::StartsWith(part, "dns:")) {
      return absl::InvalidArgumentError(
          absl::StrCat("server address \"", target,
                       "\": a list takes host:port entries; give a dns: name on its own"));
    }
    std::string name(part);
    set->endpoints_.push_back(
        MakeEndpoint(name, set->MakeChannel(name, /*authority=*/"", /*round_robin=*/false)));
  }
  return set;
}

std::unique_ptr<EndpointSet> EndpointSet::ForChannel(std::shared_ptr<grpc::Channel> channel) {
  std::unique_ptr<EndpointSet> set(new EndpointSet());
  set->endpoints_.push_back(MakeEndpoint("", std::move(channel)));
  return set;
}

std::shared_ptr<grpc::Channel> EndpointSet::MakeChannel(const std::string& target,
                                                        const std::string& authority,
                                                        bool round_robin) const {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(options_.max_receive_message_bytes);
  arguments.SetMaxSendMessageSize(options_.max_send_message_bytes);
  if (round_robin) {
    arguments.SetLoadBalancingPolicyName("round_robin");
    arguments.SetServiceConfigJSON(kBalancedServiceConfig);
    // A call is retried only while its request is still buffered; keep a
    // whole message (the default keeps 256 KiB, less than one inline B).
    arguments.SetInt(GRPC_ARG_PER_RPC_RETRY_BUFFER_SIZE, options_.max_send_message_bytes < 0
                                                             ? INT_MAX
                                                             : options_.max_send_message_bytes);
  }
  if (!authority.empty()) arguments.SetString(GRPC_ARG_DEFAULT_AUTHORITY, authority);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(target, credentials, arguments);
}

std::shared_ptr<const Endpoint> EndpointSet::Next(size_t* turn) {
  const size_t count = endpoints_.size();
  const size_t start = next_.fetch_add(1, std::memory_order_relaxed) % count;
  size_t chosen = start;
  // Round robin, passing over replicas that failed to connect while another
  // may serve: a stopped replica costs no call its failure.
  for (size_t i = 0; count > 1 && i < count; ++i) {
    const size_t at = (start + i) % count;
    if (endpoints_[at]->channel->GetState(/*try_to_connect=*/false) !=
        GRPC_CHANNEL_TRANSIENT_FAILURE) {
      chosen = at;
      break;
    }
  }
  if (turn != nullptr) *turn = chosen;
  return endpoints_[chosen];
}

absl::StatusOr<std::vector<std::shared_ptr<const Endpoint>>> EndpointSet::Replicas() {
  if (dns_host_.empty()) return endpoints_;
  absl::StatusOr<std::vector<std::string>> addresses = Resolve(dns_host_, dns_port_);
  if (!addresses.ok()) return addresses.status();
  const std::string authority = absl::StrCat(
      absl::StrContains(dns_host_, ':') ? absl::StrCat("[", dns_host_, "]") : dns_host_, ":",
      dns_port_);
  std::vector<std::shared_ptr<const Endpoint>> replicas;
  absl::MutexLock lock(&resolved_mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<const Endpoint>> current;
  for (const std::string& address : *addresses) {
    auto it = resolved_.find(address);
    std::shared_ptr<const Endpoint> endpoint =
        it != resolved_.end()
            ? it->second
            : MakeEndpoint(address.substr(address.find(':') + 1),
                           MakeChannel(address, authority, /*round_robin=*/false));
    replicas.push_back(endpoint);
    current.emplace(address, std::move(endpoint));
  }
  // Addresses the name no longer has (pods gone) drop their channels.
  resolved_ = std::move(current);
  return replicas;
}

}  // namespace dmlserve::client

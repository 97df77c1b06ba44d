#ifndef DMLSERVE_CLIENT_CPP_ENDPOINT_SET_H_
#define DMLSERVE_CLIENT_CPP_ENDPOINT_SET_H_

// The servers one Client talks to, and which of them takes the next call.
//
// A target is one of:
//  - "host:port" (or any gRPC target without the dns: scheme): one endpoint,
//    one channel, as before client-side load balancing existed;
//  - "host1:port,host2:port,...": a list of replicas, each its own endpoint
//    and channel. Calls go round-robin over the list, skipping endpoints whose
//    channel is in TRANSIENT_FAILURE while another is not;
//  - "dns:///name:port" (also "dns://authority/name:port"): a name that
//    resolves to many addresses (a Kubernetes headless Service). Calls go
//    over one channel with gRPC's round_robin policy, which re-resolves the
//    name as pods come and go. For calls that must reach every replica
//    (Replicas()), the name is resolved at that moment and each address gets
//    its own channel, with the name kept as the authority (TLS checks the
//    certificate against the name, not the address).
//
// Thread-safe.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/cpp/client_options.h"
#include "dmlserve/v1/dmlserve.grpc.pb.h"
#include "grpcpp/channel.h"

namespace dmlserve::client {

// One server (or, for a dns: target, the balanced channel to all of them).
struct Endpoint {
  std::string name;  // what errors call it: "host:port", or the address a name resolved to
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::OperatorService::Stub> stub;  // on `channel`
};

class EndpointSet {
 public:
  // Parses `target` (see above) and makes the channels; they connect lazily.
  // INVALID_ARGUMENT names the part of the target that is wrong.
  static absl::StatusOr<std::unique_ptr<EndpointSet>> Create(const std::string& target,
                                                             const ClientOptions& options);
  // One endpoint over an existing channel (Client::FromChannel).
  static std::unique_ptr<EndpointSet> ForChannel(std::shared_ptr<grpc::Channel> channel);

  EndpointSet(const EndpointSet&) = delete;
  EndpointSet& operator=(const EndpointSet&) = delete;

  // The endpoint for a call's first try: round-robin over a list. `turn`, if
  // given, receives its position, for Retry.
  std::shared_ptr<const Endpoint> Next(size_t* turn = nullptr);
  // The endpoint for try `attempt` (1, 2, ...) of the call whose first try was
  // at `turn`: the replicas after it in order, so that, whatever other calls
  // do meanwhile, no retry lands on a replica this call already tried.
  std::shared_ptr<const Endpoint> Retry(size_t turn, size_t attempt) const {
    return endpoints_[(turn + attempt) % endpoints_.size()];
  }

  // How many endpoints Next() rotates over (1 for a single or dns: target):
  // how often a call refused UNAVAILABLE may be tried again elsewhere.
  size_t rotation_size() const { return endpoints_.size(); }
  // Whether the one endpoint is a dns: target's balanced channel, behind
  // which each new call may reach another replica.
  bool balanced() const { return !dns_host_.empty(); }

  // Every replica, for calls that must reach them all (RegisterTensor,
  // ReleaseTensor): the list, or a dns: name's addresses resolved now.
  // UNAVAILABLE when a dns: name does not resolve.
  absl::StatusOr<std::vector<std::shared_ptr<const Endpoint>>> Replicas();

  // The first endpoint's channel (Client::channel()).
  const std::shared_ptr<grpc::Channel>& first_channel() const { return endpoints_[0]->channel; }

 private:
  EndpointSet() = default;
  std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                             const std::string& authority, bool round_robin) const;

  ClientOptions options_;
  // Set for a dns: target: the host and port its addresses are resolved from.
  std::string dns_host_;
  std::string dns_port_;
  std::vector<std::shared_ptr<const Endpoint>> endpoints_;
  std::atomic<size_t> next_{0};

  // A dns: target's per-address endpoints, kept while the name resolves to
  // them so that fanning out does not reconnect every time.
  absl::Mutex resolved_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Endpoint>> resolved_
      ABSL_GUARDED_BY(resolved_mu_);
};

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_ENDPOINT_SET_H_

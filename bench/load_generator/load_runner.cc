#include "bench/load_generator/load_runner.h"

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "dmlserve/v1/dmlserve.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace dmlserve::load {
namespace {

const std::string& ExecuteMethod() {
  static const std::string* const kMethod =
      new std::string(absl::StrCat("/", v1::OperatorService::service_full_name(), "/Execute"));
  return *kMethod;
}

grpc::ByteBuffer Serialize(const v1::ExecuteRequest& request) {
  const std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

// One call in flight: a closed-loop slot reuses it for each of its calls, an
// open-loop send gets a fresh one.
struct Call {
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
  const PooledRequest* pooled = nullptr;
  absl::Time send_time;
  bool measured = false;
};

// Stats written from gRPC's callback threads: one shard per closed-loop slot
// (never contended), open-loop calls spread over them.
struct StatsShard {
  absl::Mutex mutex;
  LoadStats stats ABSL_GUARDED_BY(mutex);
};

class Runner {
 public:
  Runner(const std::vector<std::shared_ptr<grpc::Channel>>& channels, const Workload& workload,
         const RunOptions& options)
      : workload_(workload), options_(options) {
    for (int c = 0; c < options.channels; ++c) {
      stubs_.push_back(std::make_unique<grpc::GenericStub>(channels[c]));
    }
    // The pool, serialized once (see the header).
    for (const PooledRequest* pooled : workload.All())
      serialized_[pooled] = Serialize(pooled->request);
    start_ = absl::Now();
    measure_start_ = start_ + options.warmup;
    deadline_ = options.duration > absl::ZeroDuration() ? measure_start_ + options.duration
                                                        : absl::InfiniteFuture();
    const int shards = std::max(1, options.channels * options.calls_per_channel);
    shards_ = std::vector<StatsShard>(options.target_rate > 0 ? 64 : shards);
  }

  RunResult Run() {
    if (options_.target_rate > 0) {
      RunOpenLoop();
    } else {
      RunClosedLoop();
    }
    // Every call answered: includes those in flight at the deadline, which
    // were counted. Meanwhile, sends deferred by Continue go out from here.
    while (true) {
      Deferred next;
      {
        absl::MutexLock lock(&mutex_);
        mutex_.Await(absl::Condition(this, &Runner::DoneOrDeferred));
        if (deferred_.empty()) break;
        next = std::move(deferred_.back());
        deferred_.pop_back();
      }
      SendClosedLoop(next.slot, std::move(next.rng));
    }
    // A completion runs before gRPC lets go of its call: wait until every
    // Call (and its ClientContext) is gone, so that nothing of a call
    // outlives the run on gRPC's threads while the caller tears down.
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](int* live) { return *live == 0; }, &live_calls_));
    }
    RunResult result;
    result.elapsed = absl::Now() - measure_start_;
    for (StatsShard& shard : shards_) {
      absl::MutexLock lock(&shard.mutex);
      result.stats.Merge(shard.stats);
    }
    return result;
  }

 private:
  // Whether a call may be sent at `send_time`; claims a measured request.
  bool MaySend(absl::Time send_time) {
    if (send_time >= deadline_) return false;
    if (send_time >= measure_start_ && options_.max_requests > 0 &&
        claimed_.fetch_add(1) >= options_.max_requests) {
      return false;
    }
    return true;
  }

  void RunClosedLoop() {
    const int slots = options_.channels * options_.calls_per_channel;
    {
      absl::MutexLock lock(&mutex_);
      outstanding_ = slots;
    }
    for (int s = 0; s < slots; ++s) {
      SendClosedLoop(s, std::make_shared<std::mt19937_64>(options_.seed * 7919 + s));
    }
  }

  // Sends slot `slot`'s next call, or retires the slot when the run is over.
  void SendClosedLoop(int slot, std::shared_ptr<std::mt19937_64> rng) {
    const absl::Time now = absl::Now();
    if (!MaySend(now)) {
      absl::MutexLock lock(&mutex_);
      --outstanding_;
      return;
    }
    std::shared_ptr<Call> call = NewCall();  // a ClientContext serves one call only
    Start(*call, slot % options_.channels, workload_.Pick(*rng), now,
          [this, slot, call, rng](const grpc::Status& status) {
            Record(shards_[slot], *call, status);
            Continue(slot, rng);
          });
  }

  // gRPC may run a completion inline, inside UnaryCall, when a call fails at
  // once (a server that went away): sending the next call from there would
  // recurse once per failure, so a nested send is left to the main thread.
  void Continue(int slot, std::shared_ptr<std::mt19937_64> rng) {
    static thread_local int depth = 0;
    if (depth > 0) {
      absl::MutexLock lock(&mutex_);
      deferred_.push_back({slot, std::move(rng)});
      return;
    }
    ++depth;
    SendClosedLoop(slot, std::move(rng));
    --depth;
  }

  // A Call that counts itself in live_calls_ until gRPC drops the last
  // reference (its completion's closure holds one).
  std::shared_ptr<Call> NewCall() {
    {
      absl::MutexLock lock(&mutex_);
      ++live_calls_;
    }
    return std::shared_ptr<Call>(new Call, [this](Call* call) {
      delete call;
      absl::MutexLock lock(&mutex_);
      --live_calls_;
    });
  }

  bool DoneOrDeferred() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return outstanding_ == 0 || !deferred_.empty();
  }

  void RunOpenLoop() {
    std::mt19937_64 rng(options_.seed * 7919);
    const absl::Duration interval = absl::Seconds(1 / options_.target_rate);
    absl::Time next_send = start_;
    for (uint64_t sequence = 0;; ++sequence) {
      const absl::Time now = absl::Now();
      if (next_send > now) absl::SleepFor(next_send - now);
      const absl::Time send_time = next_send;
      next_send += interval;
      if (!MaySend(send_time)) break;
      StatsShard& shard = shards_[sequence % shards_.size()];
      if (send_time >= measure_start_ && absl::Now() - send_time > absl::Milliseconds(1)) {
        absl::MutexLock lock(&shard.mutex);
        ++shard.stats.late_sends;
      }
      {
        absl::MutexLock lock(&mutex_);
        ++outstanding_;
      }
      std::shared_ptr<Call> call = NewCall();
      Start(*call, sequence % options_.channels, workload_.Pick(rng), send_time,
            [this, call, &shard](const grpc::Status& status) {
              Record(shard, *call, status);
              absl::MutexLock lock(&mutex_);
              --outstanding_;
            });
    }
  }

  void Start(Call& call, int channel, const PooledRequest& pooled, absl::Time send_time,
             std::function<void(const grpc::Status&)> done) {
    call.pooled = &pooled;
    call.send_time = send_time;
    call.measured = send_time >= measure_start_;
    call.request = serialized_.at(&pooled);
    call.context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
    stubs_[channel]->UnaryCall(&call.context, ExecuteMethod(), grpc::StubOptions(), &call.request,
                               &call.response, std::move(done));
  }

  void Record(StatsShard& shard, Call& call, const grpc::Status& grpc_status) {
    const absl::Time done = absl::Now();
    if (!call.measured) return;
    const PooledRequest& pooled = *call.pooled;
    absl::MutexLock lock(&shard.mutex);
    LoadStats& stats = shard.stats;
    ++stats.requests;
    ++stats.by_operator[OperatorChoiceName(pooled.op)];
    stats.request_bytes += call.request.Length();
    if (!grpc_status.ok()) {
      stats.RecordError(ToAbsl(grpc_status));
      return;
    }
    const size_t response_bytes = call.response.Length();
    // Reused by this thread: a cleared message keeps its strings' capacity,
    // so parsing allocates nothing (the client shares the server's cores).
    thread_local v1::ExecuteResponse response;
    response.Clear();
    grpc::ProtoBufferReader reader(&call.response);
    if (!response.ParseFromZeroCopyStream(&reader)) {
      stats.RecordError(absl::DataLossError("the response does not parse"));
      return;
    }
    ++stats.successes;
    stats.latencies.push_back(absl::ToDoubleSeconds(done - call.send_time));
    stats.response_bytes += response_bytes;
    ++stats.batch_sizes[response.info().batch_size()];
    ++stats.devices[response.info().device()];
    stats.queue_seconds += response.info().queue_seconds();
    stats.compute_seconds += response.info().compute_seconds();
    const uint64_t sequence = answered_.fetch_add(1);
    if (options_.verify_every > 0 && sequence % options_.verify_every == 0 &&
        !pooled.expected.empty()) {
      ++stats.checked;
      const absl::Status check = Workload::Check(pooled, response.output());
      if (!check.ok()) {
        stats.RecordWrong(absl::StrCat(OperatorChoiceName(pooled.op), " on ",
                                       response.info().device(), " (batch of ",
                                       response.info().batch_size(), "): ", check.message()));
      }
    }
  }

  const Workload& workload_;
  const RunOptions options_;
  std::vector<std::unique_ptr<grpc::GenericStub>> stubs_;
  absl::flat_hash_map<const PooledRequest*, grpc::ByteBuffer> serialized_;
  absl::Time start_;
  absl::Time measure_start_;
  absl::Time deadline_;
  std::vector<StatsShard> shards_;
  std::atomic<uint64_t> claimed_{0};   // measured requests handed out
  std::atomic<uint64_t> answered_{0};  // measured answers, for verification sampling
  absl::Mutex mutex_;
  int outstanding_ ABSL_GUARDED_BY(mutex_) = 0;  // slots or calls not yet done
  int live_calls_ ABSL_GUARDED_BY(mutex_) = 0;   // Call objects not yet destroyed
  struct Deferred {
    int slot = 0;
    std::shared_ptr<std::mt19937_64> rng;
  };
  std::vector<Deferred> deferred_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace

absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> OpenChannels(
    const std::string& address, int count, absl::Duration connect_timeout) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < count; ++c) {
    grpc::ChannelArguments arguments;
    arguments.SetMaxReceiveMessageSize(-1);
    arguments.SetMaxSendMessageSize(-1);
    // Channels with equal arguments share one connection; a private subchannel
    // pool gives each its own, as separate client processes would have.
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    std::shared_ptr<grpc::Channel> channel =
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments);
    if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + connect_timeout))) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", address));
    }
    channels.push_back(std::move(channel));
  }
  return channels;
}

RunResult RunLoad(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                  const Workload& workload, const RunOptions& options) {
  return Runner(channels, workload, options).Run();
}

}  // namespace dmlserve::load

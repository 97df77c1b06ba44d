// libFuzzer target: the ExecuteStream reactor's message handling, driven
// through a real gRPC server in the fuzzer's process (CPU backend, a small
// backlog so flow control engages), over loopback TCP, by a client that
// sends whatever bytes the input says, valid ExecuteRequests or not, and may
// cancel the call part way. (Not gRPC's in-process transport: in gRPC 1.51
// it grows by ~30 KB for every call the server ends while the client still
// writes, which the same calls over TCP do not.)
//
// Input: records, each one byte of action then its operands:
//   action % 4 == 0  send: u16 little-endian length, then that many bytes
//                    (one stream message, sent as-is)
//   action % 4 == 1  send the previous message 8 more times (piles up items)
//   action % 4 == 2  cancel the call (no further record is read)
//   action % 4 == 3  half-close now (no further record is read)
// The input ending also half-closes.
//
// Checked on every input, besides ASan/UBSan/leaks: the call ends (a hang is
// a crash); it ends OK when every message was an ExecuteRequest, with one
// response per message; it ends INVALID_ARGUMENT "stream item N: ..." when
// message N (counting from 0) was not, after answering exactly the N items
// before it; it ends CANCELLED when the client cancelled; every response is
// a valid ExecuteResponse.
//
//   scripts/fuzz.sh SECONDS    (builds and runs every fuzz target)

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "kernels/cpu/cpu_device.h"
#include "prometheus/registry.h"
#include "scheduler/scheduler.h"
#include "server/drain_gate.h"
#include "server/memory_budget.h"
#include "server/metrics/scrape_time_gauges.h"
#include "server/operator_service.h"
#include "server/service_metrics.h"
#include "server/tensor_registry.h"

namespace {

constexpr char kMethod[] = "/dmlserve.v1.OperatorService/ExecuteStream";
// Much longer than any input takes (inputs are small, the CPU answers in
// milliseconds): a wait this long is a hang.
constexpr auto kHang = std::chrono::seconds(20);

// The server, on a loopback port, started once and kept for the process's life.
struct InProcessServer {
  InProcessServer() {
    dmlserve::SchedulerOptions options;
    options.max_queue = 4;  // the stream's backlog: reading pauses at 4 unanswered items
    options.batch.max_batch_size = 4;
    options.batch.max_queue_delay = absl::ZeroDuration();  // inputs run one after another
    scheduler =
        std::make_unique<dmlserve::Scheduler>(options, dmlserve::CreateCpuDevices(1), &metrics);
    dmlserve::OperatorServiceOptions service_options;
    service_options.version = "fuzz";
    service_options.max_request_bytes = 64 << 10;
    service = std::make_unique<dmlserve::OperatorService>(scheduler.get(), &tensors, &metrics,
                                                          &gate, &budget, service_options);
    grpc::ServerBuilder builder;
    builder.RegisterService(service.get());
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    server = builder.BuildAndStart();
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                  grpc::InsecureChannelCredentials());
    stub = std::make_unique<grpc::GenericStub>(channel);
  }

  prometheus::Registry registry;
  dmlserve::metrics::ScrapeTimeGauges gauges;
  dmlserve::ServiceMetrics metrics{&registry, &gauges, "fuzz", 4};
  dmlserve::TensorRegistry tensors{1 << 20, nullptr};
  dmlserve::DrainGate gate;
  dmlserve::MemoryBudget budget{1 << 20};  // small: some items are refused for memory
  std::unique_ptr<dmlserve::Scheduler> scheduler;
  std::unique_ptr<dmlserve::OperatorService> service;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
};

InProcessServer& Server() {
  static InProcessServer* server = new InProcessServer();
  return *server;
}

void Check(bool condition) {
  if (!condition) __builtin_trap();
}

// One stream call on a completion queue. At most one read and one other
// operation are in flight; responses are read (and checked) as they come
// while the client waits for its own operations.
class StreamCall {
 public:
  StreamCall() {
    context_.set_deadline(std::chrono::system_clock::now() + 2 * kHang);
    call_ = Server().stub->PrepareCall(&context_, kMethod, &queue_);
    call_->StartCall(Tag(kStart));
    Check(Await(kStart));
    call_->Read(&read_buffer_, Tag(kRead));
    read_in_flight_ = true;
  }

  ~StreamCall() {
    queue_.Shutdown();
    void* tag;
    bool ok;
    while (queue_.Next(&tag, &ok)) {
    }
  }

  // False once the call can take no more messages (the server finished it).
  bool Write(const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer buffer(&slice, 1);
    call_->Write(buffer, Tag(kWrite));
    return Await(kWrite);
  }

  void Cancel() { context_.TryCancel(); }

  // Half-closes (unless cancelled), reads every response, and returns the
  // call's status.
  grpc::Status Finish(bool cancelled) {
    if (!cancelled) {
      call_->WritesDone(Tag(kWritesDone));
      Await(kWritesDone);
    }
    while (read_in_flight_) Await(kRead);
    grpc::Status status;
    call_->Finish(&status, Tag(kFinish));
    Check(Await(kFinish));
    return status;
  }

  int responses() const { return responses_; }

 private:
  enum Op : intptr_t { kStart = 1, kRead, kWrite, kWritesDone, kFinish };
  static void* Tag(Op op) { return reinterpret_cast<void*>(op); }

  // Waits for `op` to complete, handling read completions meanwhile.
  bool Await(Op op) {
    for (;;) {
      void* tag = nullptr;
      bool ok = false;
      const auto status = queue_.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + kHang);
      Check(status == grpc::CompletionQueue::GOT_EVENT);  // a hang otherwise
      if (tag == Tag(kRead)) {
        if (ok) {
          dmlserve::v1::ExecuteResponse response;
          std::vector<grpc::Slice> slices;
          Check(read_buffer_.Dump(&slices).ok());
          std::string bytes;
          for (const grpc::Slice& slice : slices) {
            bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
          }
          Check(response.ParseFromString(bytes));
          ++responses_;
          call_->Read(&read_buffer_, Tag(kRead));
        } else {
          read_in_flight_ = false;
        }
        if (op == kRead) return ok;
        continue;
      }
      Check(tag == Tag(op));
      return ok;
    }
  }

  grpc::ClientContext context_;
  grpc::CompletionQueue queue_;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call_;
  grpc::ByteBuffer read_buffer_;
  bool read_in_flight_ = false;
  int responses_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t at = 0;
  StreamCall call;
  int sent = 0;
  std::optional<int> first_unparsable;  // the index of the first non-ExecuteRequest
  bool cancelled = false;
  bool closed_by_server = false;
  std::string last;
  auto send = [&](const std::string& bytes) {
    if (closed_by_server) return;
    if (!first_unparsable.has_value()) {
      dmlserve::v1::ExecuteRequest request;
      if (!request.ParseFromString(bytes)) first_unparsable = sent;
    }
    ++sent;
    closed_by_server = !call.Write(bytes);
  };
  while (at < size && !cancelled) {
    const uint8_t action = data[at++] % 4;
    if (action == 0) {
      if (size - at < 2) break;
      const size_t length = std::min<size_t>(data[at] | (data[at + 1] << 8), size - at - 2);
      last.assign(reinterpret_cast<const char*>(data + at + 2), length);
      at += 2 + length;
      send(last);
    } else if (action == 1) {
      for (int i = 0; i < 8; ++i) send(last);
    } else if (action == 2) {
      call.Cancel();
      cancelled = true;
    } else {
      break;
    }
  }
  const grpc::Status status = call.Finish(cancelled);
  Check(call.responses() <= sent);
  if (cancelled) {
    // The cancellation may arrive after the server finished the call.
    Check(status.error_code() == grpc::StatusCode::CANCELLED || status.ok() ||
          status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    return 0;
  }
  if (first_unparsable.has_value()) {
    Check(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    Check(absl::StartsWith(status.error_message(),
                           "stream item " + std::to_string(*first_unparsable) + ": "));
    Check(call.responses() == *first_unparsable);
  } else {
    Check(status.ok());
    Check(call.responses() == sent);
  }
  return 0;
}

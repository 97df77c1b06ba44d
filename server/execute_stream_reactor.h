#ifndef DMLSERVE_SERVER_EXECUTE_STREAM_REACTOR_H_
#define DMLSERVE_SERVER_EXECUTE_STREAM_REACTOR_H_

// ExecuteStream: many requests on one bidirectional stream.
//
// Each request read becomes a job as soon as it arrives; responses are written
// in completion order (clients match them by request_id), one write in flight
// at a time with the rest queued. A bad item gets its error in the response's
// `status` and the stream goes on. Reading pauses while `max_backlog` items
// are unanswered, or while the outputs of unanswered items add up to
// `max_backlog_bytes` (a tiny matmul request can ask for a huge output), so a
// client that sends faster than the server computes (or stops reading
// responses) is held back by flow control instead of growing the server's
// memory. After the client half-closes, the stream finishes once
// every response is written. Cancellation cancels the unfinished jobs; the
// reactor lives until each of them has called back. A message that is not a
// valid ExecuteRequest ends the stream: nothing more is read, the items read
// before it are answered, then the stream finishes INVALID_ARGUMENT saying
// which item (counting from 0) could not be parsed.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "scheduler/job.h"
#include "server/drain_gate.h"
#include "server/memory_budget.h"
#include "server/request_executor.h"

namespace dmlserve {

class ExecuteStreamReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Finishes at once with UNAVAILABLE when `gate` does not admit the call.
  ExecuteStreamReactor(grpc::CallbackServerContext* context, RequestExecutor* executor,
                       DrainGate* gate, int max_backlog, uint64_t max_backlog_bytes);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  void OnItemDone(uint64_t sequence, absl::Status status, v1::ExecuteResponse response,
                  MemoryBudget::Reservation held);
  // Drops the queued responses (the call is broken), releasing their bytes.
  void DropPendingWritesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Starts whatever the state allows: the next write, the next read, or
  // Finish. gRPC calls are made outside the lock.
  void Advance();

  grpc::CallbackServerContext* context_;
  RequestExecutor* executor_;
  DrainGate* gate_;  // null when the call was not admitted
  const int max_backlog_;
  const uint64_t max_backlog_bytes_;

  // Owned by the read in flight (only one at a time), then parsed.
  grpc::ByteBuffer read_bytes_;
  v1::ExecuteRequest request_;

  absl::Mutex mutex_;
  // Unanswered items' jobs, cancelled if the RPC is.
  absl::flat_hash_map<uint64_t, std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mutex_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mutex_) = 0;
  int unanswered_ ABSL_GUARDED_BY(mutex_) = 0;  // items read, response not yet written
  // Output bytes of unanswered items: reserved when an item's job is
  // admitted, released once its response is written or dropped.
  uint64_t backlog_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::flat_hash_map<uint64_t, uint64_t> reserved_bytes_ ABSL_GUARDED_BY(mutex_);  // by sequence
  struct PendingWrite {
    v1::ExecuteResponse response;
    uint64_t reserved_bytes;
    MemoryBudget::Reservation held;  // the server-wide budget's share
  };
  std::deque<PendingWrite> pending_writes_ ABSL_GUARDED_BY(mutex_);
  v1::ExecuteResponse writing_message_;  // owned by the write in flight
  grpc::ByteBuffer writing_bytes_;       // it, serialized
  uint64_t writing_reserved_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  MemoryBudget::Reservation writing_held_ ABSL_GUARDED_BY(mutex_);
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool reading_ ABSL_GUARDED_BY(mutex_) = false;  // a read in flight, or its item in decoding
  bool reads_done_ ABSL_GUARDED_BY(mutex_) = false;
  bool broken_ ABSL_GUARDED_BY(mutex_) = false;  // cancelled or a write failed
  // Why reading stopped early (an item that did not parse); OK otherwise.
  absl::Status read_failure_ ABSL_GUARDED_BY(mutex_);
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_EXECUTE_STREAM_REACTOR_H_

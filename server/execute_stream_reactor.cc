#include "server/execute_stream_reactor.h"

#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/core/operation.h"
#include "server/client_deadline.h"
#include "server/status_conversion.h"
#include "server/wire_messages.h"

namespace dmlserve {

ExecuteStreamReactor::ExecuteStreamReactor(grpc::CallbackServerContext* context,
                                           RequestExecutor* executor, DrainGate* gate,
                                           int max_backlog, uint64_t max_backlog_bytes)
    : context_(context),
      executor_(executor),
      gate_(gate),
      max_backlog_(max_backlog > 0 ? max_backlog : 1),
      max_backlog_bytes_(max_backlog_bytes) {
  if (!gate_->TryEnter()) {
    gate_ = nullptr;
    {
      absl::MutexLock lock(&mutex_);
      finished_ = true;
    }
    Finish(ToGrpcStatus(DrainGate::Refusal()));
    return;
  }
  {
    absl::MutexLock lock(&mutex_);
    reading_ = true;
  }
  StartRead(&read_bytes_);
}

void ExecuteStreamReactor::OnReadDone(bool ok) {
  if (!ok) {
    // Half-close by the client (or the call broke): answer what was read.
    {
      absl::MutexLock lock(&mutex_);
      reading_ = false;
      reads_done_ = true;
    }
    Advance();
    return;
  }
  // `reading_` stays set while the item is decoded: `request_` must not be
  // handed to the next read before Execute() has taken what it needs.
  if (absl::Status parsed = ParseMessage(read_bytes_, &request_); !parsed.ok()) {
    executor_->RecordUnparsable(read_bytes_.Length(), parsed);
    {
      absl::MutexLock lock(&mutex_);
      reading_ = false;
      reads_done_ = true;
      read_failure_ = absl::InvalidArgumentError(
          absl::StrCat("stream item ", next_sequence_, ": ", parsed.message()));
    }
    Advance();
    return;
  }
  uint64_t sequence;
  {
    absl::MutexLock lock(&mutex_);
    ++unanswered_;
    sequence = next_sequence_++;
  }
  executor_->Execute(
      &request_, ClientDeadline(*context_),
      [this, sequence](std::shared_ptr<Job> job) {
        absl::MutexLock lock(&mutex_);
        if (broken_) job->Cancel();
        const uint64_t bytes = OutputBytes(job->operation);
        backlog_bytes_ += bytes;
        reserved_bytes_.emplace(sequence, bytes);
        jobs_.emplace(sequence, std::move(job));
      },
      [this, sequence](absl::Status status, v1::ExecuteResponse* response,
                       MemoryBudget::Reservation held) {
        OnItemDone(sequence, std::move(status), std::move(*response), std::move(held));
      });
  {
    absl::MutexLock lock(&mutex_);
    reading_ = false;
  }
  Advance();
}

void ExecuteStreamReactor::OnItemDone(uint64_t sequence, absl::Status status,
                                      v1::ExecuteResponse response,
                                      MemoryBudget::Reservation held) {
  *response.mutable_status() = ToRpcStatus(status);
  {
    absl::MutexLock lock(&mutex_);
    jobs_.erase(sequence);
    uint64_t reserved = 0;
    if (auto it = reserved_bytes_.find(sequence); it != reserved_bytes_.end()) {
      reserved = it->second;
      reserved_bytes_.erase(it);
    } else {
      // Refused before it became a job (it did not decode, or the server was
      // full): its answer, which echoes the client's request_id, still waits
      // to be written, so it counts towards the backlog like an output does.
      // Otherwise a client that sends bad items with huge ids and reads no
      // answers would grow the server without bound.
      reserved = response.ByteSizeLong();
      backlog_bytes_ += reserved;
    }
    if (broken_) {
      --unanswered_;
      backlog_bytes_ -= reserved;
    } else {
      pending_writes_.push_back({std::move(response), reserved, std::move(held)});
    }
  }
  Advance();
}

void ExecuteStreamReactor::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mutex_);
    writing_ = false;
    --unanswered_;
    backlog_bytes_ -= writing_reserved_bytes_;
    writing_reserved_bytes_ = 0;
    writing_held_ = MemoryBudget::Reservation();
    if (!ok) {
      // The call is broken; nothing more can be written.
      broken_ = true;
      DropPendingWritesLocked();
    }
  }
  Advance();
}

void ExecuteStreamReactor::OnCancel() {
  std::vector<std::shared_ptr<Job>> jobs;
  {
    absl::MutexLock lock(&mutex_);
    broken_ = true;
    DropPendingWritesLocked();
    for (auto& [sequence, job] : jobs_) jobs.push_back(job);
  }
  for (const auto& job : jobs) job->Cancel();
  Advance();
}

void ExecuteStreamReactor::DropPendingWritesLocked() {
  unanswered_ -= static_cast<int>(pending_writes_.size());
  for (const PendingWrite& write : pending_writes_) backlog_bytes_ -= write.reserved_bytes;
  pending_writes_.clear();
}

void ExecuteStreamReactor::OnDone() {
  if (gate_ != nullptr) gate_->Exit();
  delete this;
}

void ExecuteStreamReactor::Advance() {
  bool start_write = false;
  bool start_read = false;
  bool finish = false;
  grpc::Status finish_status;
  {
    absl::MutexLock lock(&mutex_);
    if (finished_) return;
    if (!writing_ && !pending_writes_.empty() && !broken_) {
      writing_message_ = std::move(pending_writes_.front().response);
      writing_reserved_bytes_ = pending_writes_.front().reserved_bytes;
      writing_held_ = std::move(pending_writes_.front().held);
      pending_writes_.pop_front();
      writing_ = true;
      start_write = true;
    }
    if (!reading_ && !reads_done_ && !broken_ && unanswered_ < max_backlog_ &&
        backlog_bytes_ < max_backlog_bytes_) {
      reading_ = true;
      start_read = true;
    }
    // Once the call is broken no read is started again, and unanswered items
    // are dropped as their jobs call back. `unanswered_` also covers an item
    // still being decoded, whose job may not be in `jobs_` yet.
    const bool reads_over = reads_done_ || (broken_ && !reading_);
    if (reads_over && !reading_ && !writing_ && unanswered_ == 0 && jobs_.empty()) {
      finished_ = true;
      finish = true;
      finish_status = broken_ ? grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled")
                              : ToGrpcStatus(read_failure_);
    }
  }
  if (start_write) {
    // Serialized here, outside the lock; only the thread that claimed the
    // write touches the message and its bytes until OnWriteDone.
    const grpc::Status serialized = SerializeMessage(writing_message_, &writing_bytes_);
    if (serialized.ok()) {
      StartWrite(&writing_bytes_);
    } else {
      // Over 2 GiB (not within --max_request_bytes): a failed write.
      OnWriteDone(false);
    }
  }
  if (start_read) StartRead(&read_bytes_);
  if (finish) Finish(finish_status);
}

}  // namespace dmlserve

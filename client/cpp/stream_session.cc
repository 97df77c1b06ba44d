#include "client/cpp/stream_session.h"

#include <utility>

#include "client/cpp/status_conversion.h"

namespace dmlserve::client {

StreamSession::StreamSession(v1::OperatorService::Stub* stub,
                             std::unique_ptr<grpc::ClientContext> context)
    : context_(std::move(context)), stream_(stub->ExecuteStream(context_.get())) {}

StreamSession::~StreamSession() {
  if (!finished_) Finish().IgnoreError();
}

absl::Status StreamSession::Send(const v1::ExecuteRequest& request) {
  absl::MutexLock lock(&write_mutex_);
  if (writes_done_) return absl::FailedPreconditionError("Send after CloseSend");
  if (!stream_->Write(request)) {
    return absl::AbortedError("the stream is closed; Finish() returns the reason");
  }
  return absl::OkStatus();
}

absl::Status StreamSession::CloseSend() {
  absl::MutexLock lock(&write_mutex_);
  if (writes_done_) return absl::OkStatus();
  writes_done_ = true;
  if (!stream_->WritesDone()) {
    return absl::AbortedError("the stream is closed; Finish() returns the reason");
  }
  return absl::OkStatus();
}

std::optional<v1::ExecuteResponse> StreamSession::Receive() {
  if (reads_done_) return std::nullopt;
  v1::ExecuteResponse response;
  if (stream_->Read(&response)) return response;
  reads_done_ = true;
  return std::nullopt;
}

absl::Status StreamSession::Finish() {
  if (finished_) return final_status_;
  if (!reads_done_) {
    // gRPC's Finish blocks until every response has been read; cancelling
    // first makes the remaining reads end at once.
    context_->TryCancel();
    v1::ExecuteResponse discarded;
    while (stream_->Read(&discarded)) {
    }
    reads_done_ = true;
  }
  final_status_ = FromGrpcStatus(stream_->Finish());
  finished_ = true;
  return final_status_;
}

void StreamSession::Cancel() { context_->TryCancel(); }

}  // namespace dmlserve::client

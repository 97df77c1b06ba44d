#ifndef DMLSERVE_CLIENT_CPP_STREAM_SESSION_H_
#define DMLSERVE_CLIENT_CPP_STREAM_SESSION_H_

#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "dmlserve/v1/dmlserve.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace dmlserve::client {

// One ExecuteStream call. Requests go out in order; responses come back in
// completion order, so callers match them by request_id. Send and Receive may
// run on two different threads at once (one sender, one receiver), which is
// how a caller keeps the server busy without waiting for each answer. A
// session must not outlive the Client that opened it.
class StreamSession {
 public:
  // Use Client::OpenStream.
  StreamSession(v1::OperatorService::Stub* stub, std::unique_ptr<grpc::ClientContext> context);
  StreamSession(const StreamSession&) = delete;
  StreamSession& operator=(const StreamSession&) = delete;
  // Cancels the call if Finish was not reached.
  ~StreamSession();

  // ABORTED once the stream is broken (Finish then has the reason) and
  // FAILED_PRECONDITION after CloseSend.
  absl::Status Send(const v1::ExecuteRequest& request);

  // Tells the server no more requests follow; responses keep arriving.
  absl::Status CloseSend();

  // The next response, or nullopt once the stream has ended. A response whose
  // `status` is not OK is a failed item, not a failed stream.
  std::optional<v1::ExecuteResponse> Receive();

  // The call's final status. Call it after Receive returned nullopt; called
  // earlier it cancels the call and drops unread responses.
  absl::Status Finish();

  // Ends the call early from any thread; pending Receive calls return nullopt.
  void Cancel();

 private:
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::ExecuteRequest, v1::ExecuteResponse>> stream_;
  absl::Mutex write_mutex_;
  bool writes_done_ ABSL_GUARDED_BY(write_mutex_) = false;
  bool reads_done_ = false;  // Touched by the receiving thread only.
  bool finished_ = false;
  absl::Status final_status_;
};

}  // namespace dmlserve::client

#endif  // DMLSERVE_CLIENT_CPP_STREAM_SESSION_H_

#ifndef DMLSERVE_SERVER_WIRE_MESSAGES_H_
#define DMLSERVE_SERVER_WIRE_MESSAGES_H_

// Messages as they travel: the service's methods take and give gRPC's raw
// bytes and parse and serialize them here, so that bytes which are not a
// valid message get INVALID_ARGUMENT with a message saying so. (With gRPC's
// typed handlers such a unary call ended UNIMPLEMENTED with no message, and a
// stream read that failed to parse looked like a half-close: the stream ended
// OK, silently dropping the client's later items.)

#include "absl/status/status.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace dmlserve {

// Parses `bytes` into `message` (cleared first). INVALID_ARGUMENT naming the
// message type and the size when they are not a valid message of it.
absl::Status ParseMessage(const grpc::ByteBuffer& bytes, google::protobuf::MessageLite* message);

// Serializes `message` into `bytes` (replacing what they held). Fails only
// when the message is too large to serialize (over 2 GiB).
grpc::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer* bytes);

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_WIRE_MESSAGES_H_

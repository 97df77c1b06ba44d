#include "server/wire_messages.h"

#include "absl/strings/str_cat.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace dmlserve {

absl::Status ParseMessage(const grpc::ByteBuffer& bytes, google::protobuf::MessageLite* message) {
  message->Clear();
  if (bytes.Length() == 0) return absl::OkStatus();  // an empty message: all fields default
  // A copy of the buffer shares its slices (no bytes are copied); the reader
  // needs a mutable one.
  grpc::ByteBuffer buffer(bytes);
  bool parsed = false;
  if (buffer.Valid()) {
    grpc::ProtoBufferReader reader(&buffer);
    parsed = reader.status().ok() && message->ParseFromZeroCopyStream(&reader);
  }
  if (!parsed) {
    return absl::InvalidArgumentError(absl::StrCat(message->GetTypeName(), ": the ", bytes.Length(),
                                                   " bytes received are not a valid message of "
                                                   "this type (protobuf wire format)"));
  }
  return absl::OkStatus();
}

grpc::Status SerializeMessage(const google::protobuf::MessageLite& message,
                              grpc::ByteBuffer* bytes) {
  bytes->Clear();  // gRPC's writer fills only an empty buffer
  bool own_buffer = false;
  return grpc::SerializationTraits<google::protobuf::MessageLite>::Serialize(message, bytes,
                                                                             &own_buffer);
}

}  // namespace dmlserve

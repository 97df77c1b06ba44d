#ifndef DMLSERVE_SERVER_REQUEST_ARENA_H_
#define DMLSERVE_SERVER_REQUEST_ARENA_H_

// A protobuf arena for one unary request's messages whose first block is
// part of this object, so that, declared in a handler, its first 4 KiB are
// on the handler's stack. A handler reads its request only while it runs
// (payloads move on into the job), so its sub-messages, size lists and string
// headers (about 20 allocations for a matrix multiply) need not come from the
// heap. 4 KiB holds a matrix multiply's eight tensor messages; a larger
// message (more dimensions, longer ids) continues on the heap. Tensor bytes
// get heap buffers of their own, which the job adopts.
//
// Not copyable or movable: the arena points into the object.

#include <cstddef>

#include "google/protobuf/arena.h"

namespace dmlserve {

class RequestArena {
 public:
  RequestArena() : arena_(Options(first_block_, sizeof(first_block_))) {}
  RequestArena(const RequestArena&) = delete;
  RequestArena& operator=(const RequestArena&) = delete;

  // A message of type T on the arena, destroyed with it.
  template <typename T>
  T& Create() {
    return *google::protobuf::Arena::CreateMessage<T>(&arena_);
  }

 private:
  static google::protobuf::ArenaOptions Options(char* block, size_t bytes) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block;
    options.initial_block_size = bytes;
    return options;
  }

  alignas(8) char first_block_[4096];  // before arena_, which uses it
  google::protobuf::Arena arena_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_REQUEST_ARENA_H_

#include "kernels/core/buffer.h"

#include <cstring>
#include <utility>

namespace dmlserve {

std::shared_ptr<Buffer> Buffer::Uninitialized(size_t size) {
  auto buffer = std::make_shared<Buffer>(PrivateKey());
  buffer->block_ = BufferPool::Get().Acquire(size);
  buffer->data_ = static_cast<char*>(buffer->block_.data);
  buffer->size_ = size;
  return buffer;
}

std::shared_ptr<Buffer> Buffer::Zeroed(size_t size) {
  std::shared_ptr<Buffer> buffer = Uninitialized(size);
  std::memset(buffer->data_, 0, size);
  return buffer;
}

std::shared_ptr<Buffer> Buffer::Copy(absl::string_view bytes) {
  std::shared_ptr<Buffer> buffer = Uninitialized(bytes.size());
  if (!bytes.empty()) std::memcpy(buffer->data_, bytes.data(), bytes.size());
  return buffer;
}

std::shared_ptr<Buffer> Buffer::Adopt(std::string bytes) {
  auto buffer = std::make_shared<Buffer>(PrivateKey());
  buffer->string_ = std::move(bytes);
  buffer->adopted_ = true;
  buffer->data_ = buffer->string_.data();
  buffer->size_ = buffer->string_.size();
  return buffer;
}

std::shared_ptr<Buffer> Buffer::Borrow(char* data, size_t size, std::shared_ptr<void> owner) {
  auto buffer = std::make_shared<Buffer>(PrivateKey());
  buffer->owner_ = std::move(owner);
  buffer->data_ = data;
  buffer->size_ = size;
  return buffer;
}

Buffer::~Buffer() { BufferPool::Get().Release(block_); }

std::string Buffer::ReleaseString() {
  std::string bytes = std::move(string_);
  string_.clear();
  data_ = string_.data();
  size_ = 0;
  return bytes;
}

}  // namespace dmlserve

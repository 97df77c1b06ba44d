#include "server/tensor_registry.h"

#include <memory>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/client_text.h"

namespace dmlserve {
namespace {

absl::Status ValidateId(absl::string_view id) {
  if (id.size() > TensorRegistry::kMaxIdLength) {
    return absl::InvalidArgumentError(absl::StrCat("tensor_id: ", id.size(),
                                                   " characters, at most ",
                                                   TensorRegistry::kMaxIdLength, " allowed"));
  }
  for (char c : id) {
    if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(
          "tensor_id: only printable ASCII characters without spaces are allowed");
    }
  }
  return absl::OkStatus();
}

}  // namespace

TensorRegistry::TensorRegistry(uint64_t max_total_bytes,
                               absl::AnyInvocable<void(absl::string_view)> evict,
                               size_t max_tensors)
    : max_total_bytes_(max_total_bytes),
      max_tensors_(max_tensors),
      evict_(evict ? std::make_shared<Evict>(std::move(evict)) : nullptr) {}

TensorRegistry::~TensorRegistry() {
  // Jobs may outlive the registry; their registrations then evict nothing.
  absl::MutexLock lock(&mutex_);
  evict_.reset();
}

absl::StatusOr<std::string> TensorRegistry::Register(absl::string_view id, Tensor tensor) {
  if (absl::Status status = ValidateId(id); !status.ok()) return status;
  const uint64_t bytes = tensor.byte_size();
  absl::MutexLock lock(&mutex_);
  std::string key = id.empty() ? GenerateId() : std::string(id);
  if (tensors_.contains(key)) {
    return absl::AlreadyExistsError(absl::StrCat("tensor_id: tensor ", QuotedClientText(key),
                                                 " is already registered; release it first"));
  }
  if (tensors_.size() >= max_tensors_) {
    return absl::ResourceExhaustedError(absl::StrCat("tensor: ", tensors_.size(),
                                                     " tensors are registered, the most "
                                                     "--max_registered_tensors=",
                                                     max_tensors_, " allows; release some first"));
  }
  if (bytes > max_total_bytes_ || total_bytes_ > max_total_bytes_ - bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tensor: registering ", bytes, " bytes would exceed --max_registered_tensor_bytes=",
        max_total_bytes_, " (", total_bytes_, " bytes registered)"));
  }
  std::weak_ptr<Evict> evict = evict_;
  tensor.registration = std::make_shared<TensorRegistration>(
      absl::StrCat(key, "#", ++generation_), [evict](const std::string& registered_id) {
        if (auto call = evict.lock()) (*call)(registered_id);
      });
  total_bytes_ += bytes;
  tensors_.emplace(key, std::move(tensor));
  return key;
}

absl::Status TensorRegistry::Release(absl::string_view id) {
  // Dropped after the lock: the registration may be the tensor's last copy.
  Tensor released;
  {
    absl::MutexLock lock(&mutex_);
    auto it = tensors_.find(id);
    if (it == tensors_.end()) {
      return absl::NotFoundError(absl::StrCat("tensor_id: unknown tensor ", QuotedClientText(id)));
    }
    total_bytes_ -= it->second.byte_size();
    // Jobs holding a copy of the Tensor keep the bytes, and the resident
    // copies, alive until they finish.
    released = std::move(it->second);
    tensors_.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TensorRegistry::Find(absl::string_view id) const {
  absl::MutexLock lock(&mutex_);
  auto it = tensors_.find(id);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown tensor ", QuotedClientText(id)));
  }
  return it->second;
}

uint64_t TensorRegistry::total_bytes() const {
  absl::MutexLock lock(&mutex_);
  return total_bytes_;
}

size_t TensorRegistry::size() const {
  absl::MutexLock lock(&mutex_);
  return tensors_.size();
}

std::string TensorRegistry::GenerateId() {
  // Random rather than sequential so ids from a restarted server are unlikely
  // to match ids a client still holds from before.
  absl::BitGen bitgen;
  std::string id;
  do {
    id = absl::StrFormat("tensor-%016x", absl::Uniform<uint64_t>(bitgen));
  } while (tensors_.contains(id));
  return id;
}

}  // namespace dmlserve

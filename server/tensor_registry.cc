#include "server/tensor_registry.h"

#include <cstring>
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

bool SameContent(const Tensor& a, const Tensor& b) {
  return a.data_type == b.data_type && a.sizes == b.sizes && a.byte_size() == b.byte_size() &&
         (a.byte_size() == 0 || std::memcmp(a.data(), b.data(), a.byte_size()) == 0);
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
  if (repository_.contains(key)) {
    return absl::AlreadyExistsError(
        absl::StrCat("tensor_id: tensor ", QuotedClientText(key),
                     " is served from --tensor_repository (read-only)"));
  }
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
  Attach(key, tensor);
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
      if (repository_.contains(id)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "tensor_id: tensor ", QuotedClientText(id),
            " comes from --tensor_repository and is read-only; change the repository and "
            "reload it (SIGHUP)"));
      }
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
  if (it != tensors_.end()) return it->second;
  it = repository_.find(id);
  if (it != repository_.end()) return it->second;
  return absl::NotFoundError(absl::StrCat("unknown tensor ", QuotedClientText(id)));
}

absl::Status TensorRegistry::ReplaceRepository(std::vector<RepositoryTensor> tensors) {
  for (const RepositoryTensor& entry : tensors) {
    if (absl::Status status = ValidateId(entry.id); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(QuotedClientText(entry.id), ": ", status.message()));
    }
    if (entry.id.empty()) return absl::InvalidArgumentError("a repository tensor needs an id");
  }
  // The old set is dropped after the lock: a registration may be the last
  // copy of its tensor, and its eviction must not run under the lock.
  absl::flat_hash_map<std::string, Tensor> old;
  {
    absl::MutexLock lock(&mutex_);
    for (const RepositoryTensor& entry : tensors) {
      if (tensors_.contains(entry.id)) {
        return absl::AlreadyExistsError(absl::StrCat(
            "tensor ", QuotedClientText(entry.id),
            " is registered by a client; release it before the repository can serve it"));
      }
    }
    absl::flat_hash_map<std::string, Tensor> next;
    uint64_t bytes = 0;
    for (RepositoryTensor& entry : tensors) {
      bytes += entry.tensor.byte_size();
      auto kept = repository_.find(entry.id);
      if (kept != repository_.end() && SameContent(kept->second, entry.tensor)) {
        next.emplace(entry.id, kept->second);
        continue;
      }
      Attach(entry.id, entry.tensor);
      next.emplace(entry.id, std::move(entry.tensor));
    }
    old.swap(repository_);
    repository_ = std::move(next);
    repository_bytes_ = bytes;
  }
  return absl::OkStatus();
}

void TensorRegistry::Attach(const std::string& key, Tensor& tensor) {
  std::weak_ptr<Evict> evict = evict_;
  tensor.registration = std::make_shared<TensorRegistration>(
      absl::StrCat(key, "#", ++generation_), [evict](const std::string& registered_id) {
        if (auto call = evict.lock()) (*call)(registered_id);
      });
}

size_t TensorRegistry::repository_size() const {
  absl::MutexLock lock(&mutex_);
  return repository_.size();
}

uint64_t TensorRegistry::repository_bytes() const {
  absl::MutexLock lock(&mutex_);
  return repository_bytes_;
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

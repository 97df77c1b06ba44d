#ifndef DMLSERVE_SERVER_TENSOR_REGISTRY_H_
#define DMLSERVE_SERVER_TENSOR_REGISTRY_H_

// Tensors kept on the server (RegisterTensor) so requests can refer to them by
// id instead of sending the bytes each time: typically matmul weights.
//
// Lookups hand out copies of the Tensor, which share its bytes; a job that is
// queued or running when its tensor is released keeps the bytes alive until it
// finishes. Each registration gets its own Tensor::registered_id (the public id
// plus a generation), so a device never mistakes a resident copy of a released
// tensor for a new registration that reuses the public id.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "kernels/core/tensor.h"
#include "server/tensor_repository.h"

namespace dmlserve {

class TensorRegistry {
 public:
  // Longest accepted public id.
  static constexpr size_t kMaxIdLength = 256;

  // Default for `max_tensors`.
  static constexpr size_t kDefaultMaxTensors = 65536;

  // `max_total_bytes` caps the bytes of all registered tensors together and
  // `max_tensors` their number (each costs its id and bookkeeping whatever
  // its size: a million one-byte tensors would hold far more than 1 MB).
  // `evict` is called with a released tensor's registered_id so devices can
  // drop resident copies: once the tensor is released and the last job
  // holding a copy of it is gone (see Tensor::registration), on the thread
  // that dropped that copy, never under the registry's lock. Not called
  // after the registry is destroyed.
  TensorRegistry(uint64_t max_total_bytes, absl::AnyInvocable<void(absl::string_view)> evict,
                 size_t max_tensors = kDefaultMaxTensors);

  ~TensorRegistry();
  TensorRegistry(const TensorRegistry&) = delete;
  TensorRegistry& operator=(const TensorRegistry&) = delete;

  // Keeps a validated tensor under `id`, or under a generated id when `id` is
  // empty; returns the id. ALREADY_EXISTS when `id` is taken,
  // RESOURCE_EXHAUSTED when the cap would be exceeded, INVALID_ARGUMENT for a
  // malformed id.
  absl::StatusOr<std::string> Register(absl::string_view id, Tensor tensor);

  // NOT_FOUND when `id` is not registered; FAILED_PRECONDITION for a
  // repository tensor (read-only).
  absl::Status Release(absl::string_view id);

  // Replaces the read-only tensors of --tensor_repository with `tensors`, at
  // once: a Find sees the old set or the new one, never a mix, and jobs that
  // already hold a tensor keep it. A tensor whose id, type, sizes and bytes
  // are unchanged keeps its registration (devices keep their resident copy).
  // Repository tensors do not count towards the RegisterTensor caps. Errors
  // (the set is then unchanged): INVALID_ARGUMENT for a malformed id,
  // ALREADY_EXISTS for an id a client registered.
  absl::Status ReplaceRepository(std::vector<RepositoryTensor> tensors);

  // NOT_FOUND when `id` is not registered.
  absl::StatusOr<Tensor> Find(absl::string_view id) const;

  // Registered tensors' bytes (the repository's not included).
  uint64_t total_bytes() const;
  size_t repository_size() const;
  uint64_t repository_bytes() const;
  uint64_t max_total_bytes() const { return max_total_bytes_; }
  size_t max_tensors() const { return max_tensors_; }
  size_t size() const;

 private:
  std::string GenerateId() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Gives `tensor` its registration: the id devices know it by, and its
  // eviction once the last copy goes.
  void Attach(const std::string& key, Tensor& tensor) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const uint64_t max_total_bytes_;
  const size_t max_tensors_;
  using Evict = absl::AnyInvocable<void(absl::string_view)>;
  // Registrations hold it weakly: dropping it here stops their evictions.
  std::shared_ptr<Evict> evict_;

  mutable absl::Mutex mutex_;
  absl::flat_hash_map<std::string, Tensor> tensors_ ABSL_GUARDED_BY(mutex_);
  // --tensor_repository's, read-only; ids never also in tensors_.
  absl::flat_hash_map<std::string, Tensor> repository_ ABSL_GUARDED_BY(mutex_);
  uint64_t repository_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t total_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace dmlserve

#endif  // DMLSERVE_SERVER_TENSOR_REGISTRY_H_

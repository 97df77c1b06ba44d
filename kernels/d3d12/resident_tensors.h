#ifndef DMLSERVE_KERNELS_D3D12_RESIDENT_TENSORS_H_
#define DMLSERVE_KERNELS_D3D12_RESIDENT_TENSORS_H_

// Registered tensors (weights), in the form a kernel reads them, kept in GPU
// memory so that only the first batch that needs one uploads it.
//
// Keys are a plan's BufferSpec::resident_key: the registered tensor's id,
// then optionally "/" and the name of a derived form ("w1", "w1/qmm-b-packed").
// A form derived from several registered tensors names the others after its
// key, each after a space (ids have none): "s1/qmm-columns z1" belongs to s1
// and to z1. Evicting an id drops every form that belongs to it. Keys that
// agree up to the first space ("s1/qmm-columns z1", "s1/qmm-columns z2")
// are one slot: at most one of them is resident, a new one replacing the
// other, so that pairing one tensor with many others keeps one form of it,
// not one per pair. (A plan that holds two keys of one slot runs correctly
// but keeps at most one of them; the scheduler's batches never do, their
// jobs sharing one compatibility key.)
//
// A batch that finds a form missing becomes its uploader: it records the
// upload and, once its fence completes, calls Uploaded() (or Abandoned() if
// the batch failed). A batch that needs a form being uploaded by another
// batch waits for that upload to finish: its own command list may run
// before the uploader's, so it cannot simply bind the buffer.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/d3d12/gpu_buffer_pool.h"

namespace dmlserve::d3d12 {

class ResidentTensors {
 public:
  // A resident buffer lent to one batch; keeps it alive past an eviction.
  struct Use {
    std::shared_ptr<const PooledBuffer> buffer;
    bool must_upload = false;  // this batch is the uploader
  };

  explicit ResidentTensors(GpuBufferPool* pool) : pool_(pool) {}
  ~ResidentTensors();
  ResidentTensors(const ResidentTensors&) = delete;
  ResidentTensors& operator=(const ResidentTensors&) = delete;

  // The buffer for `key` (of `size_bytes`), blocking while another batch is
  // uploading it. INVALID_ARGUMENT if the key is resident with another size.
  // A missing key replaces the other keys of its slot.
  absl::StatusOr<Use> Acquire(const std::string& key, uint64_t size_bytes);

  // The uploader's batch completed: later batches use the buffer as is.
  void Uploaded(const std::string& key);
  // The uploader's batch failed: forget the entry (the next batch uploads).
  void Abandoned(const std::string& key);

  // Whether some form of registered tensor `id` is resident.
  bool IsResident(absl::string_view id) const;
  // Drops every form of `id`; batches in flight keep their buffers until done.
  void Evict(absl::string_view id);

  // Uploads started so far (each missing key once).
  uint64_t uploads() const;
  uint64_t resident_bytes() const;
  size_t size() const;

 private:
  struct Entry {
    std::shared_ptr<const PooledBuffer> buffer;
    uint64_t size_bytes = 0;  // as asked for (the buffer may be larger)
    bool ready = false;
    // Evicted while its upload was in flight: erased when the upload ends,
    // and not handed to anyone meanwhile (the id may be registered anew).
    bool evicted = false;
  };
  std::shared_ptr<const PooledBuffer> MakeShared(PooledBuffer buffer);
  static bool KeyBelongsTo(absl::string_view key, absl::string_view id);
  // The key up to its first space.
  static absl::string_view SlotOf(absl::string_view key);

  GpuBufferPool* const pool_;
  mutable std::mutex mutex_;
  std::condition_variable upload_finished_;
  std::map<std::string, Entry, std::less<>> entries_;
  uint64_t uploads_ = 0;
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_RESIDENT_TENSORS_H_

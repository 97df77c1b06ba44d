#include "kernels/d3d12/resident_tensors.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dmlserve::d3d12 {

ResidentTensors::~ResidentTensors() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();  // the buffers go back to the pool (which outlives this)
}

bool ResidentTensors::KeyBelongsTo(absl::string_view key, absl::string_view id) {
  // "owner/form other-owner ...": ids have no spaces, so the first word is
  // the owner's key and each further word another owner's id. (No
  // allocation: the scheduler asks IsResident for every batch it takes.)
  size_t space = key.find(' ');
  const absl::string_view first = key.substr(0, space);
  if (absl::StartsWith(first, id) && (first.size() == id.size() || first[id.size()] == '/')) {
    return true;
  }
  while (space != absl::string_view::npos) {
    const size_t next = key.find(' ', space + 1);
    if (key.substr(space + 1, next == absl::string_view::npos ? next : next - space - 1) == id) {
      return true;
    }
    space = next;
  }
  return false;
}

std::shared_ptr<const PooledBuffer> ResidentTensors::MakeShared(PooledBuffer buffer) {
  GpuBufferPool* pool = pool_;
  return std::shared_ptr<const PooledBuffer>(
      new PooledBuffer(std::move(buffer)), [pool](const PooledBuffer* returned) {
        pool->Release(std::move(*const_cast<PooledBuffer*>(returned)));
        delete returned;
      });
}

absl::string_view ResidentTensors::SlotOf(absl::string_view key) {
  return key.substr(0, key.find(' '));
}

absl::StatusOr<ResidentTensors::Use> ResidentTensors::Acquire(const std::string& key,
                                                              uint64_t size_bytes) {
  std::vector<std::shared_ptr<const PooledBuffer>> dropped;  // released after the lock
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto it = entries_.find(key);
    if (it == entries_.end()) break;
    if (it->second.evicted) {
      upload_finished_.wait(lock);
      continue;
    }
    if (it->second.size_bytes != size_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("resident tensor '", key, "' is ",
                                                     it->second.size_bytes,
                                                     " bytes, a plan asked for ", size_bytes));
    }
    if (it->second.ready) return Use{it->second.buffer, false};
    upload_finished_.wait(lock);
  }
  // Missing: this batch uploads it. The pool may create a buffer; that is
  // done under the lock so that two batches never both upload one key.
  absl::StatusOr<PooledBuffer> buffer = pool_->Acquire(size_bytes);
  if (!buffer.ok()) return buffer.status();
  // The other keys of its slot go (batches using them keep their buffers).
  const absl::string_view slot = SlotOf(key);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (SlotOf(it->first) != slot || it->first == key) {
      ++it;
    } else if (!it->second.ready) {
      it->second.evicted = true;  // its uploader drops it
      ++it;
    } else {
      dropped.push_back(std::move(it->second.buffer));
      it = entries_.erase(it);
    }
  }
  Entry& entry = entries_[key];
  entry.buffer = MakeShared(std::move(*buffer));
  entry.size_bytes = size_bytes;
  entry.ready = false;
  ++uploads_;
  return Use{entry.buffer, true};
}

void ResidentTensors::Uploaded(const std::string& key) {
  std::shared_ptr<const PooledBuffer> dropped;  // released outside the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      if (it->second.evicted) {
        dropped = std::move(it->second.buffer);
        entries_.erase(it);
      } else {
        it->second.ready = true;
      }
    }
  }
  upload_finished_.notify_all();
}

void ResidentTensors::Abandoned(const std::string& key) {
  std::shared_ptr<const PooledBuffer> dropped;  // released outside the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(key);
    if (it != entries_.end() && !it->second.ready) {
      dropped = std::move(it->second.buffer);
      entries_.erase(it);
    }
  }
  upload_finished_.notify_all();
}

bool ResidentTensors::IsResident(absl::string_view id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Every key is looked at: a form can belong to `id` as its second owner.
  for (const auto& [key, entry] : entries_) {
    if (entry.ready && KeyBelongsTo(key, id)) return true;
  }
  return false;
}

void ResidentTensors::Evict(absl::string_view id) {
  std::vector<std::shared_ptr<const PooledBuffer>> dropped;  // released outside the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (!KeyBelongsTo(it->first, id)) {
        ++it;
      } else if (!it->second.ready) {
        // Its uploader still needs the entry; Uploaded()/Abandoned() drop it.
        it->second.evicted = true;
        ++it;
      } else {
        dropped.push_back(std::move(it->second.buffer));
        it = entries_.erase(it);
      }
    }
  }
}

uint64_t ResidentTensors::uploads() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return uploads_;
}

uint64_t ResidentTensors::resident_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t bytes = 0;
  for (const auto& [key, entry] : entries_) bytes += entry.buffer->size_bytes;
  return bytes;
}

size_t ResidentTensors::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace dmlserve::d3d12

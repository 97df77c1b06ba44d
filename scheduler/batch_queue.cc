#include "scheduler/batch_queue.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "kernels/core/operation.h"

namespace dmlserve {
namespace {

bool AllResident(const CompatibilityKey& key, const Device& device) {
  const std::vector<std::string>& ids = key.registered_ids();
  if (ids.empty()) return false;
  for (const std::string& id : ids) {
    if (!device.IsResident(id)) return false;
  }
  return true;
}

// Requeued batches first, then the oldest.
bool RunsBefore(const Batch& a, const Batch& b) {
  return std::make_tuple(!a.requeued, a.oldest_enqueue, a.sequence) <
         std::make_tuple(!b.requeued, b.oldest_enqueue, b.sequence);
}

}  // namespace

BatchQueue::BatchQueue(const BatchLimits& limits) : limits_(limits) {}

bool BatchQueue::IsDue(const Batch& batch, absl::Time now) const {
  return close_all_ || batch.oldest_enqueue + limits_.max_queue_delay <= now;
}

std::unique_ptr<Batch> BatchQueue::NewBatch(const CompatibilityKey& key) {
  auto batch = std::make_unique<Batch>(key);
  batch->sequence = next_sequence_++;
  return batch;
}

void BatchQueue::Close(std::unique_ptr<Batch> batch) { closed_.push_back(std::move(batch)); }

void BatchQueue::Add(std::shared_ptr<Job> job) {
  const uint64_t job_bytes = OperationBytes(job->operation);
  CompatibilityKey key = CompatibilityKey::For(job->operation);
  auto it = open_.find(key);
  if (it != open_.end() && it->second->bytes + job_bytes > limits_.max_batch_bytes) {
    // The job does not fit: the open batch is as full as it gets.
    Close(std::move(it->second));
    open_.erase(it);
    it = open_.end();
  }
  if (it == open_.end()) {
    it = open_.emplace(key, NewBatch(key)).first;
  }
  Batch& batch = *it->second;
  batch.Add(std::move(job), job_bytes);
  ++job_count_;
  if (static_cast<int>(batch.jobs.size()) >= limits_.max_batch_size ||
      batch.bytes >= limits_.max_batch_bytes) {
    Close(std::move(it->second));
    open_.erase(it);
  }
}

bool BatchQueue::HasRunnable(absl::Time now) const {
  if (!closed_.empty()) return true;
  for (const auto& [key, batch] : open_) {
    if (IsDue(*batch, now)) return true;
  }
  return false;
}

std::unique_ptr<Batch> BatchQueue::Take(absl::Time now, const Device& device) {
  // Where each candidate lives, so the chosen one can be removed.
  struct Candidate {
    Batch* batch;
    size_t closed_index;               // when from closed_
    const CompatibilityKey* open_key;  // when from open_
  };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < closed_.size() && i < kResidencyWindow; ++i) {
    candidates.push_back({closed_[i].get(), i, nullptr});
  }
  for (const auto& [key, batch] : open_) {
    if (IsDue(*batch, now)) candidates.push_back({batch.get(), 0, &key});
  }
  if (candidates.empty()) return nullptr;
  std::sort(candidates.begin(), candidates.end(),
            [](const Candidate& a, const Candidate& b) { return RunsBefore(*a.batch, *b.batch); });
  if (candidates.size() > kResidencyWindow) candidates.resize(kResidencyWindow);

  const Candidate* chosen = &candidates.front();
  if (!chosen->batch->requeued) {
    for (const Candidate& candidate : candidates) {
      if (AllResident(candidate.batch->key, device)) {
        chosen = &candidate;
        break;
      }
    }
  }

  std::unique_ptr<Batch> batch;
  if (chosen->open_key != nullptr) {
    auto it = open_.find(*chosen->open_key);
    batch = std::move(it->second);
    open_.erase(it);
  } else {
    batch = std::move(closed_[chosen->closed_index]);
    closed_.erase(closed_.begin() + chosen->closed_index);
  }
  job_count_ -= batch->jobs.size();
  return batch;
}

void BatchQueue::Requeue(std::unique_ptr<Batch> batch) {
  batch->requeued = true;
  job_count_ += batch->jobs.size();
  closed_.push_front(std::move(batch));
}

void BatchQueue::CloseAll() { close_all_ = true; }

absl::Time BatchQueue::NextDueTime(absl::Time now) const {
  absl::Time next = absl::InfiniteFuture();
  if (close_all_) return next;
  for (const auto& [key, batch] : open_) {
    absl::Time due = batch->oldest_enqueue + limits_.max_queue_delay;
    if (due > now) next = std::min(next, due);
  }
  return next;
}

std::vector<std::shared_ptr<Job>> BatchQueue::RemoveJobsIf(
    absl::FunctionRef<bool(const Job&)> remove) {
  std::vector<std::shared_ptr<Job>> removed;
  auto remove_from = [&](Batch& batch) {
    std::vector<std::shared_ptr<Job>> gone = batch.RemoveIf(remove);
    job_count_ -= gone.size();
    for (auto& job : gone) removed.push_back(std::move(job));
  };
  for (auto it = open_.begin(); it != open_.end();) {
    remove_from(*it->second);
    if (it->second->jobs.empty()) {
      open_.erase(it++);
    } else {
      ++it;
    }
  }
  for (auto it = closed_.begin(); it != closed_.end();) {
    remove_from(**it);
    if ((*it)->jobs.empty()) {
      it = closed_.erase(it);
    } else {
      ++it;
    }
  }
  return removed;
}

std::vector<std::shared_ptr<Job>> BatchQueue::RemoveAll() {
  return RemoveJobsIf([](const Job&) { return true; });
}

absl::Time BatchQueue::EarliestDeadline() const {
  absl::Time earliest = absl::InfiniteFuture();
  auto scan = [&earliest](const Batch& batch) {
    for (const auto& job : batch.jobs) earliest = std::min(earliest, job->deadline);
  };
  for (const auto& [key, batch] : open_) scan(*batch);
  for (const auto& batch : closed_) scan(*batch);
  return earliest;
}

}  // namespace dmlserve

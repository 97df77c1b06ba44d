#include "scheduler/batch_queue.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "kernels/core/check.h"

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

BatchQueue::BatchQueue(const BatchLimits& limits)
    : limits_{std::max(1, limits.max_batch_size), std::max<uint64_t>(1, limits.max_batch_bytes),
              std::max(absl::ZeroDuration(), limits.max_queue_delay)} {}

bool BatchQueue::IsDue(const Batch& batch, absl::Time now) const {
  return batch.created + limits_.max_queue_delay <= now;
}

void BatchQueue::Close(Batch* batch) {
  if (batch == held_) held_ = nullptr;  // full: nothing more to wait for
  open_by_key_.erase(batch->key);
  batch->open = false;
  closed_.splice(closed_.end(), open_, batch->position);
}

std::unique_ptr<Batch> BatchQueue::Unlink(Batch* batch) {
  if (batch == held_) held_ = nullptr;
  BatchList& list = batch->open ? open_ : closed_;
  if (batch->open) open_by_key_.erase(batch->key);
  std::unique_ptr<Batch> owned = std::move(*batch->position);
  list.erase(batch->position);
  return owned;
}

void BatchQueue::Add(std::shared_ptr<Job> job, CompatibilityKey key, uint64_t own_bytes,
                     int company) {
  const bool was_empty = empty();
  auto it = open_by_key_.find(key);
  Batch* batch = it == open_by_key_.end() ? nullptr : it->second;
  if (batch != nullptr && batch->bytes + own_bytes > limits_.max_batch_bytes) {
    // The job does not fit: the open batch is as full as it gets.
    Close(batch);
    batch = nullptr;
  }
  if (batch == nullptr) {
    auto created = std::make_unique<Batch>(key);
    created->sequence = next_sequence_++;
    created->created = job->enqueue_time;
    batch = created.get();
    open_.push_back(std::move(created));
    batch->position = std::prev(open_.end());
    open_by_key_.emplace(std::move(key), batch);
    if (was_empty && company > 1 && !close_all_) {
      batch->company = company;
      batch->held_until = batch->created + limits_.max_queue_delay;
      held_ = batch;
    }
  }
  job->waiting_in = batch;
  batch->Add(std::move(job), own_bytes);
  ++job_count_;
  if (close_all_ || static_cast<int>(batch->jobs.size()) >= limits_.max_batch_size ||
      batch->bytes >= limits_.max_batch_bytes) {
    Close(batch);
  }
}

bool BatchQueue::HasRunnable(absl::Time now, bool idle, std::optional<OperatorSet> only) const {
  if (only.has_value()) {
    auto supported = [&only](const auto& batch) {
      return only->test(static_cast<size_t>(batch->key.kind()));
    };
    if (std::any_of(closed_.begin(), closed_.end(), supported)) return true;
    for (const auto& batch : open_) {
      if (!idle && !IsDue(*batch, now)) return false;  // the rest are younger
      if (batch.get() == held_ && !HoldOver(*held_, now)) continue;
      if (supported(batch)) return true;
    }
    return false;
  }
  if (!closed_.empty()) return true;
  if (open_.empty()) return false;
  if (!idle) return IsDue(*open_.front(), now);
  // An idle device takes any open batch but one still held.
  return open_.size() > 1 || !holding(now);
}

int BatchQueue::Candidates(absl::Time now, bool idle, absl::FunctionRef<bool(const Batch&)> accept,
                           Batch** out) const {
  // Open batches are in creation order, so the due ones come first; closed
  // ones in closing order, which is not age order (a younger batch may fill
  // first), hence the sort.
  int count = 0;
  int taken = 0;
  for (auto it = closed_.begin(); it != closed_.end() && taken < kResidencyWindow; ++it, ++taken) {
    if (accept(**it)) out[count++] = it->get();
  }
  taken = 0;
  for (auto it = open_.begin(); it != open_.end() && taken < kResidencyWindow; ++it, ++taken) {
    if (!idle && !IsDue(**it, now)) break;
    if (it->get() == held_ && !HoldOver(*held_, now)) continue;
    if (accept(**it)) out[count++] = it->get();
  }
  std::sort(out, out + count, [](const Batch* a, const Batch* b) { return RunsBefore(*a, *b); });
  return count;
}

BatchQueue::Upcoming BatchQueue::UpcomingBatches(absl::Time now) const {
  Batch* candidates[2 * kResidencyWindow];
  const int count = std::min(
      kResidencyWindow, Candidates(
                            now, /*idle=*/true, [](const Batch&) { return true; }, candidates));
  return Upcoming(candidates, candidates + count);
}

std::unique_ptr<Batch> BatchQueue::Take(absl::Time now, bool idle, const Device& device,
                                        absl::FunctionRef<bool(const Batch&)> accept) {
  // The oldest few runnable batches, in run order.
  Batch* candidates[2 * kResidencyWindow];
  int count = Candidates(now, idle, accept, candidates);
  if (count == 0) return nullptr;
  count = std::min(count, kResidencyWindow);

  Batch* chosen = candidates[0];
  if (!chosen->requeued) {
    for (int i = 0; i < count; ++i) {
      if (AllResident(candidates[i]->key, device)) {
        chosen = candidates[i];
        break;
      }
    }
  }
  std::unique_ptr<Batch> batch = Unlink(chosen);
  DMLSERVE_DCHECK(!batch->jobs.empty() && job_count_ >= batch->jobs.size());
  job_count_ -= batch->jobs.size();
  for (const auto& job : batch->jobs) job->waiting_in = nullptr;
  return batch;
}

void BatchQueue::Requeue(std::unique_ptr<Batch> batch) {
  DMLSERVE_DCHECK(batch != nullptr && !batch->jobs.empty());
  batch->requeued = true;
  batch->open = false;
  job_count_ += batch->jobs.size();
  for (const auto& job : batch->jobs) job->waiting_in = batch.get();
  closed_.push_front(std::move(batch));
  closed_.front()->position = closed_.begin();
}

void BatchQueue::CloseAll() {
  close_all_ = true;
  held_ = nullptr;
  while (!open_.empty()) Close(open_.front().get());
}

absl::Time BatchQueue::NextDueTime(std::optional<OperatorSet> only) const {
  if (only.has_value()) {
    for (const auto& batch : open_) {
      if (!only->test(static_cast<size_t>(batch->key.kind()))) continue;
      return batch.get() == held_ ? batch->held_until : batch->created + limits_.max_queue_delay;
    }
    return absl::InfiniteFuture();
  }
  if (open_.empty()) return absl::InfiniteFuture();
  const absl::Time due = open_.front()->created + limits_.max_queue_delay;
  return held_ != nullptr ? std::min(due, held_->held_until) : due;
}

std::shared_ptr<Job> BatchQueue::Remove(Job* job) {
  Batch* batch = job->waiting_in;
  if (batch == nullptr) return nullptr;
  std::shared_ptr<Job> removed = batch->Remove(job);
  if (removed == nullptr) return nullptr;
  job->waiting_in = nullptr;
  DMLSERVE_DCHECK(job_count_ > 0);
  --job_count_;
  if (batch->jobs.empty()) Unlink(batch);
  return removed;
}

std::vector<std::shared_ptr<Job>> BatchQueue::RemoveAll(OperatorKind kind) {
  std::vector<Batch*> doomed;
  for (BatchList* list : {&open_, &closed_}) {
    for (auto& batch : *list) {
      if (batch->key.kind() == kind) doomed.push_back(batch.get());
    }
  }
  std::vector<std::shared_ptr<Job>> removed;
  for (Batch* batch : doomed) {
    std::unique_ptr<Batch> owned = Unlink(batch);
    DMLSERVE_DCHECK(job_count_ >= owned->jobs.size());
    job_count_ -= owned->jobs.size();
    for (auto& job : owned->jobs) {
      job->waiting_in = nullptr;
      removed.push_back(std::move(job));
    }
  }
  return removed;
}

std::vector<std::shared_ptr<Job>> BatchQueue::RemoveAll() {
  std::vector<std::shared_ptr<Job>> removed;
  for (BatchList* list : {&open_, &closed_}) {
    for (auto& batch : *list) {
      for (auto& job : batch->jobs) {
        job->waiting_in = nullptr;
        removed.push_back(std::move(job));
      }
    }
    list->clear();
  }
  open_by_key_.clear();
  held_ = nullptr;
  job_count_ = 0;
  return removed;
}

}  // namespace dmlserve

#ifndef DMLSERVE_KERNELS_D3D12_COMMAND_RING_H_
#define DMLSERVE_KERNELS_D3D12_COMMAND_RING_H_

// One compute queue and a ring of command contexts (allocator + list + fence
// event), so that several batches are in flight on the queue at once: while
// one batch computes, the next one records its uploads into another context.
//
// A context is lent to one batch from Acquire() to its release; the batch
// records into context->list(), Submit()s it and Wait()s for its fence value.
// Completion is fence-based: one fence per queue, signalled after every
// submission with the next value.
//
// Each context also holds two GPU timestamps, which a batch writes around its
// dispatches (MarkDispatchesBegin/End): once the batch has completed,
// CollectDispatchTime adds the GPU time between them to the ring's total, so
// benchmarks can tell kernel time from the batch's fixed costs.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/d3d12/com_ptr.h"
#include "kernels/d3d12/d3d12_api.h"
#include "kernels/d3d12/fence_event.h"

namespace dmlserve::d3d12 {

// Stands in for a context's command list while batches record into it, e.g.
// a proxy that counts the calls (bench/d3d12_report.cc measures copies and
// barriers per batch with one). Returns the object to record into; it must
// forward every call to `list`. The ring still closes, resets and executes
// `list` itself, so a proxy never reaches the queue.
using CommandListWrapper =
    std::function<ComPtr<ID3D12GraphicsCommandList>(ComPtr<ID3D12GraphicsCommandList> list)>;

class CommandRing {
 public:
  // A command allocator and list, and the event that waits for their last
  // submission: what one batch records into while it holds the context.
  class CommandContext {
   public:
    // What the batch records into: the list, or its wrapper.
    ID3D12GraphicsCommandList* list() const {
      return recording_list_ ? recording_list_.get() : list_.get();
    }

   private:
    friend class CommandRing;
    ComPtr<ID3D12CommandAllocator> allocator_;
    ComPtr<ID3D12GraphicsCommandList> list_;
    ComPtr<ID3D12GraphicsCommandList> recording_list_;  // null without a wrapper
    // Two timestamps and their read-back (null where the queue has none).
    ComPtr<ID3D12QueryHeap> timestamps_;
    ComPtr<ID3D12Resource> timestamp_readback_;
    bool timed_ = false;  // this recording wrote both timestamps
    FenceEvent event_;
    uint64_t last_fence_value_ = 0;  // of the context's last submission
    bool in_use_ = false;
    bool recording_ = false;  // the list is open
  };

  // Returns the context to the ring when destroyed.
  class Lease {
   public:
    Lease(CommandRing* ring, CommandContext* context) : ring_(ring), context_(context) {}
    Lease(Lease&& other) noexcept
        : ring_(std::exchange(other.ring_, nullptr)), context_(other.context_) {}
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (ring_ != nullptr) ring_->Release(context_);
    }
    CommandContext* operator->() const { return context_; }
    CommandContext* get() const { return context_; }

   private:
    CommandRing* ring_;
    CommandContext* context_;
  };

  // `wrap` (may be empty) wraps each context's list (see CommandListWrapper).
  static absl::StatusOr<std::unique_ptr<CommandRing>> Create(ComPtr<ID3D12Device> device,
                                                             int contexts,
                                                             const CommandListWrapper& wrap = {});

  // Blocks until a context is free and its previous submission complete, then
  // resets it for recording.
  absl::StatusOr<Lease> Acquire(uint32_t timeout_ms);

  // Closes the context's list, executes it and signals the fence; returns the
  // fence value that marks its completion.
  absl::StatusOr<uint64_t> Submit(CommandContext* context);

  // Blocks until the fence reaches `fence_value` (see FenceEvent::Wait).
  absl::Status Wait(CommandContext* context, uint64_t fence_value, uint32_t timeout_ms);

  // Timestamps around the dispatches of the batch recording in `context`:
  // Begin after its uploads, End after its last dispatch (End also resolves
  // both into the context's read-back buffer).
  void MarkDispatchesBegin(CommandContext* context);
  void MarkDispatchesEnd(CommandContext* context);
  // After Wait() succeeded: adds the GPU time between the two marks to
  // dispatch_ns() (nothing when the batch was not timed).
  void CollectDispatchTime(CommandContext* context);

  // Blocks until everything submitted so far has completed (or `timeout_ms`
  // passed): before the resources it uses are destroyed.
  absl::Status WaitIdle(uint32_t timeout_ms);
  // Without blocking: whether everything submitted so far has completed, or
  // the fence reports the device removed (nothing runs on it any more).
  bool Idle() const;

  int context_count() const { return static_cast<int>(contexts_.size()); }
  uint64_t submissions() const;
  // GPU time between the marks, summed over the collected batches, and how
  // many batches it covers.
  uint64_t dispatch_ns() const { return dispatch_ns_.load(std::memory_order_relaxed); }
  uint64_t timed_batches() const { return timed_batches_.load(std::memory_order_relaxed); }
  ID3D12CommandQueue* queue() const { return queue_.get(); }

 private:
  CommandRing() = default;
  void Release(CommandContext* context);
  // Gives `context` its query heap and read-back buffer, or leaves it untimed.
  static void CreateTimestamps(ID3D12Device* device, CommandContext& context);

  ComPtr<ID3D12Device> device_;
  ComPtr<ID3D12CommandQueue> queue_;
  ComPtr<ID3D12Fence> fence_;
  std::vector<std::unique_ptr<CommandContext>> contexts_;

  std::mutex contexts_mutex_;
  std::condition_variable context_freed_;
  size_t next_context_ = 0;  // round robin, so contexts are used evenly

  mutable std::mutex submit_mutex_;  // queue submissions and fence values in one order
  uint64_t last_signalled_ = 0;

  uint64_t timestamp_frequency_ = 0;  // ticks per second; 0: no timestamps
  std::atomic<uint64_t> dispatch_ns_{0};
  std::atomic<uint64_t> timed_batches_{0};
};

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_COMMAND_RING_H_

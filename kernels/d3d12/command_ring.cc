#include "kernels/d3d12/command_ring.h"

#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {

absl::StatusOr<std::unique_ptr<CommandRing>> CommandRing::Create(ComPtr<ID3D12Device> device,
                                                                 int slots) {
  if (slots < 1) return absl::InvalidArgumentError("a command ring needs at least one slot");
  std::unique_ptr<CommandRing> ring(new CommandRing);
  ring->device_ = std::move(device);
  ID3D12Device* d = ring->device_.get();

  D3D12_COMMAND_QUEUE_DESC queue_desc = {};
  queue_desc.Type = D3D12_COMMAND_LIST_TYPE_COMPUTE;
  queue_desc.Priority = D3D12_COMMAND_QUEUE_PRIORITY_NORMAL;
  queue_desc.Flags = D3D12_COMMAND_QUEUE_FLAG_NONE;
  HRESULT hr =
      d->CreateCommandQueue(&queue_desc, __uuidof(ID3D12CommandQueue), ring->queue_.put_void());
  if (FAILED(hr)) return HResultError(hr, "CreateCommandQueue(COMPUTE)");
  hr = d->CreateFence(0, D3D12_FENCE_FLAG_NONE, __uuidof(ID3D12Fence), ring->fence_.put_void());
  if (FAILED(hr)) return HResultError(hr, "CreateFence");

  for (int i = 0; i < slots; ++i) {
    auto slot = std::make_unique<Slot>();
    if (!slot->event_.valid()) return absl::InternalError("creating a fence event failed");
    hr = d->CreateCommandAllocator(D3D12_COMMAND_LIST_TYPE_COMPUTE,
                                   __uuidof(ID3D12CommandAllocator), slot->allocator_.put_void());
    if (FAILED(hr)) return HResultError(hr, "CreateCommandAllocator(COMPUTE)");
    hr = d->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COMPUTE, slot->allocator_.get(), nullptr,
                              __uuidof(ID3D12GraphicsCommandList), slot->list_.put_void());
    if (FAILED(hr)) return HResultError(hr, "CreateCommandList(COMPUTE)");
    // Lists are born open; Acquire() expects them closed.
    hr = slot->list_->Close();
    if (FAILED(hr)) return HResultError(hr, "ID3D12GraphicsCommandList::Close");
    ring->slots_.push_back(std::move(slot));
  }
  return ring;
}

absl::StatusOr<CommandRing::Lease> CommandRing::Acquire(uint32_t timeout_ms) {
  Slot* slot = nullptr;
  {
    std::unique_lock<std::mutex> lock(slots_mutex_);
    for (;;) {
      for (size_t i = 0; i < slots_.size() && slot == nullptr; ++i) {
        Slot* candidate = slots_[(next_slot_ + i) % slots_.size()].get();
        if (!candidate->in_use_) {
          slot = candidate;
          next_slot_ = (next_slot_ + i + 1) % slots_.size();
        }
      }
      if (slot != nullptr) break;
      slot_freed_.wait(lock);
    }
    slot->in_use_ = true;
  }
  Lease lease(this, slot);
  // Normally complete already (each batch waits for its own fence), but a
  // batch that failed between submission and wait leaves work behind; the
  // allocator must not be reset under the GPU.
  if (slot->last_fence_value_ > 0) {
    absl::Status waited = slot->event_.Wait(fence_.get(), slot->last_fence_value_, timeout_ms);
    if (!waited.ok()) return waited;
  }
  HRESULT hr = slot->allocator_->Reset();
  if (FAILED(hr)) return HResultError(hr, "ID3D12CommandAllocator::Reset");
  hr = slot->list_->Reset(slot->allocator_.get(), nullptr);
  if (FAILED(hr)) return HResultError(hr, "ID3D12GraphicsCommandList::Reset");
  slot->recording_ = true;
  return lease;
}

absl::StatusOr<uint64_t> CommandRing::Submit(Slot* slot) {
  slot->recording_ = false;
  HRESULT hr = slot->list_->Close();
  if (FAILED(hr)) return HResultError(hr, "ID3D12GraphicsCommandList::Close");
  std::lock_guard<std::mutex> lock(submit_mutex_);
  ID3D12CommandList* lists[] = {slot->list_.get()};
  queue_->ExecuteCommandLists(1, lists);
  const uint64_t value = last_signalled_ + 1;
  hr = queue_->Signal(fence_.get(), value);
  if (FAILED(hr)) {
    // The list may or may not run; without a signal nobody can tell when.
    return absl::UnavailableError(HResultError(hr, "ID3D12CommandQueue::Signal").message());
  }
  last_signalled_ = value;
  slot->last_fence_value_ = value;
  return value;
}

absl::Status CommandRing::Wait(Slot* slot, uint64_t fence_value, uint32_t timeout_ms) {
  return slot->event_.Wait(fence_.get(), fence_value, timeout_ms);
}

absl::Status CommandRing::WaitIdle(uint32_t timeout_ms) {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    last = last_signalled_;
  }
  if (last == 0) return absl::OkStatus();
  FenceEvent event;
  return event.Wait(fence_.get(), last, timeout_ms);
}

uint64_t CommandRing::submissions() const {
  std::lock_guard<std::mutex> lock(submit_mutex_);
  return last_signalled_;
}

void CommandRing::Release(Slot* slot) {
  // A batch that gave up while recording leaves its list open; an open list
  // cannot be reset, so close it (whatever it holds is never executed).
  if (slot->recording_) {
    slot->list_->Close();
    slot->recording_ = false;
  }
  {
    std::lock_guard<std::mutex> lock(slots_mutex_);
    slot->in_use_ = false;
  }
  slot_freed_.notify_one();
}

}  // namespace dmlserve::d3d12

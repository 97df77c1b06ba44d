#include "kernels/d3d12/command_ring.h"

#include <cstring>

#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {
namespace {

constexpr uint32_t kTimestampCount = 2;

}  // namespace

void CommandRing::CreateTimestamps(ID3D12Device* device, CommandContext& context) {
  D3D12_QUERY_HEAP_DESC heap_desc = {};
  heap_desc.Type = D3D12_QUERY_HEAP_TYPE_TIMESTAMP;
  heap_desc.Count = kTimestampCount;
  if (FAILED(device->CreateQueryHeap(&heap_desc, __uuidof(ID3D12QueryHeap),
                                     context.timestamps_.put_void()))) {
    context.timestamps_ = {};
    return;
  }
  D3D12_HEAP_PROPERTIES heap = {};
  heap.Type = D3D12_HEAP_TYPE_READBACK;
  D3D12_RESOURCE_DESC desc = {};
  desc.Dimension = D3D12_RESOURCE_DIMENSION_BUFFER;
  desc.Width = kTimestampCount * sizeof(uint64_t);
  desc.Height = 1;
  desc.DepthOrArraySize = 1;
  desc.MipLevels = 1;
  desc.SampleDesc.Count = 1;
  desc.Layout = D3D12_TEXTURE_LAYOUT_ROW_MAJOR;
  if (FAILED(device->CreateCommittedResource(
          &heap, D3D12_HEAP_FLAG_NONE, &desc, D3D12_RESOURCE_STATE_COPY_DEST, nullptr,
          __uuidof(ID3D12Resource), context.timestamp_readback_.put_void()))) {
    context.timestamps_ = {};
    context.timestamp_readback_ = {};
  }
}

void CommandRing::MarkDispatchesBegin(CommandContext* context) {
  context->timed_ = false;
  if (!context->timestamps_) return;
  context->list()->EndQuery(context->timestamps_.get(), D3D12_QUERY_TYPE_TIMESTAMP, 0);
}

void CommandRing::MarkDispatchesEnd(CommandContext* context) {
  if (!context->timestamps_) return;
  ID3D12GraphicsCommandList* list = context->list();
  list->EndQuery(context->timestamps_.get(), D3D12_QUERY_TYPE_TIMESTAMP, 1);
  list->ResolveQueryData(context->timestamps_.get(), D3D12_QUERY_TYPE_TIMESTAMP, 0, kTimestampCount,
                         context->timestamp_readback_.get(), 0);
  context->timed_ = true;
}

void CommandRing::CollectDispatchTime(CommandContext* context) {
  if (!context->timed_) return;
  context->timed_ = false;
  void* data = nullptr;
  D3D12_RANGE read = {0, kTimestampCount * sizeof(uint64_t)};
  if (FAILED(context->timestamp_readback_->Map(0, &read, &data))) return;
  uint64_t ticks[kTimestampCount];
  std::memcpy(ticks, data, sizeof(ticks));
  D3D12_RANGE written = {0, 0};
  context->timestamp_readback_->Unmap(0, &written);
  if (ticks[1] < ticks[0]) return;
  const double ns =
      static_cast<double>(ticks[1] - ticks[0]) * 1e9 / static_cast<double>(timestamp_frequency_);
  dispatch_ns_.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  timed_batches_.fetch_add(1, std::memory_order_relaxed);
}

absl::StatusOr<std::unique_ptr<CommandRing>> CommandRing::Create(ComPtr<ID3D12Device> device,
                                                                 int contexts,
                                                                 const CommandListWrapper& wrap) {
  if (contexts < 1) return absl::InvalidArgumentError("a command ring needs at least one context");
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

  // Timestamps are for measurement only: a queue without them still runs.
  uint64_t frequency = 0;
  if (SUCCEEDED(ring->queue_->GetTimestampFrequency(&frequency))) {
    ring->timestamp_frequency_ = frequency;
  }

  for (int i = 0; i < contexts; ++i) {
    auto context = std::make_unique<CommandContext>();
    if (ring->timestamp_frequency_ != 0) CreateTimestamps(d, *context);
    if (!context->event_.valid()) return absl::InternalError("creating a fence event failed");
    hr =
        d->CreateCommandAllocator(D3D12_COMMAND_LIST_TYPE_COMPUTE, __uuidof(ID3D12CommandAllocator),
                                  context->allocator_.put_void());
    if (FAILED(hr)) return HResultError(hr, "CreateCommandAllocator(COMPUTE)");
    hr =
        d->CreateCommandList(0, D3D12_COMMAND_LIST_TYPE_COMPUTE, context->allocator_.get(), nullptr,
                             __uuidof(ID3D12GraphicsCommandList), context->list_.put_void());
    if (FAILED(hr)) return HResultError(hr, "CreateCommandList(COMPUTE)");
    // Lists are born open; Acquire() expects them closed.
    hr = context->list_->Close();
    if (FAILED(hr)) return HResultError(hr, "ID3D12GraphicsCommandList::Close");
    if (wrap) context->recording_list_ = wrap(context->list_);
    ring->contexts_.push_back(std::move(context));
  }
  return ring;
}

absl::StatusOr<CommandRing::Lease> CommandRing::Acquire(uint32_t timeout_ms) {
  CommandContext* context = nullptr;
  {
    std::unique_lock<std::mutex> lock(contexts_mutex_);
    for (;;) {
      for (size_t i = 0; i < contexts_.size() && context == nullptr; ++i) {
        CommandContext* candidate = contexts_[(next_context_ + i) % contexts_.size()].get();
        if (!candidate->in_use_) {
          context = candidate;
          next_context_ = (next_context_ + i + 1) % contexts_.size();
        }
      }
      if (context != nullptr) break;
      context_freed_.wait(lock);
    }
    context->in_use_ = true;
  }
  Lease lease(this, context);
  // Normally complete already (each batch waits for its own fence), but a
  // batch that failed between submission and wait leaves work behind; the
  // allocator must not be reset under the GPU.
  if (context->last_fence_value_ > 0) {
    absl::Status waited =
        context->event_.Wait(fence_.get(), context->last_fence_value_, timeout_ms);
    if (!waited.ok()) return waited;
  }
  HRESULT hr = context->allocator_->Reset();
  if (FAILED(hr)) return HResultError(hr, "ID3D12CommandAllocator::Reset");
  hr = context->list_->Reset(context->allocator_.get(), nullptr);
  if (FAILED(hr)) return HResultError(hr, "ID3D12GraphicsCommandList::Reset");
  context->recording_ = true;
  return lease;
}

absl::StatusOr<uint64_t> CommandRing::Submit(CommandContext* context) {
  context->recording_ = false;
  HRESULT hr = context->list_->Close();
  if (FAILED(hr)) return HResultError(hr, "ID3D12GraphicsCommandList::Close");
  std::lock_guard<std::mutex> lock(submit_mutex_);
  ID3D12CommandList* lists[] = {context->list_.get()};
  queue_->ExecuteCommandLists(1, lists);
  const uint64_t value = last_signalled_ + 1;
  hr = queue_->Signal(fence_.get(), value);
  if (FAILED(hr)) {
    // The list may or may not run; without a signal nobody can tell when.
    return absl::UnavailableError(HResultError(hr, "ID3D12CommandQueue::Signal").message());
  }
  last_signalled_ = value;
  context->last_fence_value_ = value;
  return value;
}

absl::Status CommandRing::Wait(CommandContext* context, uint64_t fence_value, uint32_t timeout_ms) {
  return context->event_.Wait(fence_.get(), fence_value, timeout_ms);
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

bool CommandRing::Idle() const {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    last = last_signalled_;
  }
  // kLostFenceValue (a removed device) is above every value.
  return fence_->GetCompletedValue() >= last;
}

uint64_t CommandRing::submissions() const {
  std::lock_guard<std::mutex> lock(submit_mutex_);
  return last_signalled_;
}

void CommandRing::Release(CommandContext* context) {
  // A batch that gave up while recording leaves its list open; an open list
  // cannot be reset, so close it (whatever it holds is never executed).
  if (context->recording_) {
    context->list_->Close();
    context->recording_ = false;
  }
  {
    std::lock_guard<std::mutex> lock(contexts_mutex_);
    context->in_use_ = false;
  }
  context_freed_.notify_one();
}

}  // namespace dmlserve::d3d12

#include "kernels/d3d12/fence_event.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "kernels/d3d12/hresult.h"

namespace dmlserve::d3d12 {

constexpr std::chrono::milliseconds kPollSlice{50};

#ifndef _WIN32
namespace {

// An auto-reset event: a wait consumes the signal.
//
// vkd3d keeps each SetEventOnCompletion registration until the fence reaches
// its value, however long that takes, and then signals the event from its
// fence thread (or at once, inside the call, when the value is reached
// already); it keeps one registration per (value, event) pair and signals it
// once. A wait that timed out (a hung device) therefore leaves a registration
// behind that may still fire after the FenceEvent is gone. So the event keeps
// the values registered and not yet signalled, and whichever comes last, the
// FenceEvent's destructor or the last of those signals, frees it. One whose
// fence never arrives (or is destroyed first) stays allocated: a few bytes,
// never a write into freed memory.
struct HostEvent {
  std::mutex mutex;
  std::condition_variable signalled_cv;
  bool signalled = false;
  // Registered values not yet signalled. A FenceEvent registers values that
  // never decrease, and a fence reaches them in order, so each signal
  // answers the smallest.
  std::set<uint64_t> pending;
  bool owner_gone = false;  // the FenceEvent was destroyed
};

// True if signalled within `timeout`.
bool WaitHostEvent(HostEvent* event, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(event->mutex);
  if (!event->signalled_cv.wait_for(lock, timeout, [event] { return event->signalled; })) {
    return false;
  }
  event->signalled = false;
  return true;
}

// SetEventOnCompletion, once per value (as vkd3d keeps them). Not under the
// event's lock: vkd3d may signal the event inside the call.
HRESULT RegisterHostEvent(ID3D12Fence* fence, uint64_t value, HostEvent* event) {
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    if (!event->pending.insert(value).second) return S_OK;  // registered already
  }
  HRESULT hr = fence->SetEventOnCompletion(value, event);
  if (FAILED(hr)) {
    std::lock_guard<std::mutex> lock(event->mutex);
    event->pending.erase(value);
  }
  return hr;
}

}  // namespace

HRESULT SignalFenceEvent(HANDLE handle) {
  auto* event = static_cast<HostEvent*>(handle);
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    event->signalled = true;
    if (!event->pending.empty()) event->pending.erase(event->pending.begin());
    last = event->owner_gone && event->pending.empty();
    // Notified under the lock: once it is released, the owner's destructor
    // may free the event.
    event->signalled_cv.notify_all();
  }
  if (last) delete event;
  return S_OK;
}
#endif

FenceEvent::FenceEvent() {
#ifdef _WIN32
  // Auto-reset: one wait consumes one signal.
  handle_ = CreateEventA(nullptr, FALSE, FALSE, nullptr);
#else
  handle_ = new HostEvent;
#endif
}

FenceEvent::~FenceEvent() {
  if (handle_ == nullptr) return;
#ifdef _WIN32
  CloseHandle(handle_);
#else
  auto* event = static_cast<HostEvent*>(handle_);
  bool pending;
  {
    std::lock_guard<std::mutex> lock(event->mutex);
    event->owner_gone = true;
    pending = !event->pending.empty();
  }
  if (!pending) delete event;  // otherwise the last signal frees it
#endif
}

absl::Status FenceEvent::Wait(ID3D12Fence* fence, uint64_t value, uint32_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    uint64_t completed = fence->GetCompletedValue();
    if (completed == kLostFenceValue) {
      return absl::UnavailableError("fence reports the device lost (completed value UINT64_MAX)");
    }
    if (completed >= value) return absl::OkStatus();
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (remaining.count() <= 0) {
      return absl::DeadlineExceededError(absl::StrCat("fence value ", value, " not reached after ",
                                                      timeout_ms, " ms (completed: ", completed,
                                                      "); the device is hung"));
    }
    if (handle_ == nullptr) return absl::UnavailableError("no event to wait on the fence");
#ifdef _WIN32
    HRESULT hr = fence->SetEventOnCompletion(value, handle_);
#else
    HRESULT hr = RegisterHostEvent(fence, value, static_cast<HostEvent*>(handle_));
#endif
    if (FAILED(hr)) return HResultError(hr, "ID3D12Fence::SetEventOnCompletion");
    // A signal left over from an earlier registration only costs one more
    // turn of the loop. Waiting in slices and polling the fence again means a
    // signal the driver never delivers costs at most a slice, never the whole
    // hung-device timeout (a rare stall of that length was seen once under
    // heavy load on vkd3d 1.2 + lavapipe).
    remaining = std::min(remaining, kPollSlice);
#ifdef _WIN32
    DWORD result = WaitForSingleObject(handle_, static_cast<DWORD>(remaining.count()));
    if (result != WAIT_OBJECT_0 && result != WAIT_TIMEOUT) {
      return absl::UnavailableError("waiting for the fence event failed");
    }
#else
    WaitHostEvent(static_cast<HostEvent*>(handle_), remaining);
#endif
  }
}

}  // namespace dmlserve::d3d12

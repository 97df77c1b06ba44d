#ifndef DMLSERVE_KERNELS_D3D12_RELEASE_WHEN_IDLE_H_
#define DMLSERVE_KERNELS_D3D12_RELEASE_WHEN_IDLE_H_

// What a lost device's last batches still use, kept until its queue is done
// with it.
//
// A batch whose fence does not arrive within the hung-device timeout marks
// its device lost, but the GPU may still be running it: under vkd3d nothing
// stops a slow batch (lavapipe computes on; a real GPU's driver may take a
// while to reset), and freeing that batch's buffers, upload ring or command
// allocator lets the GPU, or lavapipe's threads, write into freed memory. (A
// 4096^3 product on lavapipe outlasting the 60 s timeout on a loaded machine
// segfaulted that way.) So a runtime that cannot wait for its queue hands
// what it owns here, and one background thread destroys each holding once
// its queue reports idle. A queue that never does keeps its memory for the
// life of the process: memory, never a crash.

#include <functional>
#include <memory>

namespace dmlserve::d3d12 {

// Destroys `held` (runs its deleter) on the release thread once `idle()`
// returns true, which it asks every few milliseconds; `idle` must stay
// callable while `held` lives (it normally reads an object `held` owns).
// Thread-safe.
void ReleaseWhenIdle(std::shared_ptr<void> held, std::function<bool()> idle);

// How many holdings wait for their queue now (tests, diagnostics).
int HeldUntilQueuesIdle();

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_RELEASE_WHEN_IDLE_H_

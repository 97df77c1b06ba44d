#ifndef DMLSERVE_KERNELS_CORE_PARALLEL_FOR_H_
#define DMLSERVE_KERNELS_CORE_PARALLEL_FOR_H_

// A small process-wide thread pool shared by every CPU kernel and device.
//
// The pool never oversubscribes the machine: kernel work runs only on threads
// holding one of ParallelismLevel() slots. A thread calling ParallelFor from
// outside any kernel waits for a free slot (so two CPU devices with two
// batches in flight each run at most ParallelismLevel() kernel threads in
// all, instead of one per caller plus the workers), and a worker joins a loop
// only while a slot is free. Calls nested inside a body reuse the caller's
// slot. A call with too little work for two chunks runs inline without a
// slot: waiting for one would cost more than the work.

#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"

namespace dmlserve {

// Threads a ParallelFor can use at once (the pool's workers plus the caller):
// the hardware concurrency, or DMLSERVE_CPU_THREADS when set.
int ParallelismLevel();

// Calls `body(begin, end)` on disjoint ranges that together cover [0, count),
// each at least `min_chunk` long (except when count itself is smaller), using
// the pool and the calling thread, and returns when all calls have returned.
// Runs inline when there is not enough work for two chunks. Safe to call
// from several threads at once and from inside a body. Chunks are claimed in
// increasing order of `begin` (a body may wait on work of an earlier chunk,
// which a running thread has already claimed).
//
// At most `chunks_per_thread` chunks per thread are made: a few even out
// uneven progress; callers with few, large, unequal units of work (a matrix
// multiply's blocks) ask for one chunk per unit.
//
// Idle workers spin for a fraction of a millisecond before they sleep, so
// back-to-back calls do not pay a thread wake-up each.
void ParallelFor(int64_t count, int64_t min_chunk,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> body,
                 int64_t chunks_per_thread = 4);

// memcpy of `bytes` from `source` to `destination`, split over the pool in
// 1 MiB chunks when it is large (4 MiB or more): one thread cannot saturate
// the memory system (nor a PCIe-mapped staging buffer), several can.
void ParallelMemcpy(void* destination, const void* source, size_t bytes);

// While an instance lives, ParallelFor calls on this thread run every chunk
// on this thread, without the pool (and without taking a slot). For callers
// that know the other cores are busy with other work (see
// kernels/backend/execution_hints.h). Scopes nest.
class SerialParallelForScope {
 public:
  SerialParallelForScope();
  ~SerialParallelForScope();
  SerialParallelForScope(const SerialParallelForScope&) = delete;
  SerialParallelForScope& operator=(const SerialParallelForScope&) = delete;

 private:
  const bool previous_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CORE_PARALLEL_FOR_H_

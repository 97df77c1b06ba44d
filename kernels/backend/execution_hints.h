#ifndef DMLSERVE_KERNELS_BACKEND_EXECUTION_HINTS_H_
#define DMLSERVE_KERNELS_BACKEND_EXECUTION_HINTS_H_

// Hints from the scheduler to the device that runs a batch on the current
// thread. A hint never changes what a batch computes, only how a device
// spends the machine's cores on it; a device may ignore every hint.

namespace dmlserve {

// While an instance lives, batches that this thread runs share the machine
// with request handling that keeps every core busy: the scheduler runs a
// cheap batch on the gRPC thread that received its last job, under sustained
// load. A device that would spread such a batch over a thread pool of its
// own should run it on this thread alone: waking a pool thread, and the
// pool's spin before it sleeps again, take a core from request handling and
// cost more than the split saves when no core is idle (measured with 64
// clients on 2 cores: 42 against 38 us of server CPU per request, see
// docs/benchmarks.md). Scopes nest; the innermost wins.
class BusyCoresScope {
 public:
  explicit BusyCoresScope(bool busy) : previous_(busy_) { busy_ = busy; }
  ~BusyCoresScope() { busy_ = previous_; }
  BusyCoresScope(const BusyCoresScope&) = delete;
  BusyCoresScope& operator=(const BusyCoresScope&) = delete;

  // Whether the innermost scope on this thread says the cores are busy
  // (false outside any scope).
  static bool Active() { return busy_; }

 private:
  inline static thread_local bool busy_ = false;
  const bool previous_;
};

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_BACKEND_EXECUTION_HINTS_H_

#include "kernels/core/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "kernels/core/thread_signal_stack.h"

#if (defined(__x86_64__) || defined(_M_X64)) && !defined(_M_ARM64EC)
#define DMLSERVE_SPIN_PAUSE 1
#include <immintrin.h>
#else
#define DMLSERVE_SPIN_PAUSE 0
#endif

namespace dmlserve {
namespace {

// How long a thread spins on a condition before it sleeps on a condition
// variable. Kernels come in bursts (the chunks of one call, the calls of one
// batch): a worker that spins this long after its last chunk is there for
// the next call without a futex wake-up, and an idle pool sleeps again
// within a fraction of a millisecond.
constexpr auto kSpin = std::chrono::microseconds(20);

// Spins (with pause) until `ready()` or kSpin has passed; returns ready().
template <typename Ready>
bool SpinUntil(Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
#if DMLSERVE_SPIN_PAUSE
    _mm_pause();
#endif
    if (i % 64 == 63 && std::chrono::steady_clock::now() > deadline) return ready();
  }
}

// One ParallelFor call. Chunks are claimed with an atomic counter, so the
// caller can finish all of them itself when the workers are busy elsewhere
// (no deadlock when ParallelFor nests or is called from many threads).
struct Loop {
  Loop(absl::FunctionRef<void(int64_t, int64_t)> body, int64_t count, int64_t chunks)
      : body(body), count(count), chunks(chunks) {}

  // Runs one unclaimed chunk; false when none is left.
  bool RunOne() {
    const int64_t chunk = next.fetch_add(1, std::memory_order_relaxed);
    if (chunk >= chunks) return false;
    body(chunk * count / chunks, (chunk + 1) * count / chunks);
    if (finished.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) {
      std::lock_guard<std::mutex> lock(mutex);
      done.notify_all();
    }
    return true;
  }

  void Wait() {
    // The last chunks usually finish within microseconds: spinning first
    // saves a sleep and a wake-up (tens of microseconds on a VM).
    if (SpinUntil([this] { return finished.load(std::memory_order_acquire) == chunks; })) return;
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [this] { return finished.load(std::memory_order_acquire) == chunks; });
  }

  absl::FunctionRef<void(int64_t, int64_t)> body;
  const int64_t count;
  const int64_t chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> finished{0};
  std::mutex mutex;
  std::condition_variable done;
};

// Whether this thread holds a kernel slot (so nested calls do not take
// another one).
thread_local bool holds_slot = false;
// Whether a SerialParallelForScope is active on this thread.
thread_local bool serial = false;

class ThreadPool {
 public:
  explicit ThreadPool(int threads) : workers_(threads - 1), free_slots_(threads) {
    for (int i = 0; i < workers_; ++i) std::thread([this] { WorkerLoop(); }).detach();
  }

  int workers() const { return workers_; }

  // Offers `loop` to up to `helpers` workers, which join it when a slot is
  // free.
  void Offer(const std::shared_ptr<Loop>& loop, int helpers) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int i = 0; i < helpers; ++i) queue_.push_back(loop);
      offered_.store(static_cast<int>(queue_.size()), std::memory_order_release);
    }
    wake_.notify_all();
  }

  // Blocks until a slot is free and takes it.
  void AcquireSlot() {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [this] { return free_slots_ > 0; });
    --free_slots_;
  }

  void ReleaseSlot() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++free_slots_;
    }
    wake_.notify_all();
  }

 private:
  void WorkerLoop() {
    EnsureThreadSignalStack();
    holds_slot = true;  // whenever it runs a body
    for (;;) {
      std::shared_ptr<Loop> loop;
      // A spinning worker sees an offer without being woken; the condition
      // variable below is only for a pool that has been idle a while.
      SpinUntil([this] { return offered_.load(std::memory_order_acquire) > 0; });
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return !queue_.empty() && free_slots_ > 0; });
        loop = std::move(queue_.front());
        queue_.pop_front();
        offered_.store(static_cast<int>(queue_.size()), std::memory_order_release);
        --free_slots_;
      }
      while (loop->RunOne()) {
      }
      ReleaseSlot();
    }
  }

  const int workers_;
  std::mutex mutex_;
  // Workers wait for offers and free slots, callers for free slots.
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Loop>> queue_;
  std::atomic<int> offered_{0};  // queue_.size(), readable without the lock
  int free_slots_;
};

int ConfiguredThreads() {
  if (const char* value = std::getenv("DMLSERVE_CPU_THREADS")) {
    const int threads = std::atoi(value);
    if (threads > 0) return threads;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

ThreadPool& Pool() {
  // Leaked on purpose: detached workers may still be waiting at exit.
  static ThreadPool* pool = new ThreadPool(ConfiguredThreads());
  return *pool;
}

}  // namespace

int ParallelismLevel() { return Pool().workers() + 1; }

SerialParallelForScope::SerialParallelForScope() : previous_(serial) { serial = true; }
SerialParallelForScope::~SerialParallelForScope() { serial = previous_; }

void ParallelFor(int64_t count, int64_t min_chunk,
                 absl::FunctionRef<void(int64_t begin, int64_t end)> body,
                 int64_t chunks_per_thread) {
  if (count <= 0) return;
  min_chunk = std::max<int64_t>(min_chunk, 1);
  ThreadPool& pool = Pool();
  if (serial || count / min_chunk < 2) {
    // Asked to stay on this thread, or too little work to split: run it
    // here, without a slot (taking one costs more than a small body, and a
    // serial caller's cores are busy with other work anyway).
    body(0, count);
    return;
  }
  if (!holds_slot) {
    // An outermost call: wait for a core, run, give it back.
    pool.AcquireSlot();
    holds_slot = true;
    struct Release {
      ThreadPool& pool;
      ~Release() {
        holds_slot = false;
        pool.ReleaseSlot();
      }
    } release{pool};
    ParallelFor(count, min_chunk, body, chunks_per_thread);
    return;
  }
  // A few chunks per thread even out uneven progress between threads.
  const int64_t chunks = std::min<int64_t>(
      count / min_chunk, std::max<int64_t>(1, chunks_per_thread) * (pool.workers() + 1));
  if (chunks < 2 || pool.workers() == 0) {
    body(0, count);
    return;
  }
  auto loop = std::make_shared<Loop>(body, count, chunks);
  pool.Offer(loop, static_cast<int>(std::min<int64_t>(pool.workers(), chunks - 1)));
  while (loop->RunOne()) {
  }
  loop->Wait();
}

void ParallelMemcpy(void* destination, const void* source, size_t bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  if (bytes < 4 * kChunk) {
    std::memcpy(destination, source, bytes);
    return;
  }
  auto* to = static_cast<char*>(destination);
  const auto* from = static_cast<const char*>(source);
  const int64_t chunks = static_cast<int64_t>((bytes + kChunk - 1) / kChunk);
  ParallelFor(
      chunks, 1,
      [&](int64_t begin, int64_t end) {
        const size_t first = static_cast<size_t>(begin) * kChunk;
        const size_t last = std::min(bytes, static_cast<size_t>(end) * kChunk);
        std::memcpy(to + first, from + first, last - first);
      },
      /*chunks_per_thread=*/2);
}

}  // namespace dmlserve

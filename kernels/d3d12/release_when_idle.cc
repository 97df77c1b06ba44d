#include "kernels/d3d12/release_when_idle.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace dmlserve::d3d12 {
namespace {

// How often the release thread asks the queues. A held runtime is rare (a
// device declared hung), so this only bounds how long its memory outlives
// the work.
constexpr std::chrono::milliseconds kPollInterval{20};

struct Holding {
  std::shared_ptr<void> held;
  std::function<bool()> idle;
};

// One per process, started by the first holding and never stopped: a
// holding may have to outlive everything else (its queue never idles), so
// neither the thread nor its list is ever destroyed.
class ReleaseThread {
 public:
  static ReleaseThread& Get() {
    static ReleaseThread* thread = new ReleaseThread;
    return *thread;
  }

  void Add(Holding holding) {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_.push_back(std::move(holding));
    ++held_;
    if (!started_) {
      started_ = true;
      std::thread([this] { Run(); }).detach();
    }
    added_.notify_one();
  }

  int held() {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_;
  }

 private:
  void Run() {
    std::vector<Holding> busy;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        added_.wait(lock, [this, &busy] { return !waiting_.empty() || !busy.empty(); });
        for (Holding& holding : waiting_) busy.push_back(std::move(holding));
        waiting_.clear();
      }
      // Asked and destroyed outside the lock: a device's teardown takes a
      // while, and Add must not wait for it.
      int released = 0;
      std::vector<Holding> still_busy;
      for (Holding& holding : busy) {
        if (holding.idle()) {
          holding = {};  // destroys what it held
          ++released;
        } else {
          still_busy.push_back(std::move(holding));
        }
      }
      busy = std::move(still_busy);
      if (released > 0) {
        std::lock_guard<std::mutex> lock(mutex_);
        held_ -= released;
      }
      if (!busy.empty()) std::this_thread::sleep_for(kPollInterval);
    }
  }

  std::mutex mutex_;
  std::condition_variable added_;
  std::vector<Holding> waiting_;  // added, not yet taken by the thread
  int held_ = 0;                  // added and not yet destroyed
  bool started_ = false;
};

}  // namespace

void ReleaseWhenIdle(std::shared_ptr<void> held, std::function<bool()> idle) {
  ReleaseThread::Get().Add({std::move(held), std::move(idle)});
}

int HeldUntilQueuesIdle() { return ReleaseThread::Get().held(); }

}  // namespace dmlserve::d3d12

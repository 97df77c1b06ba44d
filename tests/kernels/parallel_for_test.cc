#include "kernels/core/parallel_for.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace dmlserve {
namespace {

TEST(ParallelForTest, CoversTheRangeExactlyOnce) {
  for (int64_t count : {0, 1, 7, 100, 12345}) {
    for (int64_t min_chunk : {1, 3, 1000}) {
      std::vector<std::atomic<int>> hits(count);
      ParallelFor(count, min_chunk, [&](int64_t begin, int64_t end) {
        EXPECT_LE(0, begin);
        EXPECT_LT(begin, end);
        EXPECT_LE(end, count);
        for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
      });
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(hits[i].load(), 1) << count << " " << i;
    }
  }
}

TEST(ParallelForTest, ChunksRespectTheMinimum) {
  std::atomic<int> calls{0};
  ParallelFor(1000, 400, [&](int64_t begin, int64_t end) {
    EXPECT_GE(end - begin, 400);
    calls.fetch_add(1);
  });
  EXPECT_LE(calls.load(), 2);
}

TEST(ParallelForTest, UsesSeveralThreadsForLargeRanges) {
  if (ParallelismLevel() < 2) {
    GTEST_SKIP() << "one thread only; CTest runs this with DMLSERVE_CPU_THREADS=4";
  }
  std::atomic<int> active{0};
  std::atomic<int> max_active{0};
  ParallelFor(64, 1, [&](int64_t, int64_t) {
    const int now = active.fetch_add(1) + 1;
    int seen = max_active.load();
    while (now > seen && !max_active.compare_exchange_weak(seen, now)) {
    }
    // Stay busy until another thread shows up (or long enough to be sure
    // none will).
    for (int spin = 0; spin < 2000000 && max_active.load() < 2; ++spin) std::this_thread::yield();
    active.fetch_sub(1);
  });
  EXPECT_GE(max_active.load(), 2);
}

TEST(ParallelForTest, ASerialScopeKeepsEveryChunkOnTheCallingThread) {
  const std::thread::id caller = std::this_thread::get_id();
  {
    SerialParallelForScope serial;
    { SerialParallelForScope nested; }
    // Still serial after the nested scope ended.
    std::vector<int> hits(1000, 0);
    ParallelFor(1000, 1, [&](int64_t begin, int64_t end) {
      EXPECT_EQ(std::this_thread::get_id(), caller);
      for (int64_t i = begin; i < end; ++i) ++hits[i];
    });
    for (int hit : hits) ASSERT_EQ(hit, 1);
  }
  if (ParallelismLevel() < 2) return;
  // The scope is over: large ranges use the pool again.
  std::atomic<bool> other_thread{false};
  ParallelFor(64, 1, [&](int64_t, int64_t) {
    if (std::this_thread::get_id() != caller) other_thread = true;
    for (int spin = 0; spin < 2000000 && !other_thread.load(); ++spin) std::this_thread::yield();
  });
  EXPECT_TRUE(other_thread.load());
}

TEST(ParallelForTest, NestedAndConcurrentCallsComplete) {
  std::atomic<int64_t> total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      ParallelFor(16, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          ParallelFor(100, 1, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
        }
      });
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(total.load(), 4 * 16 * 100);
}

// Kernels called from many threads at once (CPU devices with batches in
// flight) share ParallelismLevel() slots: never more bodies run at a time.
TEST(ParallelForTest, ConcurrentCallersNeverOversubscribe) {
  std::atomic<int> active{0};
  std::atomic<int> max_active{0};
  auto body = [&](int64_t, int64_t) {
    const int now = active.fetch_add(1) + 1;
    int seen = max_active.load();
    while (now > seen && !max_active.compare_exchange_weak(seen, now)) {
    }
    for (int spin = 0; spin < 2000; ++spin) std::this_thread::yield();
    active.fetch_sub(1);
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 3 * ParallelismLevel(); ++t) {
    threads.emplace_back([&] { ParallelFor(64, 1, body); });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(max_active.load(), ParallelismLevel());
  EXPECT_GE(max_active.load(), 1);
}

}  // namespace
}  // namespace dmlserve

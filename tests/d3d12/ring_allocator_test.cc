// The offset arithmetic under the staging rings and the pool's size classes.

#include "kernels/d3d12/ring_allocator.h"

#include "gtest/gtest.h"
#include "kernels/d3d12/gpu_buffer_pool.h"

namespace dmlserve::d3d12 {
namespace {

TEST(RingAllocatorTest, AllocatesAlignedAndWrapsWhenTheTailIsFree) {
  RingAllocator ring(1024);
  EXPECT_EQ(ring.Allocate(100, 256), 0u);
  EXPECT_EQ(ring.Allocate(100, 256), 256u);
  EXPECT_EQ(ring.Allocate(300, 256), 512u);
  EXPECT_EQ(ring.Allocate(300, 256), std::nullopt);  // 812 + 300 > 1024, tail at 0
  EXPECT_TRUE(ring.Free(0));
  EXPECT_EQ(ring.Allocate(300, 256), std::nullopt);  // only [0, 256) is free
  EXPECT_EQ(ring.Allocate(200, 256), 0u);            // wraps
  EXPECT_EQ(ring.live_blocks(), 3u);
}

TEST(RingAllocatorTest, OutOfOrderFreesComeBackOnceOlderBlocksAreFree) {
  RingAllocator ring(1000);
  EXPECT_EQ(ring.Allocate(400, 1), 0u);
  EXPECT_EQ(ring.Allocate(400, 1), 400u);
  EXPECT_TRUE(ring.Free(400));  // the newer block finishes first
  EXPECT_EQ(ring.Allocate(400, 1), std::nullopt);
  EXPECT_TRUE(ring.Free(0));
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.Allocate(1000, 1), 0u);
  EXPECT_FALSE(ring.Free(123));
}

TEST(RingAllocatorTest, WrappedHeadStopsAtTheTail) {
  RingAllocator ring(1000);
  EXPECT_EQ(ring.Allocate(600, 1), 0u);
  EXPECT_EQ(ring.Allocate(300, 1), 600u);
  EXPECT_TRUE(ring.Free(0));
  EXPECT_EQ(ring.Allocate(500, 1), 0u);  // wrapped: [0, 500) below the tail at 600
  EXPECT_EQ(ring.Allocate(100, 1), 500u);
  EXPECT_EQ(ring.Allocate(1, 1), std::nullopt);  // head == tail: full
  EXPECT_TRUE(ring.Free(600));
  EXPECT_EQ(ring.Allocate(400, 1), 600u);  // tail moved to 0: [600, 1000) is free
  EXPECT_EQ(ring.Allocate(2000, 1), std::nullopt);
}

TEST(GpuBufferPoolSizeClassTest, FourClassesPerPowerOfTwo) {
  EXPECT_EQ(GpuBufferPool::SizeClass(1), 256u);
  EXPECT_EQ(GpuBufferPool::SizeClass(256), 256u);
  EXPECT_EQ(GpuBufferPool::SizeClass(257), 320u);
  EXPECT_EQ(GpuBufferPool::SizeClass(512), 512u);
  EXPECT_EQ(GpuBufferPool::SizeClass(513), 640u);
  EXPECT_EQ(GpuBufferPool::SizeClass(4000), 4096u);
  EXPECT_EQ(GpuBufferPool::SizeClass(4097), 5120u);
  for (uint64_t size = 1; size < (1u << 22); size = size * 3 + 1) {
    uint64_t size_class = GpuBufferPool::SizeClass(size);
    EXPECT_GE(size_class, size);
    EXPECT_LE(size_class, std::max<uint64_t>(256, size + size / 4 + 1)) << size;
  }
}

}  // namespace
}  // namespace dmlserve::d3d12

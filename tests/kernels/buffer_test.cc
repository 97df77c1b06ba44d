#include "kernels/core/buffer.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "gtest/gtest.h"
#include "kernels/core/buffer_pool.h"
#include "kernels/core/tensor.h"

namespace dmlserve {
namespace {

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % Buffer::kAlignment == 0; }

TEST(BufferTest, PooledBuffersAreAlignedWhateverTheSize) {
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{63}, size_t{4097}, size_t{70000}, size_t{3} << 20}) {
    std::shared_ptr<Buffer> buffer = Buffer::Uninitialized(size);
    EXPECT_TRUE(Aligned(buffer->data())) << size;
    EXPECT_EQ(buffer->size(), size);
    EXPECT_FALSE(buffer->adopted());
  }
}

TEST(BufferTest, ZeroedAndCopyHoldTheirContents) {
  // A released block comes back dirty: Zeroed must still clear it.
  {
    std::shared_ptr<Buffer> dirty = Buffer::Uninitialized(1 << 20);
    std::memset(dirty->data(), 0xab, dirty->size());
  }
  std::shared_ptr<Buffer> zeroed = Buffer::Zeroed(1 << 20);
  EXPECT_EQ(zeroed->view(), std::string(1 << 20, '\0'));
  std::shared_ptr<Buffer> copy = Buffer::Copy("hello");
  EXPECT_EQ(copy->view(), "hello");
}

TEST(BufferTest, AdoptUsesTheStringInPlaceAndReleasesIt) {
  std::string bytes(100000, 'x');
  const char* data = bytes.data();
  std::shared_ptr<Buffer> buffer = Buffer::Adopt(std::move(bytes));
  EXPECT_TRUE(buffer->adopted());
  EXPECT_EQ(buffer->data(), data) << "adopted bytes are not copied";
  std::string released = buffer->ReleaseString();
  EXPECT_EQ(released.data(), data) << "released bytes are not copied";
  EXPECT_EQ(buffer->size(), 0u);
}

TEST(BufferTest, BorrowUsesTheMemoryInPlaceAndHoldsItsOwnerToTheEnd) {
  auto memory = std::make_shared<std::string>(4096, 'y');
  std::weak_ptr<std::string> watch = memory;
  char* data = memory->data() + 256;
  std::shared_ptr<Buffer> buffer = Buffer::Borrow(data, 1024, std::move(memory));
  EXPECT_EQ(buffer->data(), data) << "borrowed bytes are not copied";
  EXPECT_EQ(buffer->size(), 1024u);
  EXPECT_FALSE(buffer->adopted());
  EXPECT_EQ(buffer->view(), std::string(1024, 'y'));
  EXPECT_FALSE(watch.expired()) << "the owner lives while the buffer does";
  buffer.reset();
  EXPECT_TRUE(watch.expired()) << "the owner goes with the last reference";
}

TEST(BufferPoolTest, ReleasedBlocksAreReusedUpToTheCap) {
  BufferPool pool(8 << 20);
  BufferPool::Block first = pool.Acquire(5 << 20);
  EXPECT_GE(first.capacity, size_t{5} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first.data) % BufferPool::kHugePageBytes, 0u);
  pool.Release(first);
  EXPECT_EQ(pool.stats().cached_bytes, first.capacity);
  // Same size class: the same block, already mapped.
  BufferPool::Block again = pool.Acquire((5 << 20) - 100);
  EXPECT_EQ(again.data, first.data);
  EXPECT_EQ(pool.stats().hits, 1u);
  // Two blocks over the 8 MiB cap: the second release unmaps.
  BufferPool::Block other = pool.Acquire(5 << 20);
  pool.Release(again);
  pool.Release(other);
  EXPECT_LE(pool.stats().cached_bytes, uint64_t{8} << 20);
  EXPECT_EQ(pool.stats().unmapped, 1u);
  EXPECT_EQ(pool.stats().in_use_bytes, 0u);
  pool.Trim();
  EXPECT_EQ(pool.stats().cached_bytes, 0u);
}

TEST(BufferPoolTest, ReleasedSmallBlocksAreReusedByAnyThread) {
  BufferPool pool(0);
  BufferPool::Block block = pool.Acquire(1000);
  EXPECT_EQ(block.capacity, 1024u);  // its power-of-two class
  EXPECT_TRUE(Aligned(block.data));
  std::memset(block.data, 0x5a, block.capacity);
  pool.Release(block);
  // The same class: that block, without the heap.
  BufferPool::Block again = pool.Acquire(600);
  EXPECT_EQ(again.data, block.data);
  EXPECT_EQ(again.capacity, 1024u);
  EXPECT_EQ(pool.stats().in_use_bytes, 0u) << "small blocks are not pooled blocks";

  // Released by another thread (a response sent elsewhere), reused here.
  std::thread([&pool, again] { pool.Release(again); }).join();
  BufferPool::Block reused = pool.Acquire(1024);
  EXPECT_EQ(reused.data, block.data);
  pool.Release(reused);

  // Between the largest class (32 KiB) and the pooled sizes: exact sizes.
  for (size_t size : {size_t{32} << 10, (size_t{32} << 10) + 1, BufferPool::kMinPooledBytes - 1}) {
    BufferPool::Block block = pool.Acquire(size);
    EXPECT_GE(block.capacity, size);
    EXPECT_LT(block.capacity, BufferPool::kMinPooledBytes);
    EXPECT_TRUE(Aligned(block.data));
    std::memset(block.data, 1, size);
    pool.Release(block);
  }
  EXPECT_EQ(pool.stats().misses, 0u);
  pool.Trim();  // frees the kept small blocks (the leak checkers would see them otherwise)
}

TEST(TensorTest, AllocateZeroFillsAndSharesByPointer) {
  Tensor tensor = Tensor::Allocate(DataType::kInt32, {3, 5});
  EXPECT_EQ(tensor.byte_size(), 60u);
  for (uint64_t i = 0; i < 15; ++i) EXPECT_EQ(tensor.data_as<int32_t>()[i], 0);
  Tensor alias = tensor;
  EXPECT_EQ(alias.bytes, tensor.bytes);
  EXPECT_EQ(alias.data(), tensor.data());
  Tensor output = Tensor::AllocateUninitialized(DataType::kFloat32, {1024, 1024});
  EXPECT_EQ(output.byte_size(), 4u << 20);
  EXPECT_TRUE(Aligned(output.data()));
}

}  // namespace
}  // namespace dmlserve

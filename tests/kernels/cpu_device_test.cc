#include "kernels/cpu/cpu_device.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "kernels/backend/execution_hints.h"
#include "tests/reference/random_operations.h"
#include "tests/reference/reference.h"

namespace dmlserve {
namespace {

TEST(CpuDeviceTest, FactoryNamesDevices) {
  const std::vector<std::unique_ptr<Device>> devices = CreateCpuDevices(3);
  ASSERT_EQ(devices.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const DeviceDescription& d = devices[i]->description();
    EXPECT_EQ(d.name, "cpu:" + std::to_string(i));
    EXPECT_EQ(d.backend, "cpu");
    EXPECT_FALSE(d.description.empty());
    EXPECT_FALSE(d.software);
    EXPECT_GE(devices[i]->max_inflight_batches(), 1);
  }
  EXPECT_TRUE(CreateCpuDevices(0).empty());
}

TEST(CpuDeviceTest, ExecutesAMixedBatchAndAllocatesOutputs) {
  reference::RandomOperationGenerator generator(21);
  std::vector<Operation> operations;
  for (int i = 0; i < 40; ++i) operations.push_back(generator.Next());
  // Holding the inputs here too keeps the device from scanning them in place.
  const std::vector<Operation> batch = operations;
  std::vector<WorkItem> items(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) items[i].operation = &batch[i];
  CpuDevice device(0);
  ASSERT_TRUE(device.Execute(absl::MakeSpan(items)).ok());
  for (size_t i = 0; i < items.size(); ++i) {
    SCOPED_TRACE(reference::Describe(operations[i]));
    ASSERT_TRUE(items[i].status.ok()) << items[i].status;
    if (const auto* scan = std::get_if<ScanOperation>(&operations[i])) {
      EXPECT_EQ(items[i].output.sizes, scan->input.sizes);
    } else {
      EXPECT_EQ(items[i].output.sizes,
                std::get<QuantizedMatMulOperation>(operations[i]).output_sizes);
    }
    EXPECT_TRUE(reference::CheckOutput(operations[i], items[i].output).ok())
        << reference::CheckOutput(operations[i], items[i].output);
  }
}

TEST(CpuDeviceTest, ItemWithoutOperationFailsAlone) {
  reference::RandomOperationGenerator generator(22);
  const Operation operation = generator.NextScan();
  const Operation in_batch = operation;  // shares the input: not scanned in place
  std::vector<WorkItem> items(2);
  items[1].operation = &in_batch;
  CpuDevice device(0);
  ASSERT_TRUE(device.Execute(absl::MakeSpan(items)).ok());
  EXPECT_FALSE(items[0].status.ok());
  EXPECT_TRUE(items[1].status.ok());
  EXPECT_TRUE(reference::CheckOutput(operation, items[1].output).ok());
}

// A matmul whose B is registered as `id` with `b_bytes` (K=3, N=2).
Operation MatMulWithRegisteredB(const std::string& id, std::shared_ptr<Buffer> b_bytes) {
  auto floats = [](float value) {
    Tensor tensor = Tensor::Allocate(DataType::kFloat32, {1, 1, 1, 1});
    std::memcpy(tensor.mutable_data(), &value, sizeof(value));
    return tensor;
  };
  QuantizedMatMulTensors t;
  t.a = Tensor::Allocate(DataType::kUint8, {2, 3});
  for (int i = 0; i < 6; ++i) t.a.mutable_data()[i] = static_cast<uint8_t>(i + 1);
  t.a_scale = floats(1.0f);
  t.b.data_type = DataType::kInt8;
  t.b.sizes = {3, 2};
  t.b.bytes = std::move(b_bytes);
  t.b.set_registered_id(id);
  t.b_scale = floats(1.0f);
  t.output_scale = floats(1.0f);
  absl::StatusOr<QuantizedMatMulOperation> op =
      MakeQuantizedMatMulOperation(std::move(t), DataType::kInt8);
  EXPECT_TRUE(op.ok()) << op.status();
  return *op;
}

Tensor ExecuteOne(Device& device, const Operation& operation) {
  std::vector<WorkItem> items(1);
  items[0].operation = &operation;
  EXPECT_TRUE(device.Execute(absl::MakeSpan(items)).ok());
  EXPECT_TRUE(items[0].status.ok()) << items[0].status;
  return items[0].output;
}

TEST(CpuDeviceTest, RegisteredBStaysPackedUntilEvicted) {
  const std::vector<std::unique_ptr<Device>> devices = CreateCpuDevices(2);
  Device& device = *devices[0];
  const Operation op = MatMulWithRegisteredB(
      "weights", Buffer::Copy(absl::string_view("\x01\x02\x03\x04\x05\x06", 6)));
  EXPECT_FALSE(device.IsResident("weights"));
  EXPECT_EQ(device.memory_bytes(), 0u);
  const Tensor first = ExecuteOne(device, op);
  EXPECT_TRUE(reference::CheckExact(reference::Compute(op), first).ok());
  EXPECT_TRUE(device.IsResident("weights"));
  EXPECT_TRUE(devices[1]->IsResident("weights")) << "CPU devices share one cache";
  EXPECT_GT(device.memory_bytes(), 0u);
  const Tensor again = ExecuteOne(device, op);
  EXPECT_TRUE(reference::CheckExact(first, again).ok());
  device.Evict("weights");
  EXPECT_FALSE(device.IsResident("weights"));
  EXPECT_EQ(device.memory_bytes(), 0u);
}

// An id released and registered again with other contents (without an
// Evict) must not be served from the stale packed copy.
TEST(CpuDeviceTest, ReusedRegisteredIdWithNewBytesIsRepacked) {
  CpuDevice device(0);
  auto old_bytes = Buffer::Copy(absl::string_view("\x01\x02\x03\x04\x05\x06", 6));
  const Operation old_op = MatMulWithRegisteredB("w", old_bytes);
  ExecuteOne(device, old_op);
  const Operation new_op =
      MatMulWithRegisteredB("w", Buffer::Copy(absl::string_view("\x07\x00\xf9\x01\x02\x03", 6)));
  const Tensor out = ExecuteOne(device, new_op);
  EXPECT_TRUE(reference::CheckExact(reference::Compute(new_op), out).ok())
      << reference::CheckExact(reference::Compute(new_op), out);
}

TEST(CpuDeviceTest, AScanOfAnInputNobodyElseHoldsRunsInPlace) {
  reference::RandomOperationGenerator generator(23);
  for (int i = 0; i < 40; ++i) {
    ScanOperation scan = generator.NextScan();
    // The reference reads a deep copy: the device may overwrite the input.
    ScanOperation original = scan;
    original.input.bytes = Buffer::Copy(scan.input.bytes->view());
    const Buffer* storage = scan.input.bytes.get();
    const Operation operation = std::move(scan);
    std::vector<WorkItem> items(1);
    items[0].operation = &operation;
    CpuDevice device(0);
    ASSERT_TRUE(device.Execute(absl::MakeSpan(items)).ok());
    SCOPED_TRACE(reference::Describe(original));
    ASSERT_TRUE(items[0].status.ok()) << items[0].status;
    EXPECT_EQ(items[0].output.bytes.get(), storage);
    EXPECT_TRUE(reference::CheckOutput(original, items[0].output).ok())
        << reference::CheckOutput(original, items[0].output);
  }
}

// On a busy gRPC thread (BusyCoresScope) the kernels run on the calling
// thread alone; the answers must not change by a bit, scans and products of
// every type and shape alike, large ones included (which the pool would split).
TEST(CpuDeviceTest, BusyCoresGiveTheSameAnswersOnTheCallingThread) {
  CpuDevice device(0);
  reference::RandomOperationGenerator generator(4242);
  generator.set_max_elements(1 << 18);
  for (int i = 0; i < 80; ++i) {
    const Operation operation = generator.Next();
    // A second holder of the input keeps the device from scanning in place
    // (which would change the input the second run reads).
    const Operation holder = operation;
    const Tensor pooled = ExecuteOne(device, operation);
    Tensor serial;
    {
      const BusyCoresScope busy(true);
      serial = ExecuteOne(device, operation);
    }
    ASSERT_TRUE(reference::CheckExact(pooled, serial).ok()) << i;
    ASSERT_TRUE(reference::CheckOutput(operation, serial).ok()) << i;
  }
}

TEST(CpuDeviceTest, ConcurrentBatches) {
  CpuDevice device(0);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      reference::RandomOperationGenerator generator(100 + t);
      generator.set_max_elements(20000);
      for (int round = 0; round < 10; ++round) {
        std::vector<Operation> operations;
        for (int i = 0; i < 4; ++i) operations.push_back(generator.Next());
        const std::vector<Operation> batch = operations;  // inputs kept intact
        std::vector<WorkItem> items(batch.size());
        for (size_t i = 0; i < batch.size(); ++i) items[i].operation = &batch[i];
        if (!device.Execute(absl::MakeSpan(items)).ok()) failures++;
        for (size_t i = 0; i < items.size(); ++i) {
          if (!items[i].status.ok() || !reference::CheckOutput(operations[i], items[i].output).ok())
            failures++;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace dmlserve

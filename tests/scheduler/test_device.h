#ifndef DMLSERVE_TESTS_SCHEDULER_TEST_DEVICE_H_
#define DMLSERVE_TESTS_SCHEDULER_TEST_DEVICE_H_

// A Device for scheduler tests: a real (if slow and simple) implementation of
// the interface whose timing and failures the test controls. It computes scans
// with a plain reference loop, answers matrix multiplies with a zero-filled
// output of the right shape, records every batch it is handed, can hold
// batches until released, and can fail on demand.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "kernels/backend/device.h"
#include "kernels/backend/execution_hints.h"
#include "kernels/core/operation.h"
#include "kernels/core/overloaded.h"
#include "kernels/core/tensor.h"
#include "scheduler/device_pool.h"
#include "tests/reference/reference.h"

namespace dmlserve::testing {

class TestDevice : public Device {
 public:
  explicit TestDevice(std::string name, int max_inflight_batches = 1)
      : max_inflight_batches_(max_inflight_batches) {
    description_.name = std::move(name);
    description_.backend = "test";
    description_.description = "scheduler test device";
  }

  const DeviceDescription& description() const override { return description_; }
  // Every operator, unless ServeOnly said otherwise.
  bool Supports(OperatorKind kind) const override {
    return serves_only_.empty() ||
           std::find(serves_only_.begin(), serves_only_.end(), kind) != serves_only_.end();
  }
  // Makes this device run only `kinds`; before the scheduler starts.
  void ServeOnly(std::vector<OperatorKind> kinds) { serves_only_ = std::move(kinds); }
  int max_inflight_batches() const override { return max_inflight_batches_; }
  bool MayRunOnCallerThread(const Operation&) const override {
    absl::MutexLock lock(&mu_);
    return run_on_caller_thread_;
  }
  int PreferredCompany(const Operation&) const override {
    absl::MutexLock lock(&mu_);
    return preferred_company_;
  }

  absl::Status Execute(absl::Span<WorkItem> items) override {
    std::vector<Operation> batch;
    for (const WorkItem& item : items) batch.push_back(*item.operation);
    {
      absl::MutexLock lock(&mu_);
      ++entered_;
      attempted_.push_back(batch);
      threads_.push_back(std::this_thread::get_id());
      busy_cores_.push_back(BusyCoresScope::Active());
      changed_.SignalAll();
      while (held_) changed_.Wait(&mu_);
      if (failures_left_ > 0) {
        --failures_left_;
        return absl::InternalError(absl::StrCat(description_.name, ": device lost"));
      }
      executed_.push_back(batch);
    }
    for (WorkItem& item : items) {
      item.output =
          std::visit(Overloaded{
                         [](const ScanOperation& scan) { return reference::ComputeScan(scan); },
                         [](const QuantizedMatMulOperation& matmul) {
                           return Tensor::Allocate(matmul.output_data_type, matmul.output_sizes);
                         },
                     },
                     *item.operation);
    }
    return absl::OkStatus();
  }

  bool IsResident(absl::string_view registered_id) const override {
    absl::MutexLock lock(&mu_);
    return resident_.count(std::string(registered_id)) > 0;
  }
  void Evict(absl::string_view registered_id) override {
    absl::MutexLock lock(&mu_);
    evicted_.emplace_back(registered_id);
    resident_.erase(std::string(registered_id));
  }
  uint64_t memory_bytes() const override { return 4096; }

  // Fails (as a device that cannot come back) until RecoverWith() says
  // otherwise; counts the probes.
  absl::Status Recover() override {
    absl::MutexLock lock(&mu_);
    ++recover_calls_;
    return recover_result_;
  }
  void RecoverWith(absl::Status result) {
    absl::MutexLock lock(&mu_);
    recover_result_ = std::move(result);
  }
  int recover_calls() const {
    absl::MutexLock lock(&mu_);
    return recover_calls_;
  }

  // Whether MayRunOnCallerThread says yes (to every operation).
  void RunOnCallerThread(bool yes) {
    absl::MutexLock lock(&mu_);
    run_on_caller_thread_ = yes;
  }

  // What PreferredCompany says (for every operation).
  void PreferCompany(int jobs) {
    absl::MutexLock lock(&mu_);
    preferred_company_ = jobs;
  }

  // Batches entering Execute wait until Release().
  void Hold() {
    absl::MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
    changed_.SignalAll();
  }
  // Blocks until `count` batches have entered Execute (held or not).
  // Batches that entered Execute so far.
  int entered() const {
    absl::MutexLock lock(&mu_);
    return entered_;
  }
  void AwaitEntered(int count) {
    absl::MutexLock lock(&mu_);
    while (entered_ < count) changed_.Wait(&mu_);
  }
  // The next `count` batches fail as a lost device would.
  void FailNext(int count) {
    absl::MutexLock lock(&mu_);
    failures_left_ = count;
  }
  void MakeResident(const std::string& registered_id) {
    absl::MutexLock lock(&mu_);
    resident_.insert(registered_id);
  }

  // Every batch handed to Execute, and those that ran successfully.
  std::vector<std::vector<Operation>> attempted() const {
    absl::MutexLock lock(&mu_);
    return attempted_;
  }
  std::vector<std::vector<Operation>> executed() const {
    absl::MutexLock lock(&mu_);
    return executed_;
  }
  // The thread that entered Execute, per attempted batch.
  std::vector<std::thread::id> threads() const {
    absl::MutexLock lock(&mu_);
    return threads_;
  }
  // BusyCoresScope::Active() as Execute saw it, per attempted batch.
  std::vector<bool> busy_cores() const {
    absl::MutexLock lock(&mu_);
    return busy_cores_;
  }
  std::vector<std::string> evicted() const {
    absl::MutexLock lock(&mu_);
    return evicted_;
  }

 private:
  std::vector<OperatorKind> serves_only_;
  DeviceDescription description_;
  const int max_inflight_batches_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // entered_ or held_ changed
  absl::Status recover_result_ ABSL_GUARDED_BY(mu_) =
      absl::UnimplementedError("this test device cannot recover");
  int recover_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  bool run_on_caller_thread_ ABSL_GUARDED_BY(mu_) = false;
  int preferred_company_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> busy_cores_ ABSL_GUARDED_BY(mu_);
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  int failures_left_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> resident_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> evicted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<Operation>> attempted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<Operation>> executed_ ABSL_GUARDED_BY(mu_);
};

// A DevicePool of test devices ("p0".. primaries, then "f0".. fallbacks),
// each running `inflight` batches; a device given a `serve_only` entry runs
// only those operators. Keeps pointers to the devices.
struct TestDevicePool {
  explicit TestDevicePool(int primaries, int fallbacks = 0, int inflight = 1,
                          std::vector<std::vector<OperatorKind>> serve_only = {}) {
    std::vector<std::unique_ptr<Device>> primary, fallback;
    for (int i = 0; i < primaries + fallbacks; ++i) {
      auto device = std::make_unique<TestDevice>(
          i < primaries ? absl::StrCat("p", i) : absl::StrCat("f", i - primaries), inflight);
      if (i < static_cast<int>(serve_only.size())) device->ServeOnly(serve_only[i]);
      devices.push_back(device.get());
      (i < primaries ? primary : fallback).push_back(std::move(device));
    }
    pool = std::make_unique<DevicePool>(std::move(primary), std::move(fallback));
  }
  DevicePool::Slot& slot(int i) { return pool->at(i); }

  std::vector<TestDevice*> devices;
  std::unique_ptr<DevicePool> pool;
};

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_SCHEDULER_TEST_DEVICE_H_

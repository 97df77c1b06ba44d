// libFuzzer target: an ExecuteRequest as it arrives off the wire, decoded and
// validated as the server does, then, when valid and small enough to run
// quickly, computed by the CPU backend (registered-tensor references resolve
// against a registry holding one small tensor). Any crash, sanitizer report
// or leak is a bug: every input must end in a result or an error status.
//
//   scripts/fuzz.sh SECONDS    (builds and runs every fuzz target)

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "dmlserve/v1/dmlserve.pb.h"
#include "kernels/backend/device.h"
#include "kernels/core/operation.h"
#include "kernels/cpu/cpu_device.h"
#include "server/request_decoder.h"
#include "server/tensor_registry.h"

namespace {

using dmlserve::Operation;

// Runs in a few milliseconds at most: bounds on what one input may compute.
bool SmallEnough(const Operation& operation) {
  if (dmlserve::OperationBytes(operation) > (uint64_t{1} << 20)) return false;
  if (const auto* matmul = std::get_if<dmlserve::QuantizedMatMulOperation>(&operation)) {
    const uint64_t products = uint64_t{matmul->batch} * matmul->channel * matmul->m * matmul->n;
    return products <= (uint64_t{1} << 20) && products * matmul->k <= (uint64_t{1} << 24);
  }
  return true;
}

dmlserve::TensorRegistry& Registry() {
  static dmlserve::TensorRegistry* registry = [] {
    auto* tensors = new dmlserve::TensorRegistry(uint64_t{1} << 20, nullptr);
    dmlserve::Tensor weights = dmlserve::Tensor::Allocate(dmlserve::DataType::kInt8, {2, 3});
    for (int i = 0; i < 6; ++i) weights.mutable_data_as<int8_t>()[i] = static_cast<int8_t>(i - 3);
    (void)tensors->Register("w", weights);
    return tensors;
  }();
  return *registry;
}

dmlserve::Device& Cpu() {
  static std::unique_ptr<dmlserve::Device> cpu = [] {
    std::vector<std::unique_ptr<dmlserve::Device>> devices = dmlserve::CreateCpuDevices(1);
    return std::move(devices.front());
  }();
  return *cpu;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dmlserve::v1::ExecuteRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<Operation> operation =
      dmlserve::DecodeExecuteRequest(&request, Registry(), uint64_t{1} << 20);
  if (!operation.ok() || !SmallEnough(*operation)) return 0;
  std::vector<dmlserve::WorkItem> items(1);
  items[0].operation = &*operation;
  if (!Cpu().Execute(absl::MakeSpan(items)).ok()) __builtin_trap();  // the CPU never fails
  if (items[0].status.ok() && items[0].output.bytes == nullptr) __builtin_trap();
  return 0;
}

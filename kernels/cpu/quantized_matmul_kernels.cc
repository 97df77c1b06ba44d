#include "kernels/cpu/quantized_matmul_kernels.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_driver.h"
#include "kernels/cpu/qgemm_rows.h"

namespace dmlserve {
namespace {

bool SameBytes(const Tensor& x, const Tensor& y) {
  if (x.data_type != y.data_type || x.sizes != y.sizes) return false;
  if (x.bytes == y.bytes) return true;
  return x.byte_size() == y.byte_size() &&
         (x.byte_size() == 0 || std::memcmp(x.data(), y.data(), x.byte_size()) == 0);
}

bool HasSharedB(const QuantizedMatMulOperation& op) { return op.b_batch == 1 && op.b_channel == 1; }

bool SameB(const QuantizedMatMulOperation& x, const QuantizedMatMulOperation& y) {
  return x.k == y.k && x.n == y.n && x.b_quantization == y.b_quantization && SameBytes(x.b, y.b) &&
         SameBytes(x.b_scale, y.b_scale) && SameBytes(x.b_zero_point, y.b_zero_point);
}

// An operation whose B has several slices: each B slice is packed once and
// multiplied with every A slice it pairs with.
absl::Status ComputeBatchedB(const CpuKernels& cpu, const QuantizedMatMulOperation& op,
                             Tensor& output, PackedBCache* cache,
                             absl::FunctionRef<absl::Status()> stop) {
  for (uint32_t bb = 0; bb < op.b_batch; ++bb) {
    for (uint32_t bc = 0; bc < op.b_channel; ++bc) {
      QGemmRowList rows;
      // The output slices this B slice makes: every batch (channel) when B
      // broadcasts over them, else only its own. (Testing each pair instead
      // costs batch x channel per B slice: 68G steps for {4096,1} x {1,4096}.)
      const uint32_t first_batch = op.b_batch == 1 ? 0 : bb;
      const uint32_t end_batch = op.b_batch == 1 ? op.batch : bb + 1;
      const uint32_t first_channel = op.b_channel == 1 ? 0 : bc;
      const uint32_t end_channel = op.b_channel == 1 ? op.channel : bc + 1;
      for (uint32_t batch = first_batch; batch < end_batch; ++batch) {
        for (uint32_t channel = first_channel; channel < end_channel; ++channel) {
          const uint64_t a_slice = uint64_t{op.a_batch == 1 ? 0 : batch} * op.a_channel +
                                   (op.a_channel == 1 ? 0 : channel);
          rows.Add(op, a_slice, output, uint64_t{batch} * op.channel + channel);
        }
      }
      if (absl::Status status =
              RunQGemm(cpu, op, uint64_t{bb} * op.b_channel + bc, cache, rows, stop);
          !status.ok()) {
        return status;
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<absl::Status> ComputeQuantizedMatMuls(
    absl::Span<const QuantizedMatMulOperation* const> ops, absl::Span<Tensor* const> outputs,
    PackedBCache* cache, const CpuKernels* kernels, absl::Span<const WorkStopCheck* const> stops) {
  const CpuKernels& cpu = kernels != nullptr ? *kernels : SelectedCpuKernels();
  std::vector<absl::Status> statuses(ops.size());
  auto stop_of = [&](size_t i) -> absl::Status {
    if (i >= stops.size() || stops[i] == nullptr) return absl::OkStatus();
    return stops[i]->Check();
  };
  std::vector<bool> done(ops.size(), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    if (done[i]) continue;
    const QuantizedMatMulOperation& op = *ops[i];
    if (!HasSharedB(op)) {
      statuses[i] = ComputeBatchedB(cpu, op, *outputs[i], cache, [&] { return stop_of(i); });
      continue;
    }
    // With one B slice, every A slice of every operation that shares this B
    // is just more rows of one product.
    QGemmRowList rows;
    std::vector<size_t> members;
    for (size_t j = i; j < ops.size(); ++j) {
      if (done[j] || !HasSharedB(*ops[j]) || (j != i && !SameB(op, *ops[j]))) continue;
      done[j] = true;
      members.push_back(j);
      const QuantizedMatMulOperation& member = *ops[j];
      const uint64_t slices = uint64_t{member.a_batch} * member.a_channel;
      for (uint64_t slice = 0; slice < slices; ++slice) {
        rows.Add(member, slice, *outputs[j], slice);
      }
    }
    // The shared product stops early only when none of its members wants it;
    // each then reports what its own check said.
    std::vector<absl::Status> member_statuses(members.size());
    const absl::Status stopped = RunQGemm(cpu, op, 0, cache, rows, [&]() -> absl::Status {
      for (size_t x = 0; x < members.size(); ++x) {
        member_statuses[x] = stop_of(members[x]);
        if (member_statuses[x].ok()) return absl::OkStatus();
      }
      return member_statuses[0];
    });
    if (!stopped.ok()) {
      for (size_t x = 0; x < members.size(); ++x) statuses[members[x]] = member_statuses[x];
    }
  }
  return statuses;
}

}  // namespace dmlserve

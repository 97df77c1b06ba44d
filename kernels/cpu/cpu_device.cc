#include "kernels/cpu/cpu_device.h"

#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "kernels/backend/execution_hints.h"
#include "kernels/core/overloaded.h"
#include "kernels/core/parallel_for.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/quantized_matmul_kernels.h"
#include "kernels/cpu/scan_kernels.h"

namespace dmlserve {
namespace {

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        return std::string(absl::StripAsciiWhitespace(absl::string_view(line).substr(colon + 1)));
      }
    }
  }
  return "embedded CPU backend";
}

}  // namespace

CpuDevice::CpuDevice(int index, std::shared_ptr<PackedBCache> cache)
    : cache_(cache != nullptr ? std::move(cache)
                              : std::make_shared<PackedBCache>(kDefaultPackedCacheBytes)) {
  description_.name = absl::StrCat("cpu:", index);
  description_.backend = "cpu";
  // Where the CPU runs below what it has (AMX tiles the OS refused), the
  // description says why: it is in the start-up log and in GetServerInfo.
  const absl::string_view note = CpuIsaNote();
  description_.description = absl::StrCat(CpuModelName(), " (", ParallelismLevel(), " threads, ",
                                          SelectedCpuKernels().qgemm->name, " kernels",
                                          note.empty() ? "" : "; ", note, ")");
  description_.software = false;
}

// Below these a job is cheaper to run on the thread that received it than to
// hand to a device thread: a hand-off (wake a sleeping worker, switch, answer
// from there) costs tens of microseconds on a loaded 2-core machine, while a
// 64 KiB scan takes 2-5 µs and 4 Mi multiply-adds a few more. An inline B is
// packed first, so it counts as bytes too; a registered one is packed once.
// Jobs that queue behind such a job fuse into a batch on that same thread
// (Scheduler::Impl::RunOnCaller), so this does not stop batching.
constexpr uint64_t kCallerThreadBytes = uint64_t{64} << 10;
constexpr uint64_t kCallerThreadMultiplyAdds = uint64_t{4} << 20;

bool CpuDevice::MayRunOnCallerThread(const Operation& operation) const {
  return std::visit(
      Overloaded{
          [](const ScanOperation& scan) { return scan.input.byte_size() <= kCallerThreadBytes; },
          [](const QuantizedMatMulOperation& matmul) {
            const uint64_t multiply_adds =
                uint64_t{matmul.batch} * matmul.channel * matmul.m * matmul.k * matmul.n;
            return multiply_adds <= kCallerThreadMultiplyAdds &&
                   (!matmul.b.registered_id().empty() ||
                    matmul.b.byte_size() <= kCallerThreadBytes);
          },
      },
      operation);
}

// A B at least this large does not stay in a core's cache between batches
// (Zen 4 and recent Intel cores have 1-2 MiB of L2, shared with gRPC's
// buffers), so each batch streams it again; jobs of at most kFewRows rows get
// little of that cost back from their own arithmetic.
constexpr uint64_t kStreamedBBytes = uint64_t{256} << 10;
constexpr uint64_t kFewRows = 4;
// Rows a batch should gather. Streaming a B from memory costs about 7 times
// one row's arithmetic on it whatever its size (1 MiB: ~10 us against ~1.5
// us), so 16 rows bring the streaming below half the arithmetic. Measured
// with 64 clients sharing a 1 MiB B (docs/benchmarks.md): 8 gathers more
// batches than needed, and each held batch costs a worker wake-up.
constexpr int kCompanyForStreamedB = 16;

int CpuDevice::PreferredCompany(const Operation& operation) const {
  return std::visit(
      Overloaded{
          [](const ScanOperation&) { return 0; },  // nothing shared to stream
          [](const QuantizedMatMulOperation& matmul) {
            const uint64_t rows = uint64_t{matmul.batch} * matmul.channel * matmul.m;
            const uint64_t b_bytes = uint64_t{matmul.k} * matmul.n;
            return rows <= kFewRows && b_bytes >= kStreamedBBytes ? kCompanyForStreamedB : 0;
          },
      },
      operation);
}

absl::Status CpuDevice::Execute(absl::Span<WorkItem> items) {
  // On a busy gRPC thread (see BusyCoresScope) the kernels stay on it.
  std::optional<SerialParallelForScope> serial;
  if (BusyCoresScope::Active()) serial.emplace();
  std::vector<const QuantizedMatMulOperation*> matmuls;
  std::vector<Tensor*> matmul_outputs;
  std::vector<const WorkStopCheck*> matmul_stops;
  std::vector<WorkItem*> matmul_items;
  for (WorkItem& item : items) {
    if (item.operation == nullptr) {
      item.status = absl::InvalidArgumentError("work item has no operation");
      continue;
    }
    std::visit(Overloaded{
                   [&](const ScanOperation& scan) {
                     if (scan.input.bytes != nullptr && scan.input.bytes.use_count() == 1) {
                       // Nobody else holds the input (it is the request's own bytes): scan in
                       // place (see ComputeScan). The scheduler drops the operation before
                       // answering, so the output then owns the request's string and the
                       // response takes it without a copy or a fresh allocation.
                       item.output = scan.input;
                     } else {
                       // Kernels overwrite every output byte: pooled, never zero-filled.
                       item.output =
                           Tensor::AllocateUninitialized(scan.input.data_type, scan.input.sizes);
                     }
                     ComputeScan(scan, item.output);
                     item.status = absl::OkStatus();
                   },
                   [&](const QuantizedMatMulOperation& matmul) {
                     // Computed together below: one product per B, rows fused.
                     item.output = Tensor::AllocateUninitialized(matmul.output_data_type,
                                                                 matmul.output_sizes);
                     matmuls.push_back(&matmul);
                     matmul_outputs.push_back(&item.output);
                     matmul_stops.push_back(item.stop);
                     matmul_items.push_back(&item);
                   },
               },
               *item.operation);
  }
  if (!matmuls.empty()) {
    std::vector<absl::Status> statuses =
        ComputeQuantizedMatMuls(matmuls, matmul_outputs, cache_.get(), nullptr, matmul_stops);
    for (size_t i = 0; i < matmul_items.size(); ++i) {
      matmul_items[i]->status = std::move(statuses[i]);
      if (!matmul_items[i]->status.ok()) matmul_items[i]->output = Tensor();  // incomplete
    }
  }
  return absl::OkStatus();
}

bool CpuDevice::IsResident(absl::string_view registered_id) const {
  return cache_->Contains(registered_id);
}

void CpuDevice::Evict(absl::string_view registered_id) { cache_->Evict(registered_id); }

uint64_t CpuDevice::memory_bytes() const { return cache_->memory_bytes(); }
// Everything the CPU device holds is packed registered weights.
uint64_t CpuDevice::resident_bytes() const { return cache_->memory_bytes(); }

std::vector<std::unique_ptr<Device>> CreateCpuDevices(int count) {
  std::vector<std::unique_ptr<Device>> devices;
  auto cache = std::make_shared<PackedBCache>(CpuDevice::kDefaultPackedCacheBytes);
  for (int i = 0; i < count; ++i) devices.push_back(std::make_unique<CpuDevice>(i, cache));
  return devices;
}

}  // namespace dmlserve

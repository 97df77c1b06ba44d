#include "kernels/cpu/qgemm_task.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "kernels/core/check.h"
#include "kernels/cpu/requantize.h"

namespace dmlserve {
namespace {

// Scratch memory, grown on demand and kept: a task's buffers are reused by
// later tasks instead of being allocated (and page-faulted) again.
class Scratch {
 public:
  template <typename T>
  T* Get(size_t count) {
    const size_t bytes = count * sizeof(T);
    if (bytes > size_) {
      data_ = AllocateAligned(bytes);
      size_ = bytes;
    }
    return reinterpret_cast<T*>(data_.get());
  }

 private:
  AlignedBytes data_;
  size_t size_ = 0;
};

struct TaskScratch {
  Scratch tile, b_panel, repacked_b, row_sums, column_sums, corrections, column_offsets,
      multipliers;
};

// The scratch of a running task, lent from a process-wide free list and
// given back when the task ends: as many exist as tasks ever ran at once.
// Not thread_local objects: their destructors run as threads exit, inside
// the Windows loader lock with mingw-w64, where they hung the service's
// worker threads (and so the scheduler's shutdown) under wine.
class ScratchLease {
 public:
  ScratchLease() {
    {
      std::lock_guard<std::mutex> lock(FreeListMutex());
      std::vector<TaskScratch*>& free = FreeList();
      if (!free.empty()) {
        scratch_ = free.back();
        free.pop_back();
      }
    }
    if (scratch_ == nullptr) scratch_ = new TaskScratch;
  }
  ~ScratchLease() {
    std::lock_guard<std::mutex> lock(FreeListMutex());
    FreeList().push_back(scratch_);
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;

  TaskScratch& operator*() const { return *scratch_; }

 private:
  // Never destroyed: tasks may run while the process exits.
  static std::mutex& FreeListMutex() {
    static auto* mutex = new std::mutex;
    return *mutex;
  }
  static std::vector<TaskScratch*>& FreeList() {
    static auto* free = new std::vector<TaskScratch*>;
    return *free;
  }

  TaskScratch* scratch_ = nullptr;
};

// za' of a row: its zero point shifted like A' (see qgemm_ukernel.h), unless
// an INT8 A is read as is (PackedA::raw_signed).
int32_t ShiftedZeroPoint(const QGemmRow& job, const PackedA& a) {
  return job.a_zero_point + (job.a_signed && !a.raw_signed ? 128 : 0);
}

// Where a task's row sums of A' come from (the corrections need them, see
// qgemm_ukernel.h): PackA computed them (a.row_sums), or the micro-kernel did
// as the row-sum column of B (N not a multiple of 16, and the column is in
// this task), or SumTaskRows sums them.
struct TaskRowSums {
  const int32_t* summed = nullptr;  // rows entries, when summed here
  bool from_tile = false;
  size_t tile_column = 0;  // with from_tile: the row-sum column in the tile

  int32_t Of(const QGemmTask& task, const int32_t* tile, size_t ldc, size_t i) const {
    if (from_tile) return tile[i * ldc + tile_column];
    return summed != nullptr ? summed[i] : task.a->row_sums[task.row0 + i];
  }
};

// Sums the task's rows of A' if neither PackA nor the micro-kernel will:
// whole rows in one sequential pass (which the prefetchers follow), leaving
// the task's rows in L2 for the micro-kernel.
TaskRowSums SumTaskRows(const QGemmTask& task, size_t ldc, TaskScratch& scratch) {
  const PackedA& a = *task.a;
  const QGemmUkernel& kernel = *task.kernel;
  TaskRowSums sums;
  const size_t sum_column = RowSumColumn(task.b->source.n);
  sums.from_tile = a.row_sums.empty() && sum_column != kNoRowSumColumn &&
                   sum_column >= task.column0 && sum_column < task.column0 + ldc;
  sums.tile_column = sum_column - task.column0;
  if (a.row_sums.empty() && !sums.from_tile) {
    int32_t* summed = scratch.row_sums.Get<int32_t>(task.rows);
    for (size_t i = 0; i < task.rows; ++i) {
      const size_t block = (task.row0 + i) / kernel.mr * kernel.mr;
      const uint8_t* row = a.rows(block) + (task.row0 + i - block) * a.stride;
      summed[i] =
          a.raw_signed ? SumSignedBytes(row, a.k, *task.cpu) : SumBytes(row, a.k, *task.cpu);
    }
    sums.summed = summed;
  }
  return sums;
}

// tile (task.rows x ldc int32, ldc = the task's strips x 16) = the task's
// rows of A' times its columns of B', depth block by depth block. A B not
// packed whole is packed here a panel at a time, its column sums added to
// column_sums (ldc entries, zeroed by the caller).
void MultiplyIntoTile(const QGemmTask& task, TaskScratch& scratch, int32_t* tile, size_t ldc,
                      int32_t* column_sums) {
  const CpuKernels& cpu = *task.cpu;
  const PackedA& a = *task.a;
  // An INT8 A read as is goes to the kernel's variant for it (PackA chose so).
  const QGemmUkernel& kernel = a.raw_signed ? *task.kernel->signed_a : *task.kernel;
  const QGemmBOperand& b = *task.b;
  const size_t row0 = task.row0, rows = task.rows;
  const size_t strips = ldc / kQGemmStripColumns;
  const size_t blocks = (rows + kernel.mr - 1) / kernel.mr;
  const size_t strip0 = task.column0 / kQGemmStripColumns;
  const size_t block_quads = task.depth_block / 4;
  const size_t total_quads = (a.k + 3) / 4;
  for (size_t q0 = 0; q0 < total_quads; q0 += block_quads) {
    const size_t quads = std::min(block_quads, total_quads - q0);
    const int8_t* panel = nullptr;  // B's strips, when the kernel reads them
    size_t strip_stride = 0;
    if (b.repacked != nullptr) {
      // Read below, repacked (the strips themselves may not exist).
    } else if (b.packed != nullptr) {
      strip_stride = b.packed->strip_stride();
      panel = b.packed->strip(strip0) + q0 * kQGemmQuadBytes;
    } else {
      strip_stride = (quads + 1) * kQGemmQuadBytes;  // see PackedB::strip_stride
      int8_t* buffer = scratch.b_panel.Get<int8_t>(strips * strip_stride);
      PackBPanel({b.source, q0, quads, strip0, strips, buffer, strip_stride, column_sums}, cpu);
      panel = buffer;
    }
    // One strip (N <= 16): the narrow path (see qgemm_ukernel.h), but for
    // single rows, which have nothing to share a broadcast with.
    if (b.narrow != nullptr) {
      const int8_t* narrow_panel = b.narrow + q0 * kQGemmQuadBytes;
      for (size_t block = 0; block < blocks; ++block) {
        const size_t first = block * kernel.mr;
        const int block_rows = static_cast<int>(std::min<size_t>(kernel.mr, rows - first));
        const uint8_t* block_a = a.rows(row0 + first) + q0 * QGemmAQuadBytes(kernel);
        if (block_rows >= 2) {
          kernel.narrow(quads, block_a, a.stride, block_rows, narrow_panel, tile + first * ldc, ldc,
                        q0 > 0);
        } else {
          kernel.fn(quads, block_a, a.stride, 1, panel, strip_stride, 1, tile + first * ldc, ldc,
                    q0 > 0);
        }
      }
      continue;
    }
    // One call: row block `block` times the strip group from strip s.
    auto call = [&](size_t block, size_t s, const int8_t* micro_panel) {
      const size_t first = block * kernel.mr;
      const int block_rows = static_cast<int>(std::min<size_t>(kernel.mr, rows - first));
      const int group = static_cast<int>(std::min<size_t>(kernel.max_strips, strips - s));
      kernel.fn(quads, a.rows(row0 + first) + q0 * QGemmAQuadBytes(kernel), a.stride, block_rows,
                micro_panel, strip_stride, group, tile + first * ldc + s * kQGemmStripColumns, ldc,
                q0 > 0);
    };
    if (kernel.blocking.row_blocks_outer) {
      // A call's rows of A stay in L1 while every strip group passes over
      // them (a kernel that repacks B does not block so: see QGemmBlocking).
      DMLSERVE_DCHECK(b.repacked == nullptr && kernel.repack_b == nullptr);
      for (size_t block = 0; block < blocks; ++block) {
        for (size_t s = 0; s < strips; s += kernel.max_strips) {
          call(block, s, panel + s * strip_stride);
        }
      }
      continue;
    }
    // Strip groups outside, row blocks inside: one micro-panel of B stays in
    // L1/L2 while every row block of the task passes over it.
    for (size_t s = 0; s < strips; s += kernel.max_strips) {
      const int8_t* micro_panel = panel + s * strip_stride;
      if (b.repacked != nullptr) {  // one strip per call (see qgemm_ukernel.h)
        micro_panel =
            b.repacked + (strip0 + s) * b.repacked_strip_stride + q0 * kernel.repacked_quad_bytes;
      } else if (kernel.repack_b != nullptr) {
        int8_t* repacked = scratch.repacked_b.Get<int8_t>(quads * kernel.repacked_quad_bytes);
        kernel.repack_b(micro_panel, quads, repacked);
        micro_panel = repacked;
      }
      for (size_t block = 0; block < blocks; ++block) call(block, s, micro_panel);
    }
  }
}

// Turns tile (see MultiplyIntoTile) into the task's outputs: adds the
// zero-point corrections (from B's packed copy, or from column_sums when B
// was packed panel by panel) and requantizes each row into its output.
void RequantizeTile(const QGemmTask& task, TaskScratch& scratch, const int32_t* tile, size_t ldc,
                    const TaskRowSums& row_sums, const int32_t* column_sums) {
  const CpuKernels& cpu = *task.cpu;
  const QGemmBOperand& b = *task.b;
  const std::vector<QGemmRow>& jobs = *task.jobs;
  const size_t row0 = task.row0, rows = task.rows, column0 = task.column0, columns = task.columns;
  const int32_t* corrections;
  const int32_t* zero_points = b.columns->zero_points.data() + column0;
  if (b.packed != nullptr) {
    corrections = b.packed->corrections.data() + column0;
  } else {
    int32_t* computed = scratch.corrections.Get<int32_t>(columns);
    for (size_t j = 0; j < columns; ++j) {
      computed[j] = static_cast<int32_t>(static_cast<uint32_t>(column_sums[j]) -
                                         static_cast<uint32_t>(b.source.k) *
                                             static_cast<uint32_t>(zero_points[j]));
    }
    corrections = computed;
  }
  double* multipliers = scratch.multipliers.Get<double>(columns);
  int32_t* column_offsets = scratch.column_offsets.Get<int32_t>(columns);
  const float* column_scales = b.columns->scales.data() + column0;
  const bool uniform_zero_point = b.columns->uniform_zero_point;
  float a_scale = 0, output_scale = 0;
  int32_t a_zero_point = 0;
  for (size_t i = 0; i < rows; ++i) {
    const QGemmRow& job = jobs[task.job0 + row0 + i];
    const int32_t row_sum = row_sums.Of(task, tile, ldc, i);
    // Per-tensor scales and zero points (the common case) give every row the
    // same multipliers and column offsets: computed once per task.
    if (i == 0 || job.a_scale != a_scale || job.output_scale != output_scale) {
      a_scale = job.a_scale;
      output_scale = job.output_scale;
      cpu.compute_multipliers(a_scale, output_scale, column_scales, columns, multipliers);
    }
    if (i == 0 || !uniform_zero_point || ShiftedZeroPoint(job, *task.a) != a_zero_point) {
      a_zero_point = ShiftedZeroPoint(job, *task.a);
      ComputeColumnOffsets(a_zero_point, corrections, uniform_zero_point ? nullptr : zero_points,
                           row_sum, columns, column_offsets);
    }
    const int32_t row_offset = uniform_zero_point
                                   ? static_cast<int32_t>(static_cast<uint32_t>(zero_points[0]) *
                                                          static_cast<uint32_t>(row_sum))
                                   : 0;
    cpu.requantize_row(tile + i * ldc, row_offset, column_offsets, multipliers,
                       RowRequantization{job.output_zero_point, job.low, job.high}, columns,
                       job.out + column0);
  }
}

}  // namespace

void RunQGemmTask(const QGemmTask& task) {
  const ScratchLease lease;
  TaskScratch& scratch = *lease;
  const size_t strips = (task.columns + kQGemmStripColumns - 1) / kQGemmStripColumns;
  const size_t ldc = strips * kQGemmStripColumns;
  int32_t* tile = scratch.tile.Get<int32_t>(task.rows * ldc);
  const TaskRowSums row_sums = SumTaskRows(task, ldc, scratch);
  int32_t* column_sums = nullptr;
  if (task.b->packed == nullptr) {
    column_sums = scratch.column_sums.Get<int32_t>(ldc);
    std::fill(column_sums, column_sums + ldc, 0);
  }
  MultiplyIntoTile(task, scratch, tile, ldc, column_sums);
  // The AMX kernel's tile configuration is the thread's until released.
  if (task.kernel->release != nullptr) task.kernel->release();
  RequantizeTile(task, scratch, tile, ldc, row_sums, column_sums);
}

}  // namespace dmlserve

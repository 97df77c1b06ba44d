#include "kernels/cpu/quantized_matmul_kernels.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "kernels/core/check.h"
#include "kernels/core/parallel_for.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_a.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_ukernel.h"
#include "kernels/cpu/requantize.h"

namespace dmlserve {
namespace {

// Blocking of the driver (the micro-kernels' own blocking is explained in
// their files). A task computes a kRowBlock x kColumnBlock block of the
// output: its A rows (kRowBlock x kDepthBlock bytes) and one micro-panel of B
// (kDepthBlock x 64 bytes) stay in the 1-2 MiB L2 while the micro-kernel
// sweeps the rows, and the int32 results of the block (96 KiB) are
// requantized straight from L2. kRowBlock is a multiple of every
// micro-kernel's mr (3, 4, 6; see kQGemmRowBlock, where the tables check
// it), kColumnBlock of every max_strips * 16. A kernel may ask for other
// values (QGemmUkernel::blocking; TaskRows below): the tile kernel's
// candidates do (qgemm_ukernel.h).
constexpr size_t kRowBlock = kQGemmRowBlock;
constexpr size_t kColumnBlock = 256;
constexpr size_t kDepthBlock = 2048;
// Products of at most this many rows against a B packed whole (a registered
// B) take all of K in one block instead: their A is a few KiB, so depth
// blocks buy no reuse, and one pass reads each strip of B as one sequential
// stream (1 x 4096 x 4096 at AVX2: median 107 -> 134 GOP/s over 10
// interleaved rounds, docs/benchmarks.md).
constexpr uint64_t kWholeDepthMaxRows = 2;
// B sent with a request and multiplied by few rows is packed a panel at a
// time inside each task, never as a whole (each panel is used once, from
// L2). Wider panels read more of each B row per page visited.
constexpr size_t kStreamingDepthBlock = 512;
constexpr size_t kMaxStreamingColumnBlock = 1024;
// A is packed in row panels of at most this many bytes, so a request never
// holds more than this much besides its operands.
constexpr size_t kMaxPackedABytes = size_t{2} << 20;
// Rows are described (RowJob, ~56 bytes each) and packed this many at a time.
constexpr uint64_t kMaxRowsPerChunk = uint64_t{1} << 16;
// Each thread a product runs on gets at least this many multiply-adds (about
// 10 µs on one core): smaller products run on the calling thread alone. Waking
// a pool worker costs a few microseconds of its own and, in a busy server,
// takes a core from gRPC's threads; below this it does not pay.
constexpr int64_t kMinMacsPerTask = int64_t{8} << 20;

int32_t ReadInteger(const Tensor& tensor, uint64_t index) {
  if (tensor.data_type == DataType::kInt8) return tensor.data_as<int8_t>()[index];
  return tensor.data_as<uint8_t>()[index];
}

// A zero point (absent means 0) for row or column `index`.
int32_t ZeroPointAt(const Tensor& zero_point, QuantizationAxis axis, uint32_t index) {
  if (!zero_point.present()) return 0;
  return ReadInteger(zero_point, axis == QuantizationAxis::kPerTensor ? 0 : index);
}

float ScaleAt(const Tensor& scale, QuantizationAxis axis, uint32_t index) {
  float value;
  std::memcpy(&value, scale.data_as<float>() + (axis == QuantizationAxis::kPerTensor ? 0 : index),
              sizeof(value));
  return value;
}

// One row of the stacked A and where its results go.
struct RowJob {
  const uint8_t* a;  // K elements of A's type
  bool a_signed;
  int32_t a_zero_point;
  float a_scale;
  float output_scale;
  int32_t output_zero_point;
  int32_t low, high;  // output type range
  uint8_t* out;       // N elements of the output type
};

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

// The rows of `jobs` as A sources.
std::vector<ARowSource> ARows(const std::vector<RowJob>& jobs, size_t first, size_t count) {
  std::vector<ARowSource> rows(count);
  for (size_t i = 0; i < count; ++i) rows[i] = {jobs[first + i].a, jobs[first + i].a_signed};
  return rows;
}

// za' of a row: its zero point shifted like A' (see qgemm_ukernel.h), unless
// an INT8 A is read as is (PackedA::raw_signed).
int32_t ShiftedZeroPoint(const RowJob& job, const PackedA& a) {
  return job.a_zero_point + (job.a_signed && !a.raw_signed ? 128 : 0);
}

// B as one task sees it: either fully packed, or packed panel by panel from
// the request's bytes (`packed` null).
struct BOperand {
  const PackedB* packed = nullptr;
  BSource source;
  const BColumns* columns = nullptr;
  // With one strip, the packed strip rearranged for the narrow path (every
  // quad, depth blocks at their quad offsets), else null.
  const int8_t* narrow = nullptr;
  // The whole B repacked for the kernel's repack_b, when PackB did it (strip
  // s at s * repacked_strip_stride), else null: each task repacks its own.
  const int8_t* repacked = nullptr;
  size_t repacked_strip_stride = 0;
};

// Appends rows [m_begin, m_end) of A slice `a_slice` of `op`, writing to
// output slice `out_slice` of `output`.
void AddRows(const QuantizedMatMulOperation& op, uint64_t a_slice, Tensor& output,
             uint64_t out_slice, uint32_t m_begin, uint32_t m_end, std::vector<RowJob>& rows) {
  const bool output_signed = op.output_data_type == DataType::kInt8;
  const uint8_t* a = op.a.data() + a_slice * op.m * op.k;
  uint8_t* out = output.mutable_data() + out_slice * op.m * op.n;
  for (uint32_t m = m_begin; m < m_end; ++m) {
    RowJob row;
    row.a = a + uint64_t{m} * op.k;
    row.a_signed = op.a.data_type == DataType::kInt8;
    row.a_zero_point = ZeroPointAt(op.a_zero_point, op.a_quantization, m);
    row.a_scale = ScaleAt(op.a_scale, op.a_quantization, m);
    row.output_scale = ScaleAt(op.output_scale, op.output_quantization, m);
    row.output_zero_point = ZeroPointAt(op.output_zero_point, op.output_quantization, m);
    row.low = output_signed ? -128 : 0;
    row.high = output_signed ? 127 : 255;
    row.out = out + uint64_t{m} * op.n;
    rows.push_back(row);
  }
}

// The rows of one product: the M rows of each (operation, A slice) added, in
// order. RowJobs (~56 bytes each) are made on demand a chunk at a time, so a
// request of 48M one-byte rows never holds 48M of them.
class RowList {
 public:
  void Add(const QuantizedMatMulOperation& op, uint64_t a_slice, Tensor& output,
           uint64_t out_slice) {
    if (op.m == 0) return;
    segments_.push_back({&op, a_slice, &output, out_slice, total_});
    total_ += op.m;
  }
  uint64_t size() const { return total_; }

  // Replaces `rows` with rows [first, first + count).
  void Fill(uint64_t first, size_t count, std::vector<RowJob>& rows) const {
    rows.clear();
    rows.reserve(count);
    auto segment = std::upper_bound(segments_.begin(), segments_.end(), first,
                                    [](uint64_t row, const Segment& s) { return row < s.start; });
    --segment;  // the one containing `first` (segments_[0].start is 0)
    const uint64_t end = first + count;
    for (uint64_t row = first; row < end; ++segment) {
      const uint64_t segment_end = segment->start + segment->op->m;
      const uint64_t stop = std::min(end, segment_end);
      AddRows(*segment->op, segment->a_slice, *segment->output, segment->out_slice,
              static_cast<uint32_t>(row - segment->start),
              static_cast<uint32_t>(stop - segment->start), rows);
      row = stop;
    }
  }

 private:
  struct Segment {
    const QuantizedMatMulOperation* op;
    uint64_t a_slice;
    Tensor* output;
    uint64_t out_slice;
    uint64_t start;  // index of its first row in the list
  };
  std::vector<Segment> segments_;
  uint64_t total_ = 0;
};

// One task of a product: output rows [row0, row0 + rows) (indices into `a`;
// row i is jobs[job0 + i]) x columns [column0, column0 + columns). The
// fields above the blank line are the same for every task of a product
// (RunPanels fills in `a`, `jobs` and `job0` per panel of A, the rest per
// task).
struct GemmTask {
  const CpuKernels* cpu = nullptr;       // the level's packers and epilogue
  const QGemmUkernel* kernel = nullptr;  // cpu->qgemm, or one it substitutes
  const BOperand* b = nullptr;
  size_t depth_block = 0;  // quads are walked depth_block / 4 at a time
  const PackedA* a = nullptr;
  const std::vector<RowJob>* jobs = nullptr;
  size_t job0 = 0;  // a's row 0 is jobs[job0]

  size_t row0 = 0, rows = 0;        // row0: a multiple of kernel->mr
  size_t column0 = 0, columns = 0;  // column0: a multiple of 16
};

// Where a task's row sums of A' come from (the corrections need them, see
// qgemm_ukernel.h): PackA computed them (a.row_sums), or the micro-kernel did
// as the row-sum column of B (N not a multiple of 16, and the column is in
// this task), or SumTaskRows sums them.
struct TaskRowSums {
  const int32_t* summed = nullptr;  // rows entries, when summed here
  bool from_tile = false;
  size_t tile_column = 0;  // with from_tile: the row-sum column in the tile

  int32_t Of(const GemmTask& task, const int32_t* tile, size_t ldc, size_t i) const {
    if (from_tile) return tile[i * ldc + tile_column];
    return summed != nullptr ? summed[i] : task.a->row_sums[task.row0 + i];
  }
};

// Sums the task's rows of A' if neither PackA nor the micro-kernel will:
// whole rows in one sequential pass (which the prefetchers follow), leaving
// the task's rows in L2 for the micro-kernel.
TaskRowSums SumTaskRows(const GemmTask& task, size_t ldc, TaskScratch& scratch) {
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
void MultiplyIntoTile(const GemmTask& task, TaskScratch& scratch, int32_t* tile, size_t ldc,
                      int32_t* column_sums) {
  const CpuKernels& cpu = *task.cpu;
  const PackedA& a = *task.a;
  // An INT8 A read as is goes to the kernel's variant for it (PackA chose so).
  const QGemmUkernel& kernel = a.raw_signed ? *task.kernel->signed_a : *task.kernel;
  const BOperand& b = *task.b;
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
void RequantizeTile(const GemmTask& task, TaskScratch& scratch, const int32_t* tile, size_t ldc,
                    const TaskRowSums& row_sums, const int32_t* column_sums) {
  const CpuKernels& cpu = *task.cpu;
  const BOperand& b = *task.b;
  const std::vector<RowJob>& jobs = *task.jobs;
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
    const RowJob& job = jobs[task.job0 + row0 + i];
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

// Computes and requantizes `task`'s block of the output.
void RunTask(const GemmTask& task) {
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

void RunPanels(const GemmTask& product, size_t column_block, const std::vector<RowJob>& rows,
               size_t panel_rows, PackedA& a);

// Rows per task for `kernel`: its blocking's, or kRowBlock.
size_t TaskRows(const QGemmUkernel& kernel) {
  return kernel.blocking.task_rows != 0 ? kernel.blocking.task_rows : kRowBlock;
}

// out = requantize((A - za) x (B - zb)) for every row of `list`, with B slice
// `slice` of `op` (packed whole, from `cache` when it is registered). Rows
// are made a chunk at a time; before each chunk `stop` may abandon the rest
// (its non-OK status is returned).
absl::Status RunGemm(const CpuKernels& cpu, const QuantizedMatMulOperation& op, uint64_t slice,
                     PackedBCache* cache, const RowList& list,
                     absl::FunctionRef<absl::Status()> stop) {
  const uint64_t total_rows = list.size();
  if (total_rows == 0) return absl::OkStatus();
  // A level may hand products of few rows to a lower level's kernel whole.
  const QGemmUkernel& selected = QGemmLevelKernel(*cpu.qgemm, total_rows);
  const size_t k = op.k, n = op.n;
  BOperand b;
  b.source = BSource::Of(op, slice);
  std::shared_ptr<const PackedB> packed;
  BColumns columns;
  const bool registered = cache != nullptr && !op.b.registered_id().empty();
  // Packing B whole pays off when its panels are reused by several row
  // blocks (or by later requests, once cached), and costs nothing with one
  // strip (K x 16 bytes), which the narrow path rearranges once per call.
  const bool narrow = n <= kQGemmStripColumns && selected.narrow != nullptr && total_rows >= 2;
  const bool streaming =
      !registered && !narrow &&
      (total_rows <= kRowBlock || (selected.blocking.stream_b && total_rows <= TaskRows(selected)));
  if (streaming) {
    columns = BColumns::Of(op);
    b.columns = &columns;
  } else {
    packed = cache != nullptr ? cache->Get(op, slice, cpu, total_rows)
                              : PackB(op, slice, cpu, total_rows);
    b.packed = packed.get();
    b.columns = &packed->columns;
  }
  const QGemmUkernel& kernel = ChooseQGemmUkernel(
      selected, packed != nullptr && packed->seven_bit, n, total_rows,
      /*b_repacked=*/packed != nullptr && selected.many_rows != nullptr &&
          packed->repacked_by != nullptr && packed->repacked_by == selected.many_rows->repack_b);
  // A B packed whole was repacked for this kernel with it (see PackB).
  if (packed != nullptr && kernel.repack_b != nullptr && packed->repacked_by == kernel.repack_b) {
    b.repacked = packed->repacked.get();
    b.repacked_strip_stride = packed->repacked_strip_stride();
  }
  const size_t quads = (k + 3) / 4;
  AlignedBytes narrow_panel;
  // The narrow path belongs to the selected kernel; a level that substitutes
  // another kernel for this product (ChooseQGemmUkernel) has none to offer.
  if (narrow && kernel.narrow != nullptr) {
    narrow_panel = AllocateAligned(QGemmNarrowPanelBytes(quads));
    kernel.narrow_pack(b.packed->strip(0), quads, reinterpret_cast<int8_t*>(narrow_panel.get()));
    b.narrow = reinterpret_cast<const int8_t*>(narrow_panel.get());
  }
  size_t depth_block = streaming                          ? kStreamingDepthBlock
                       : kernel.blocking.depth_block != 0 ? kernel.blocking.depth_block
                                                          : kDepthBlock;
  if (packed != nullptr && total_rows <= kWholeDepthMaxRows) depth_block = quads * 4;
  size_t column_block =
      kernel.blocking.column_block != 0 ? kernel.blocking.column_block : kColumnBlock;
  if (streaming) {
    const size_t per_thread = (n + 2 * ParallelismLevel() - 1) / (2 * ParallelismLevel());
    column_block =
        std::clamp<size_t>((per_thread + 63) / 64 * 64, kColumnBlock, kMaxStreamingColumnBlock);
  }
  GemmTask product;
  product.cpu = &cpu;
  product.kernel = &kernel;
  product.b = &b;
  product.depth_block = depth_block;
  PackedA a;
  std::vector<RowJob> rows;
  for (uint64_t chunk0 = 0; chunk0 < total_rows; chunk0 += kMaxRowsPerChunk) {
    if (absl::Status status = stop(); !status.ok()) return status;
    list.Fill(chunk0,
              static_cast<size_t>(std::min<uint64_t>(kMaxRowsPerChunk, total_rows - chunk0)), rows);
    // A used in place needs no panels; a copy is made a panel at a time.
    const size_t task_rows = TaskRows(kernel);
    const size_t panel_rows =
        PacksAInPlace(ARows(rows, 0, rows.size()), k, kernel)
            ? rows.size()
            : std::max<size_t>(task_rows,
                               kMaxPackedABytes / PackedAStride(k, kernel) / task_rows * task_rows);
    RunPanels(product, column_block, rows, panel_rows, a);
  }
  return absl::OkStatus();
}

// Computes `rows` (one chunk) panel by panel, `panel_rows` at a time, with
// the kernels, B and depth blocks of `product` (the fields every task shares).
void RunPanels(const GemmTask& product, size_t column_block, const std::vector<RowJob>& rows,
               size_t panel_rows, PackedA& a) {
  const QGemmUkernel& kernel = *product.kernel;
  const size_t k = product.b->source.k, n = product.b->source.n;
  for (size_t panel0 = 0; panel0 < rows.size(); panel0 += panel_rows) {
    const size_t panel_count = std::min(panel_rows, rows.size() - panel0);
    // With a single column block, each row is read by one task only: that
    // task sums it (from cache) rather than PackA (from memory).
    const bool one_column_block = n <= column_block;
    PackA(ARows(rows, panel0, panel_count), k, kernel, *product.cpu, !one_column_block, a);
    GemmTask panel = product;
    panel.a = &a;
    panel.jobs = &rows;
    panel.job0 = panel0;
    const size_t column_blocks = (n + column_block - 1) / column_block;
    // Few column blocks (a narrow N) and few rows would leave threads idle:
    // smaller row blocks (whole micro-kernel rows) give each a few tasks.
    // With one 16-column strip, a task's B is a few KiB, so small tasks cost
    // nothing and more of them even out the threads' finishing times (which,
    // in a call of tens of microseconds, is most of what is lost).
    const size_t parallelism = static_cast<size_t>(ParallelismLevel());
    const size_t wanted_tasks = 4 * parallelism;
    const size_t task_rows = TaskRows(kernel);
    size_t row_block = task_rows;
    // (Not when the kernel streams B panels with whole tasks' rows: each
    // panel would be packed once per row block.)
    const bool keep_rows = product.b->packed == nullptr && kernel.blocking.stream_b;
    if (!keep_rows && column_blocks * ((panel_count + task_rows - 1) / task_rows) < wanted_tasks) {
      const size_t split = n <= kQGemmStripColumns ? 4 * wanted_tasks : wanted_tasks;
      const size_t rows_per_task = (panel_count * column_blocks + split - 1) / split;
      row_block = std::clamp<size_t>((rows_per_task + kernel.mr - 1) / kernel.mr * kernel.mr,
                                     kernel.mr, task_rows);
    }
    const size_t row_blocks = (panel_count + row_block - 1) / row_block;
    const int64_t macs_per_task =
        static_cast<int64_t>(std::min(row_block, panel_count) * std::min(column_block, n) * k);
    ParallelFor(
        row_blocks * column_blocks,
        std::max<int64_t>(1, kMinMacsPerTask / std::max<int64_t>(1, macs_per_task)),
        [&](int64_t first, int64_t last) {
          for (int64_t task = first; task < last; ++task) {
            // Row blocks vary fastest: neighbouring tasks share B columns.
            GemmTask block = panel;
            block.row0 = (task % row_blocks) * row_block;
            block.rows = std::min(row_block, panel_count - block.row0);
            block.column0 = (task / row_blocks) * column_block;
            block.columns = std::min(column_block, n - block.column0);
            RunTask(block);
          }
        },
        // Tasks are claimed one by one: a thread slowed down by
        // something else on its core leaves more of them to the other.
        row_blocks * column_blocks);
  }
}

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
      RowList rows;
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
              RunGemm(cpu, op, uint64_t{bb} * op.b_channel + bc, cache, rows, stop);
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
    RowList rows;
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
    const absl::Status stopped = RunGemm(cpu, op, 0, cache, rows, [&]() -> absl::Status {
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

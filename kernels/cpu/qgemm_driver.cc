#include "kernels/cpu/qgemm_driver.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/core/check.h"
#include "kernels/core/parallel_for.h"
#include "kernels/cpu/packed_a.h"
#include "kernels/cpu/qgemm_task.h"
#include "kernels/cpu/qgemm_ukernel.h"

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
// B sent with a request and multiplied by more rows than a task's, when B
// is large (its packed copy, kStreamedBMinBytes or more, would not stay in
// the caches: PackB writes such a copy with streaming stores): packed a
// panel at a time inside tasks that keep up to kStreamedBTaskRows rows each,
// so that each panel is packed once per that many rows into L2 and used
// there, instead of a whole packed copy written to memory and read back
// (256 x 4096 x 4096, medians of 5 alternating rounds: at AVX-512 VNNI 8.57
// -> 6.51 ms, at AVX-VNNI 14.4 -> 13.0 ms; docs/benchmarks.md). Up to kStreamedBMaxRows
// rows, each panel is packed at most twice; beyond, a B packed whole is read
// by rows enough to pay for its copy. Not for a level whose kernels read B
// in a form only packing whole makes: AVX2's 7-bit kernel (all of B checked
// first) and its many-rows kernel (B repacked into int16 pairs); there the
// streamed path measured slower (7-bit 32 -> 37-42 ms).
constexpr size_t kStreamedBTaskRows = 4 * kQGemmRowBlock;
constexpr uint64_t kStreamedBMaxRows = 2 * kStreamedBTaskRows;
constexpr uint64_t kStreamedBMinBytes = uint64_t{8} << 20;
// A is packed in row panels of at most this many bytes, or of one task's rows
// when a task keeps more (a B streamed into tasks of up to kStreamedBTaskRows
// rows: 384 x K bytes, 12.1 MiB at the largest K), so a request never holds
// more than that besides its operands.
constexpr size_t kMaxPackedABytes = size_t{2} << 20;
// Rows are described (QGemmRow, ~56 bytes each) and packed this many at a time.
constexpr uint64_t kMaxRowsPerChunk = uint64_t{1} << 16;
// Each thread a product runs on gets at least this many multiply-adds (about
// 10 µs on one core): smaller products run on the calling thread alone. Waking
// a pool worker costs a few microseconds of its own and, in a busy server,
// takes a core from gRPC's threads; below this it does not pay.
constexpr int64_t kMinMacsPerTask = int64_t{8} << 20;

// The rows of `jobs` as A sources.
std::vector<ARowSource> ARows(const std::vector<QGemmRow>& jobs, size_t first, size_t count) {
  std::vector<ARowSource> rows(count);
  for (size_t i = 0; i < count; ++i) rows[i] = {jobs[first + i].a, jobs[first + i].a_signed};
  return rows;
}

// Tasks a product wants, to keep every thread busy to the end: a few per
// thread (tasks are claimed one at a time, see RunPanels).
size_t WantedTasks() { return 4 * static_cast<size_t>(ParallelismLevel()); }

// Rows per task for `kernel`: its blocking's, or kRowBlock.
size_t TaskRows(const QGemmUkernel& kernel) {
  return kernel.blocking.task_rows != 0 ? kernel.blocking.task_rows : kRowBlock;
}

// Computes `rows` (one chunk) panel by panel, `panel_rows` at a time, with
// the kernels, B and depth blocks of `product` (the fields every task shares).
// Tasks take `task_rows` rows each, or fewer when there would be too few
// tasks for the threads, unless `keep_rows` (B streamed into the tasks: each
// panel would be packed once more per extra row block).
void RunPanels(const QGemmTask& product, size_t column_block, size_t task_rows, bool keep_rows,
               const std::vector<QGemmRow>& rows, size_t panel_rows, PackedA& a) {
  const QGemmUkernel& kernel = *product.kernel;
  const size_t k = product.b->source.k, n = product.b->source.n;
  for (size_t panel0 = 0; panel0 < rows.size(); panel0 += panel_rows) {
    const size_t panel_count = std::min(panel_rows, rows.size() - panel0);
    // With a single column block, each row is read by one task only: that
    // task sums it (from cache) rather than PackA (from memory).
    const bool one_column_block = n <= column_block;
    PackA(ARows(rows, panel0, panel_count), k, kernel, *product.cpu, !one_column_block, a);
    QGemmTask panel = product;
    panel.a = &a;
    panel.jobs = &rows;
    panel.job0 = panel0;
    const size_t column_blocks = (n + column_block - 1) / column_block;
    // Few column blocks (a narrow N) and few rows would leave threads idle:
    // smaller row blocks (whole micro-kernel rows) give each a few tasks.
    // With one 16-column strip, a task's B is a few KiB, so small tasks cost
    // nothing and more of them even out the threads' finishing times (which,
    // in a call of tens of microseconds, is most of what is lost).
    const size_t wanted_tasks = WantedTasks();
    size_t row_block = task_rows;
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
            QGemmTask block = panel;
            block.row0 = (task % row_blocks) * row_block;
            block.rows = std::min(row_block, panel_count - block.row0);
            block.column0 = (task / row_blocks) * column_block;
            block.columns = std::min(column_block, n - block.column0);
            RunQGemmTask(block);
          }
        },
        // Tasks are claimed one by one: a thread slowed down by
        // something else on its core leaves more of them to the other.
        row_blocks * column_blocks);
  }
}

}  // namespace

size_t StreamedBTaskRows(const QGemmUkernel& level_kernel, uint64_t rows, size_t k, size_t n) {
  if (rows <= kRowBlock || rows > kStreamedBMaxRows) return 0;
  const uint64_t min_bytes = level_kernel.blocking.streamed_b_min_bytes != 0
                                 ? level_kernel.blocking.streamed_b_min_bytes
                                 : kStreamedBMinBytes;
  if (uint64_t{k} * n < min_bytes) return 0;
  if (level_kernel.seven_bit_b != nullptr || level_kernel.many_rows != nullptr) return 0;
  // Row blocks of equal size, whole micro-kernel rows each.
  const uint64_t blocks = (rows + kStreamedBTaskRows - 1) / kStreamedBTaskRows;
  const uint64_t per_block = (rows + blocks - 1) / blocks;
  const size_t mr = static_cast<size_t>(level_kernel.mr);
  return static_cast<size_t>((per_block + mr - 1) / mr * mr);
}

absl::Status RunQGemm(const CpuKernels& cpu, const QuantizedMatMulOperation& op, uint64_t slice,
                      PackedBCache* cache, const QGemmRowList& list,
                      absl::FunctionRef<absl::Status()> stop) {
  const uint64_t total_rows = list.size();
  if (total_rows == 0) return absl::OkStatus();
  // A level may hand products of few rows to a lower level's kernel whole.
  const QGemmUkernel& selected = QGemmLevelKernel(*cpu.qgemm, total_rows);
  const size_t k = op.k, n = op.n;
  QGemmBOperand b;
  b.source = BSource::Of(op, slice);
  std::shared_ptr<const PackedB> packed;
  BColumns columns;
  const bool registered = cache != nullptr && !op.b.registered_id().empty();
  // Packing B whole pays off when its panels are reused by several row
  // blocks (or by later requests, once cached), and costs nothing with one
  // strip (K x 16 bytes), which the narrow path rearranges once per call.
  const bool narrow = n <= kQGemmStripColumns && selected.narrow != nullptr && total_rows >= 2;
  // B streamed into tasks: of few rows (all of them in a task, or, for a
  // kernel whose blocking asks, up to its task rows), or of many rows with a
  // large B (StreamedBTaskRows).
  const size_t streamed_task_rows =
      registered || narrow ? 0 : StreamedBTaskRows(selected, total_rows, k, n);
  const bool streaming = !registered && !narrow &&
                         (total_rows <= kRowBlock || streamed_task_rows != 0 ||
                          (selected.blocking.stream_b && total_rows <= TaskRows(selected)));
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
  if (streamed_task_rows != 0) {
    // Tasks start at multiples of their rows; a block of mr rows must not
    // straddle two (the level's own kernel runs: it has no substitutes).
    DMLSERVE_DCHECK(streamed_task_rows % static_cast<size_t>(kernel.mr) == 0);
    // Depth blocks and B panels as a registered B's (a panel is packed into
    // L2 once and used by the task's rows there), but narrower when N is
    // small, so that every thread gets a few tasks of whole rows.
    depth_block = kDepthBlock;
    const size_t per_task = (n + WantedTasks() - 1) / WantedTasks();
    column_block = std::clamp<size_t>((per_task + 63) / 64 * 64, 64, kColumnBlock);
  } else if (streaming) {
    // As many column blocks as the tasks the threads want (within 256 to
    // 1024 columns), so that RunPanels splits the rows only where N is too
    // narrow for that: each extra row block packs (and reads from memory)
    // the same panels of B again (16 x 4096 x 4096 at AVX-512
    // VNNI: 0.68x the time). Rows it cannot split (at most one micro-kernel
    // call's, a GEMV) keep half as many, wider panels, which read more of
    // each row of B per page (the GEMV read 1.13x slower with the narrower
    // ones); docs/benchmarks.md.
    const size_t tasks =
        total_rows > static_cast<uint64_t>(kernel.mr) ? WantedTasks() : WantedTasks() / 2;
    const size_t per_task = (n + tasks - 1) / tasks;
    column_block =
        std::clamp<size_t>((per_task + 63) / 64 * 64, kColumnBlock, kMaxStreamingColumnBlock);
  }
  QGemmTask product;
  product.cpu = &cpu;
  product.kernel = &kernel;
  product.b = &b;
  product.depth_block = depth_block;
  PackedA a;
  std::vector<QGemmRow> rows;
  for (uint64_t chunk0 = 0; chunk0 < total_rows; chunk0 += kMaxRowsPerChunk) {
    if (absl::Status status = stop(); !status.ok()) return status;
    list.Fill(chunk0,
              static_cast<size_t>(std::min<uint64_t>(kMaxRowsPerChunk, total_rows - chunk0)), rows);
    // A used in place needs no panels; a copy is made a panel at a time.
    const size_t task_rows = streamed_task_rows != 0 ? streamed_task_rows : TaskRows(kernel);
    const bool keep_rows =
        streamed_task_rows != 0 || (b.packed == nullptr && kernel.blocking.stream_b);
    const size_t panel_rows =
        PacksAInPlace(ARows(rows, 0, rows.size()), k, kernel)
            ? rows.size()
            : std::max<size_t>(task_rows,
                               kMaxPackedABytes / PackedAStride(k, kernel) / task_rows * task_rows);
    RunPanels(product, column_block, task_rows, keep_rows, rows, panel_rows, a);
  }
  return absl::OkStatus();
}

}  // namespace dmlserve

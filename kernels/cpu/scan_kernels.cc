#include "kernels/cpu/scan_kernels.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "kernels/core/parallel_for.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/scan_simd.h"

#if DMLSERVE_X86
#include <immintrin.h>
#endif

namespace dmlserve {
namespace {

using scan_internal::Add;
using scan_internal::Multiply;
using scan_internal::ScanFns;
using scan_internal::ScanKind;

// Below this many elements per task, handing work to another thread costs
// more than it saves.
constexpr int64_t kMinElementsPerTask = 1 << 16;
// Accumulators kept inline for rows no wider than a vector (ScanFns::lanes
// is at most 16), so that a tiny scan allocates nothing.
constexpr size_t kInlineLanes = 16;
// Accumulators of one lane chunk (strided axes): they stay in L1 while rows
// stream through.
constexpr int64_t kMaxLaneChunkBytes = 16 << 10;
// Lane chunks are not split below this (shorter row segments defeat the
// hardware prefetchers).
constexpr int64_t kMinLaneChunkBytes = 1 << 10;
// Pieces of a chained scan: reduced into L2, then scanned again from L2.
constexpr int64_t kPieceBytes = 256 << 10;
// Input plus output beyond this (about the L3) is written with
// non-temporal stores: the output would not stay in cache anyway, and
// streaming stores skip reading each output line before writing it.
constexpr uint64_t kNonTemporalBytes = 24 << 20;

// Spins until `flag` is set; yields when the wait is long (the thread that
// will set it may have been preempted on a busy machine).
void WaitFor(const std::atomic<bool>& flag) {
  for (int spin = 0; !flag.load(std::memory_order_acquire); ++spin) {
    if (spin < 256) {
#if DMLSERVE_X86
      _mm_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
}

// The scan of one element kind, planned over the input viewed as
// [outer, axis, inner]:
//   - inner == 1 (the last axis, or only size-1 dimensions after it): each
//     line is contiguous; `line` scans it with an in-register prefix.
//   - inner > 1: rows of `inner` contiguous elements; `rows` scans lane
//     chunks of them with vectors across lanes.
//   - narrow rows (1 < inner <= vector lanes) and short lines (inner == 1,
//     axis < 2 vectors): a vector would hold less than one row or line, so
//     `stream` scans the contiguous memory as `inner` interleaved lines,
//     several rows or lines per vector (in-register prefix across rows,
//     restarting at each line or slab start when those are short).
// Independent lines or lane chunks are spread over the threads. When there
// are too few of them for the threads, each is cut into pieces along the
// axis that are chained: a piece's thread reduces it (reading it into its
// L2), waits for the previous piece's running value, publishes its own and
// then scans the piece from L2. Memory is read once and written once, and
// the result does not depend on which thread ran which piece.
template <typename A, typename Op, bool kExclusive>
class ScanPlan {
 public:
  ScanPlan(const ScanOperation& op, const uint8_t* in, uint8_t* out, size_t element_bytes,
           const ScanFns& fns)
      : in_(in),
        out_(out),
        element_bytes_(element_bytes),
        fns_(fns),
        outer_(static_cast<int64_t>(op.outer)),
        axis_(static_cast<int64_t>(op.axis_size)),
        inner_(static_cast<int64_t>(op.inner)),
        decreasing_(op.direction == AxisDirection::kDecreasing),
        threads_(ParallelismLevel()) {
    const uint64_t total = uint64_t(outer_) * axis_ * inner_;
    nt_ = 2 * total * element_bytes >= kNonTemporalBytes;
  }

  void Run() {
    if (fns_.lanes > 1 && inner_ == 1 && axis_ < 2 * fns_.lanes && outer_ > 1) {
      RunShortSegments();
    } else if (fns_.lanes > 1 && inner_ > 1 && inner_ <= fns_.lanes) {
      RunNarrowRows();
    } else if (inner_ == 1) {
      RunLines();
    } else {
      RunRows();
    }
  }

 private:
  static A Identity() { return Op::template Identity<A>(); }
  int64_t total() const { return outer_ * axis_ * inner_; }
  const uint8_t* In(int64_t element) const { return in_ + element * element_bytes_; }
  uint8_t* Out(int64_t element) const { return out_ + element * element_bytes_; }

  // Whether `units` independent units leave threads idle on a tensor big
  // enough to be worth chaining pieces along the axis.
  bool ShouldChain(int64_t units, int64_t pieces) const {
    return threads_ > 1 && units < 2 * threads_ && pieces >= 2 &&
           total() >= 2 * kMinElementsPerTask;
  }

  void RunLines() {
    const int64_t piece = std::max<int64_t>(1, kPieceBytes / element_bytes_);
    const int64_t pieces = (axis_ + piece - 1) / piece;
    if (ShouldChain(outer_, pieces)) {
      RunChained(outer_, pieces, piece, 1);
      return;
    }
    const int64_t min_lines = std::max<int64_t>(1, kMinElementsPerTask / axis_);
    ParallelFor(outer_, min_lines, [&](int64_t begin, int64_t end) {
      for (int64_t line = begin; line < end; ++line) {
        A carry = Identity();
        fns_.line(In(line * axis_), Out(line * axis_), axis_, decreasing_, &carry, nt_);
      }
      if (nt_) fns_.fence();
    });
  }

  // Many slabs of axis * inner <= a few vectors (short lines when inner is
  // 1): whole slabs per task, one stream call over all of them.
  void RunShortSegments() {
    const int64_t segment = axis_ * inner_;
    const int64_t min_slabs = std::max<int64_t>(1, kMinElementsPerTask / segment);
    ParallelFor(outer_, min_slabs, [&](int64_t begin, int64_t end) {
      absl::InlinedVector<A, kInlineLanes> acc(inner_, Identity());  // restarted every slab
      fns_.stream(In(begin * segment), Out(begin * segment), (end - begin) * segment, inner_,
                  segment, decreasing_, acc.data(), nt_);
      if (nt_) fns_.fence();
    });
  }

  // Rows narrower than a vector: each slab is one contiguous stream of
  // `inner` interleaved lines. Few slabs are chained along the axis.
  void RunNarrowRows() {
    if (axis_ * inner_ <= 4 * fns_.lanes && outer_ > 1) {
      RunShortSegments();
      return;
    }
    narrow_ = true;
    lane_chunk_ = inner_;
    // Pieces of whole vectors, so that every piece's stores start aligned
    // when the slab does.
    const int64_t piece_rows = std::max<int64_t>(
        fns_.lanes,
        kPieceBytes / (inner_ * static_cast<int64_t>(element_bytes_)) / fns_.lanes * fns_.lanes);
    const int64_t pieces = (axis_ + piece_rows - 1) / piece_rows;
    if (ShouldChain(outer_, pieces)) {
      RunChained(outer_, pieces, piece_rows, inner_);
      return;
    }
    const int64_t min_slabs = std::max<int64_t>(1, kMinElementsPerTask / (axis_ * inner_));
    ParallelFor(outer_, min_slabs, [&](int64_t begin, int64_t end) {
      absl::InlinedVector<A, kInlineLanes> acc(inner_);
      for (int64_t slab = begin; slab < end; ++slab) {
        std::fill(acc.begin(), acc.end(), Identity());
        ScanPiece(slab, 0, axis_, acc.data());
      }
      if (nt_) fns_.fence();
    });
  }

  void RunRows() {
    // Halve the lane chunk while that gives the threads more units.
    lane_chunk_ = std::min<int64_t>(inner_, kMaxLaneChunkBytes / sizeof(A));
    const int64_t min_chunk = std::max<int64_t>(1, kMinLaneChunkBytes / element_bytes_);
    while (outer_ * ChunksPerSlab() < 2 * threads_ && lane_chunk_ / 2 >= min_chunk) {
      lane_chunk_ /= 2;
    }
    const int64_t units = outer_ * ChunksPerSlab();
    const int64_t piece_rows =
        std::max<int64_t>(1, kPieceBytes / (lane_chunk_ * static_cast<int64_t>(element_bytes_)));
    const int64_t pieces = (axis_ + piece_rows - 1) / piece_rows;
    if (ShouldChain(units, pieces)) {
      RunChained(units, pieces, piece_rows, lane_chunk_);
      return;
    }
    const int64_t min_units = std::max<int64_t>(1, kMinElementsPerTask / (axis_ * lane_chunk_));
    ParallelFor(units, min_units, [&](int64_t begin, int64_t end) {
      std::vector<A> acc(lane_chunk_);
      for (int64_t unit = begin; unit < end; ++unit) {
        const int64_t lanes = Lanes(unit);
        std::fill(acc.begin(), acc.begin() + lanes, Identity());
        const int64_t first = RowElement(unit, 0);
        fns_.rows(In(first), Out(first), Stride(), axis_, lanes, acc.data(), nt_);
      }
      if (nt_) fns_.fence();
    });
  }

  int64_t ChunksPerSlab() const { return (inner_ + lane_chunk_ - 1) / lane_chunk_; }
  int64_t Lanes(int64_t unit) const {
    return std::min(lane_chunk_, inner_ - (unit % ChunksPerSlab()) * lane_chunk_);
  }
  ptrdiff_t Stride() const { return decreasing_ ? -inner_ : inner_; }
  // The element at scan position `position` of lane 0 of rows-mode `unit`.
  int64_t RowElement(int64_t unit, int64_t position) const {
    const int64_t slab = unit / ChunksPerSlab();
    const int64_t first_lane = (unit % ChunksPerSlab()) * lane_chunk_;
    const int64_t row = decreasing_ ? axis_ - 1 - position : position;
    return (slab * axis_ + row) * inner_ + first_lane;
  }

  // The lowest-addressed element of scan positions [begin, end) of narrow
  // slab `slab` (decreasing: rows [axis - end, axis - begin)).
  int64_t NarrowElement(int64_t slab, int64_t begin, int64_t end) const {
    return (slab * axis_ + (decreasing_ ? axis_ - end : begin)) * inner_;
  }

  // Scan positions [begin, end) of `unit` (a line when lanes == 1 and
  // inner == 1), from and into `carry`.
  void ScanPiece(int64_t unit, int64_t begin, int64_t end, A* carry) const {
    if (narrow_) {
      const int64_t first = NarrowElement(unit, begin, end);
      fns_.stream(In(first), Out(first), (end - begin) * inner_, inner_, 0, decreasing_, carry,
                  nt_);
    } else if (inner_ == 1) {
      // Increasing: memory [begin, end); decreasing: [axis - end, axis - begin).
      const int64_t first = unit * axis_ + (decreasing_ ? axis_ - end : begin);
      fns_.line(In(first), Out(first), end - begin, decreasing_, carry, nt_);
    } else {
      const int64_t first = RowElement(unit, begin);
      fns_.rows(In(first), Out(first), Stride(), end - begin, Lanes(unit), carry, nt_);
    }
  }

  void ReducePiece(int64_t unit, int64_t begin, int64_t end, A* total) const {
    if (narrow_) {
      const int64_t first = NarrowElement(unit, begin, end);
      fns_.stream(In(first), nullptr, (end - begin) * inner_, inner_, 0, decreasing_, total, false);
    } else if (inner_ == 1) {
      const int64_t first = unit * axis_ + (decreasing_ ? axis_ - end : begin);
      fns_.reduce_line(In(first), end - begin, total);
    } else {
      fns_.reduce_rows(In(RowElement(unit, begin)), Stride(), end - begin, Lanes(unit), total);
    }
  }

  // `units` independent units (lines or lane chunks of `lanes` lanes at
  // most), each cut into `pieces` pieces of `piece` scan positions. Tasks are
  // claimed one at a time in order, so a task only waits for the previous
  // piece of its unit, which a running thread has already claimed.
  void RunChained(int64_t units, int64_t pieces, int64_t piece, int64_t lanes) {
    const int64_t tasks = units * pieces;
    std::vector<A> running(tasks * lanes);  // the value after each piece
    std::unique_ptr<std::atomic<bool>[]> ready(new std::atomic<bool>[tasks]);
    for (int64_t t = 0; t < tasks; ++t) ready[t].store(false, std::memory_order_relaxed);
    std::atomic<int64_t> next{0};
    ParallelFor(threads_, 1, [&](int64_t, int64_t) {
      std::vector<A> carry(lanes), local(lanes);
      for (int64_t t; (t = next.fetch_add(1, std::memory_order_relaxed)) < tasks;) {
        const int64_t unit = t / pieces, s = t % pieces;
        const int64_t begin = s * piece, end = std::min(axis_, begin + piece);
        const int64_t n = inner_ == 1 ? 1 : Lanes(unit);
        A* published = running.data() + t * lanes;
        const bool last = s + 1 == pieces;
        if (s == 0) {
          std::fill(carry.begin(), carry.begin() + n, Identity());
          ScanPiece(unit, begin, end, carry.data());
          if (!last) {
            std::copy(carry.begin(), carry.begin() + n, published);
            ready[t].store(true, std::memory_order_release);
          }
          continue;
        }
        if (!last) {
          // This piece's total while the previous one is still running.
          std::fill(local.begin(), local.begin() + n, Identity());
          ReducePiece(unit, begin, end, local.data());
        }
        WaitFor(ready[t - 1]);
        const A* previous = running.data() + (t - 1) * lanes;
        std::copy(previous, previous + n, carry.begin());
        if (!last) {
          for (int64_t l = 0; l < n; ++l) published[l] = Op::Apply(carry[l], local[l]);
          ready[t].store(true, std::memory_order_release);
        }
        ScanPiece(unit, begin, end, carry.data());
      }
      if (nt_) fns_.fence();
    });
  }

  const uint8_t* const in_;
  uint8_t* const out_;
  const int64_t element_bytes_;
  const ScanFns& fns_;
  const int64_t outer_, axis_, inner_;
  const bool decreasing_;
  const int64_t threads_;
  bool nt_ = false;
  bool narrow_ = false;  // rows scanned by `stream`, one unit per slab
  int64_t lane_chunk_ = 1;
};

template <typename A, typename Op>
void Run(const ScanOperation& op, Tensor& output, ScanKind kind) {
  const ScanFns& fns = (*SelectedCpuKernels().scan)[kind][op.exclusive ? 1 : 0];
  const size_t element_bytes = DataTypeSize(op.input.data_type);
  if (op.exclusive) {
    ScanPlan<A, Op, true>(op, op.input.data(), output.mutable_data(), element_bytes, fns).Run();
  } else {
    ScanPlan<A, Op, false>(op, op.input.data(), output.mutable_data(), element_bytes, fns).Run();
  }
}

}  // namespace

void ComputeScan(const ScanOperation& op, Tensor& output) {
  using scan_internal::ScanKind;
  if (op.kind == OperatorKind::kCumulativeSummation) {
    switch (op.input.data_type) {
      case DataType::kFloat32:
        return Run<float, Add>(op, output, scan_internal::kF32Sum);
      case DataType::kFloat16:
        return Run<float, Add>(op, output, scan_internal::kF16Sum);
      case DataType::kInt64:
      case DataType::kUint64:
        return Run<uint64_t, Add>(op, output, scan_internal::kB64Sum);
      case DataType::kInt32:
      case DataType::kUint32:
        return Run<uint32_t, Add>(op, output, scan_internal::kB32Sum);
      default:
        return;  // excluded by MakeScanOperation
    }
  }
  switch (op.input.data_type) {
    case DataType::kFloat32:
      return Run<float, Multiply>(op, output, scan_internal::kF32Product);
    case DataType::kFloat16:
      return Run<float, Multiply>(op, output, scan_internal::kF16Product);
    case DataType::kUint32:
      return Run<uint32_t, Multiply>(op, output, scan_internal::kU32Product);
    case DataType::kUint16:
      return Run<uint32_t, Multiply>(op, output, scan_internal::kU16Product);
    default:
      return;  // excluded by MakeScanOperation
  }
}

}  // namespace dmlserve

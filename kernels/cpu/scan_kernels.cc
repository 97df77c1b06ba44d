#include "kernels/cpu/scan_kernels.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DMLSERVE_X86 1
#endif

#include "kernels/cpu/float16.h"
#include "kernels/cpu/parallel_for.h"

namespace dmlserve {
namespace {

// How an element type is stored and accumulated. Integers accumulate in
// unsigned types of at least their width, so overflow wraps modulo 2^bits
// (C++ signed overflow would be undefined); narrower results are truncated.
template <typename StorageT, typename AccumulatorT>
struct PlainElement {
  using Storage = StorageT;
  using Accumulator = AccumulatorT;
  static Accumulator Load(Storage x) { return static_cast<Accumulator>(x); }
  static Storage Store(Accumulator a) { return static_cast<Storage>(a); }
};

// FLOAT16 accumulates in float32; each written value is rounded to half.
struct HalfElement {
  using Storage = uint16_t;
  using Accumulator = float;
  static Accumulator Load(Storage x) { return HalfToFloat(x); }
  static Storage Store(Accumulator a) { return FloatToHalf(a); }
};

struct Add {
  template <typename T>
  static T Apply(T x, T y) {
    return x + y;
  }
  template <typename T>
  static T Identity() {
    return T(0);
  }
};

struct Multiply {
  template <typename T>
  static T Apply(T x, T y) {
    return x * y;
  }
  template <typename T>
  static T Identity() {
    return T(1);
  }
};

#if DMLSERVE_X86
// FLOAT16 scans with the F16C conversion instructions (8 lanes at a time),
// which round to nearest even exactly like FloatToHalf.
#pragma GCC push_options
#pragma GCC target("avx2,f16c")

template <bool kAdd>
inline __m256 Combine8(__m256 x, __m256 y) {
  return kAdd ? _mm256_add_ps(x, y) : _mm256_mul_ps(x, y);
}

template <bool kAdd>
inline float Combine1(float x, float y) {
  return kAdd ? x + y : x * y;
}

inline float HalfToFloatF16c(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t FloatToHalfF16c(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

template <bool kAdd, bool kExclusive>
void HalfRowsF16c(const uint16_t* __restrict in, uint16_t* __restrict out, ptrdiff_t stride,
                  int64_t rows, int64_t lanes, float* __restrict acc) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* x = in + r * stride;
    uint16_t* y = out + r * stride;
    int64_t l = 0;
    for (; l + 8 <= lanes; l += 8) {
      __m256 a = _mm256_loadu_ps(acc + l);
      const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + l)));
      if (kExclusive) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + l),
                         _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
        a = Combine8<kAdd>(a, v);
      } else {
        a = Combine8<kAdd>(a, v);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + l),
                         _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT));
      }
      _mm256_storeu_ps(acc + l, a);
    }
    for (; l < lanes; ++l) {
      if (kExclusive) {
        y[l] = FloatToHalfF16c(acc[l]);
        acc[l] = Combine1<kAdd>(acc[l], HalfToFloatF16c(x[l]));
      } else {
        acc[l] = Combine1<kAdd>(acc[l], HalfToFloatF16c(x[l]));
        y[l] = FloatToHalfF16c(acc[l]);
      }
    }
  }
}

template <bool kAdd, bool kExclusive>
void HalfLineF16c(const uint16_t* __restrict in, uint16_t* __restrict out, ptrdiff_t stride,
                  int64_t rows, float* __restrict acc_ptr) {
  float acc = *acc_ptr;
  for (int64_t r = 0; r < rows; ++r) {
    if (kExclusive) {
      out[r * stride] = FloatToHalfF16c(acc);
      acc = Combine1<kAdd>(acc, HalfToFloatF16c(in[r * stride]));
    } else {
      acc = Combine1<kAdd>(acc, HalfToFloatF16c(in[r * stride]));
      out[r * stride] = FloatToHalfF16c(acc);
    }
  }
  *acc_ptr = acc;
}

// kLines independent lines (line q starts at in + q * line_stride) at once:
// their dependency chains overlap.
template <bool kAdd, bool kExclusive, int kLines>
void HalfLinesF16c(const uint16_t* __restrict in, uint16_t* __restrict out, ptrdiff_t line_stride,
                   ptrdiff_t stride, int64_t rows) {
  float acc[kLines];
  for (int q = 0; q < kLines; ++q) acc[q] = kAdd ? 0.0f : 1.0f;
  for (int64_t r = 0; r < rows; ++r) {
    // Loads before stores (see ScanKernel::Lines).
    float x[kLines];
    for (int q = 0; q < kLines; ++q) x[q] = HalfToFloatF16c(in[q * line_stride + r * stride]);
    for (int q = 0; q < kLines; ++q) {
      const ptrdiff_t index = q * line_stride + r * stride;
      if (kExclusive) {
        out[index] = FloatToHalfF16c(acc[q]);
        acc[q] = Combine1<kAdd>(acc[q], x[q]);
      } else {
        acc[q] = Combine1<kAdd>(acc[q], x[q]);
        out[index] = FloatToHalfF16c(acc[q]);
      }
    }
  }
}

#pragma GCC pop_options

bool HasF16c() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }();
  return supported;
}
#else
bool HasF16c() { return false; }
#endif  // DMLSERVE_X86

// Lines scanned together when the scan runs along the last axis.
constexpr int kInterleavedLines = 8;
// Whether kInterleavedLines lines `line_bytes` apart (and their outputs)
// can be in L1 at once: with strides that are multiples of 4 KiB they all
// map to the same set of the (8-way) L1 and evict one another, which is far
// slower than scanning the lines one by one.
bool LinesMapToDistinctSets(uint64_t line_bytes) {
  constexpr uint64_t kLine = 64, kSets = 64;
  if (line_bytes % kLine != 0) return true;
  const uint64_t step = (line_bytes / kLine) % kSets;
  return step != 0 && std::gcd(step, kSets) * kInterleavedLines <= kSets;
}

// Lanes (adjacent elements of the `inner` dimension) scanned together; their
// accumulators stay in L1 while rows stream through.
constexpr int64_t kLaneChunk = 512;
// Below this many elements per task, handing work to another thread costs
// more than it saves.
constexpr int64_t kMinElementsPerTask = 1 << 16;
// A scan split along its axis needs segments at least this long to be worth
// the extra reduction pass.
constexpr int64_t kMinSegment = 4096;

template <typename E, typename Op, bool kExclusive>
struct ScanKernel {
  using S = typename E::Storage;
  using A = typename E::Accumulator;

  // Scans `rows` rows of `lanes` contiguous elements; row r starts at
  // in + r * stride (stride is negative for DECREASING). `acc` carries in the
  // running values and receives the final ones.
  static void Rows(const S* __restrict in, S* __restrict out, ptrdiff_t stride, int64_t rows,
                   int64_t lanes, A* __restrict acc) {
#if DMLSERVE_X86
    if constexpr (std::is_same_v<E, HalfElement>) {
      if (HasF16c()) {
        constexpr bool kAdd = std::is_same_v<Op, Add>;
        if (lanes == 1) {
          HalfLineF16c<kAdd, kExclusive>(in, out, stride, rows, acc);
        } else {
          HalfRowsF16c<kAdd, kExclusive>(in, out, stride, rows, lanes, acc);
        }
        return;
      }
    }
#endif
    if (lanes == 1) {
      Line(in, out, stride, rows, acc);
      return;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const S* __restrict x = in + r * stride;
      S* __restrict y = out + r * stride;
      for (int64_t l = 0; l < lanes; ++l) {
        if constexpr (kExclusive) {
          y[l] = E::Store(acc[l]);
          acc[l] = Op::Apply(acc[l], E::Load(x[l]));
        } else {
          acc[l] = Op::Apply(acc[l], E::Load(x[l]));
          y[l] = E::Store(acc[l]);
        }
      }
    }
  }

  // One lane: a sequential scan along a strided line.
  static void Line(const S* __restrict in, S* __restrict out, ptrdiff_t stride, int64_t rows,
                   A* __restrict acc_ptr) {
    A acc = *acc_ptr;
    if (stride == 1) {
      for (int64_t r = 0; r < rows; ++r) {
        if constexpr (kExclusive) {
          out[r] = E::Store(acc);
          acc = Op::Apply(acc, E::Load(in[r]));
        } else {
          acc = Op::Apply(acc, E::Load(in[r]));
          out[r] = E::Store(acc);
        }
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        if constexpr (kExclusive) {
          out[r * stride] = E::Store(acc);
          acc = Op::Apply(acc, E::Load(in[r * stride]));
        } else {
          acc = Op::Apply(acc, E::Load(in[r * stride]));
          out[r * stride] = E::Store(acc);
        }
      }
    }
    *acc_ptr = acc;
  }

  // kInterleavedLines whole lines (line q starts at in + q * line_stride),
  // scanned together so that their dependency chains overlap.
  static void Lines(const S* __restrict in, S* __restrict out, ptrdiff_t line_stride,
                    ptrdiff_t stride, int64_t rows) {
#if DMLSERVE_X86
    if constexpr (std::is_same_v<E, HalfElement>) {
      if (HasF16c()) {
        HalfLinesF16c<std::is_same_v<Op, Add>, kExclusive, kInterleavedLines>(in, out, line_stride,
                                                                              stride, rows);
        return;
      }
    }
#endif
    A acc[kInterleavedLines];
    for (A& a : acc) a = Op::template Identity<A>();
    for (int64_t r = 0; r < rows; ++r) {
      // All loads of a row before its stores: with line strides that are
      // multiples of 4 KiB, a store followed by a load of another line would
      // falsely alias (same address bits 0-11) and stall.
      A x[kInterleavedLines];
      for (int q = 0; q < kInterleavedLines; ++q) x[q] = E::Load(in[q * line_stride + r * stride]);
      for (int q = 0; q < kInterleavedLines; ++q) {
        const ptrdiff_t index = q * line_stride + r * stride;
        if constexpr (kExclusive) {
          out[index] = E::Store(acc[q]);
          acc[q] = Op::Apply(acc[q], x[q]);
        } else {
          acc[q] = Op::Apply(acc[q], x[q]);
          out[index] = E::Store(acc[q]);
        }
      }
    }
  }

  // Folds `rows` rows into `acc` without writing anything.
  static void Reduce(const S* __restrict in, ptrdiff_t stride, int64_t rows, int64_t lanes,
                     A* __restrict acc) {
    if (lanes == 1) {
      // Independent partial results (a reassociation the spec allows for
      // floats; exact for wrapping integers) keep the adder pipeline full.
      constexpr int kPartials = 8;
      A partial[kPartials];
      for (A& p : partial) p = Op::template Identity<A>();
      int64_t r = 0;
      for (; r + kPartials <= rows; r += kPartials) {
        for (int j = 0; j < kPartials; ++j) {
          partial[j] = Op::Apply(partial[j], E::Load(in[(r + j) * stride]));
        }
      }
      for (; r < rows; ++r) partial[0] = Op::Apply(partial[0], E::Load(in[r * stride]));
      A total = acc[0];
      for (const A& p : partial) total = Op::Apply(total, p);
      acc[0] = total;
      return;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const S* __restrict x = in + r * stride;
      for (int64_t l = 0; l < lanes; ++l) acc[l] = Op::Apply(acc[l], E::Load(x[l]));
    }
  }

  // The input as units of work: each unit is one lane chunk of one outer
  // slab, scanned along the whole axis (or one segment of it).
  struct Layout {
    const S* in;
    S* out;
    int64_t outer, axis, inner;
    bool decreasing;
    int64_t chunks_per_slab;

    ptrdiff_t stride() const { return decreasing ? -inner : inner; }
    int64_t units() const { return outer * chunks_per_slab; }
    int64_t lanes(int64_t unit) const {
      const int64_t first = (unit % chunks_per_slab) * kLaneChunk;
      return std::min(kLaneChunk, inner - first);
    }
    // Offset of the element at scan position `position` of lane 0 of `unit`.
    int64_t offset(int64_t unit, int64_t position) const {
      const int64_t slab = unit / chunks_per_slab;
      const int64_t first_lane = (unit % chunks_per_slab) * kLaneChunk;
      const int64_t row = decreasing ? axis - 1 - position : position;
      return (slab * axis + row) * inner + first_lane;
    }
  };

  static void Run(const ScanOperation& op, const S* in, S* out) {
    Layout layout{in,
                  out,
                  static_cast<int64_t>(op.outer),
                  static_cast<int64_t>(op.axis_size),
                  static_cast<int64_t>(op.inner),
                  op.direction == AxisDirection::kDecreasing,
                  0};
    layout.chunks_per_slab = (layout.inner + kLaneChunk - 1) / kLaneChunk;
    const int64_t units = layout.units();
    const int64_t total = layout.outer * layout.axis * layout.inner;
    const int64_t threads = ParallelismLevel();
    const int64_t unit_elements = layout.axis * std::min(layout.inner, kLaneChunk);

    // Too few independent lanes to keep every thread busy: split the axis.
    const int64_t segments = std::min(threads, layout.axis / kMinSegment);
    if (threads > 1 && total >= 2 * kMinElementsPerTask && units < threads && segments > 1) {
      RunSegmented(layout, segments);
      return;
    }
    const int64_t min_units = std::max<int64_t>(1, kMinElementsPerTask / unit_elements);
    ParallelFor(units, min_units, [&](int64_t begin, int64_t end) {
      A acc[kLaneChunk];
      if (layout.inner == 1 && LinesMapToDistinctSets(layout.axis * sizeof(S))) {
        // Each unit is one whole line, and consecutive units are adjacent.
        for (; begin + kInterleavedLines <= end; begin += kInterleavedLines) {
          const int64_t offset = layout.offset(begin, 0);
          Lines(in + offset, out + offset, layout.axis, layout.stride(), layout.axis);
        }
      }
      for (int64_t unit = begin; unit < end; ++unit) {
        const int64_t lanes = layout.lanes(unit);
        std::fill(acc, acc + lanes, Op::template Identity<A>());
        const int64_t offset = layout.offset(unit, 0);
        Rows(in + offset, out + offset, layout.stride(), layout.axis, lanes, acc);
      }
    });
  }

  // Two passes: each segment's total, then every segment scanned starting
  // from the combined totals of the segments before it.
  static void RunSegmented(const Layout& layout, int64_t segments) {
    const int64_t units = layout.units();
    auto segment_begin = [&](int64_t s) { return s * layout.axis / segments; };
    std::vector<A> carries(units * segments * kLaneChunk, Op::template Identity<A>());
    auto carry = [&](int64_t unit, int64_t s) {
      return carries.data() + (unit * segments + s) * kLaneChunk;
    };
    // carry(u, s + 1) first receives segment s's total.
    ParallelFor(units * (segments - 1), 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t unit = task / (segments - 1), s = task % (segments - 1);
        const int64_t first = segment_begin(s);
        Reduce(layout.in + layout.offset(unit, first), layout.stride(),
               segment_begin(s + 1) - first, layout.lanes(unit), carry(unit, s + 1));
      }
    });
    for (int64_t unit = 0; unit < units; ++unit) {
      const int64_t lanes = layout.lanes(unit);
      for (int64_t s = 2; s < segments; ++s) {
        A* previous = carry(unit, s - 1);
        A* current = carry(unit, s);
        for (int64_t l = 0; l < lanes; ++l) current[l] = Op::Apply(previous[l], current[l]);
      }
    }
    ParallelFor(units * segments, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t unit = task / segments, s = task % segments;
        const int64_t first = segment_begin(s);
        const int64_t offset = layout.offset(unit, first);
        Rows(layout.in + offset, layout.out + offset, layout.stride(), segment_begin(s + 1) - first,
             layout.lanes(unit), carry(unit, s));
      }
    });
  }
};

template <typename E, typename Op>
void RunTyped(const ScanOperation& op, Tensor& output) {
  using S = typename E::Storage;
  const S* in = op.input.data_as<S>();
  S* out = output.mutable_data_as<S>();
  if (op.exclusive) {
    ScanKernel<E, Op, true>::Run(op, in, out);
  } else {
    ScanKernel<E, Op, false>::Run(op, in, out);
  }
}

}  // namespace

void ComputeScan(const ScanOperation& op, Tensor& output) {
  if (op.kind == OperatorKind::kCumulativeSummation) {
    switch (op.input.data_type) {
      case DataType::kFloat32:
        return RunTyped<PlainElement<float, float>, Add>(op, output);
      case DataType::kFloat16:
        return RunTyped<HalfElement, Add>(op, output);
      case DataType::kInt64:
        return RunTyped<PlainElement<int64_t, uint64_t>, Add>(op, output);
      case DataType::kInt32:
        return RunTyped<PlainElement<int32_t, uint32_t>, Add>(op, output);
      case DataType::kUint64:
        return RunTyped<PlainElement<uint64_t, uint64_t>, Add>(op, output);
      case DataType::kUint32:
        return RunTyped<PlainElement<uint32_t, uint32_t>, Add>(op, output);
      default:
        return;  // excluded by MakeScanOperation
    }
  }
  switch (op.input.data_type) {
    case DataType::kFloat32:
      return RunTyped<PlainElement<float, float>, Multiply>(op, output);
    case DataType::kFloat16:
      return RunTyped<HalfElement, Multiply>(op, output);
    case DataType::kUint32:
      return RunTyped<PlainElement<uint32_t, uint32_t>, Multiply>(op, output);
    case DataType::kUint16:
      return RunTyped<PlainElement<uint16_t, uint32_t>, Multiply>(op, output);
    default:
      return;  // excluded by MakeScanOperation
  }
}

}  // namespace dmlserve

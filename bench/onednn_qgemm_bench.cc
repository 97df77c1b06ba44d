// oneDNN's int8 matmul primitive on the matrix-multiply cases of
// bench/compare_onnxruntime.sh, for comparison with dmlserve's CPU backend
// (BM_CpuQGemm/<name>). Built only when Debian's libdnnl-dev (oneDNN 2.6) is
// installed; not a dependency of dmlserve and not run by CI.
//
// What oneDNN computes, against dmlserve's semantics (docs/operators.md):
//
//   oneDNN 2.6:  dst = saturate(round(output_scale * acc + dst_zero_point))
//                acc = sum_k (src - src_zero_point) * (weights - weights_zero_point)
//
// - The integer accumulation is the same: exact, in int32 (K <= 4096 keeps
//   |acc| < 2^31 for 8-bit inputs), zero points included.
// - The scales: DirectML has three (A, B, output); oneDNN 2.6 takes one
//   "output scale" per tensor or per output column, so the benchmark passes
//   a_scale * b_scale / output_scale (per column for per-column B scales),
//   computed in float32 by the caller, as dmlserve may also do.
// - Requantization: oneDNN converts acc to float32 (inexact above 2^24),
//   multiplies by the float32 output scale, adds the destination zero point,
//   saturates, and converts to int8 in the MXCSR rounding mode, round half to
//   even by default. dmlserve must match a float64 reference except within
//   1e-5 of a .5 tie; oneDNN's float32 path can differ by 1 a little more
//   often, which does not change the cost being compared.
// - Types: the x64 CPU implementation takes u8 or s8 src but s8 weights only;
//   weights zero points and output scales may be per column only where the
//   implementation allows. Cases it cannot build (u8 weights, per-column
//   weights zero points in 2.6) are reported as skipped with oneDNN's reason
//   rather than approximated.
//
// Weights are reordered from row-major {K,N} into the layout the primitive
// prefers (format_tag::any; a blocked, VNNI-packed layout on AVX-512 VNNI)
// once, outside the timed loop, for "registered_b" cases — like dmlserve's
// registered tensors and ONNX Runtime's prepacked constants — and inside
// every iteration for the per-request cases. Two OpenMP threads, like the
// other columns, or DMLSERVE_CPU_THREADS of them when it is set (as it sets
// dmlserve's pool), so a one-thread comparison is one variable away.
//
// Zero points are run-time arguments (DNNL_RUNTIME_S32_VAL): a server gets
// A's with every request. The output scale, though, is a constant of the
// primitive: in oneDNN 2.6 a run-time output scale (DNNL_RUNTIME_F32_VAL)
// rules out the fast brgemm implementation ("brg:avx512_core_vnni", packed
// weights) and falls back to "gemm:jit" on plain row-major weights. A server
// built on oneDNN 2.6 would need one primitive per distinct
// a_scale * b_scale / output_scale (oneDNN caches primitives); the
// *_runtime_scales cases show what the fallback costs. Each case's label is
// the implementation oneDNN picked.

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "benchmark/benchmark.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace {

using dnnl::memory;

// Mirrors MATMUL_CASES in bench/onnxruntime/compare.mjs (the quantization
// parameters too), so the columns of the comparison compute the same thing.
struct QGemmCase {
  memory::data_type a, b;
  int64_t m, k, n;
  bool registered_b;
  bool per_column = false;
  // Output scales as a run-time argument instead of a constant of the
  // primitive (see the note at the top).
  bool runtime_scales = false;
  // B's values in [-64, 63] (7-bit weights): where oneDNN's AVX2 int8 path,
  // which adds u8 x s8 pairs in saturating int16 (vpmaddubsw), is exact.
  bool seven_bit_b = false;
};

constexpr memory::data_type kU8 = memory::data_type::u8;
constexpr memory::data_type kS8 = memory::data_type::s8;
constexpr float kAScale = 0.02f;
constexpr float kBScale = 0.01f;
constexpr int32_t kBZeroPoint = 1;
constexpr int kDefaultThreads = 2;

int Threads() {
  const char* value = std::getenv("DMLSERVE_CPU_THREADS");
  const int threads = value == nullptr ? 0 : std::atoi(value);
  return threads > 0 ? threads : kDefaultThreads;
}

dnnl::engine& Cpu() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

int32_t SrcZeroPoint(memory::data_type type) { return type == kU8 ? 128 : 3; }

// Root mean square of (x - zero_point) for uniformly random 8-bit x.
float RootMeanSquare(memory::data_type type, int32_t zero_point) {
  const float mean = type == kU8 ? 127.5f : -0.5f;
  return std::sqrt(5461.25f + (mean - zero_point) * (mean - zero_point));
}

// The same output scale as compare.mjs: +-3 standard deviations of the
// result map to +-127.
float OutputScale(const QGemmCase& c) {
  return kAScale * kBScale * std::sqrt(static_cast<float>(c.k)) *
         RootMeanSquare(c.a, SrcZeroPoint(c.a)) * RootMeanSquare(c.b, kBZeroPoint) * 3 / 127;
}

// A memory object filled with uniformly random values of an 8-bit type
// (halved, as int8, for 7-bit values).
memory RandomInt8Memory(const memory::desc& desc, std::mt19937& rng, bool seven_bit = false) {
  memory mem(desc, Cpu());
  auto* data = static_cast<uint8_t*>(mem.get_data_handle());
  std::uniform_int_distribution<int> byte(0, 255);
  for (size_t i = 0; i < desc.get_size(); ++i) {
    const int value = byte(rng);
    data[i] = static_cast<uint8_t>(seven_bit ? static_cast<int8_t>(value) >> 1 : value);
  }
  return mem;
}

template <typename T>
memory VectorMemory(std::vector<T>& values, memory::data_type type) {
  return memory({{static_cast<int64_t>(values.size())}, type, memory::format_tag::x}, Cpu(),
                values.data());
}

int32_t Element(const memory& mem, memory::data_type type, int64_t index) {
  const auto* data = static_cast<const uint8_t*>(mem.get_data_handle());
  return type == kU8 ? data[index] : static_cast<int8_t>(data[index]);
}

// Checks sampled outputs against a float64 reference (round half to even,
// saturation) within +-1: a guard that the numbers below come from a correct
// product, not from a misconfigured primitive.
bool OutputMatches(const QGemmCase& c, const memory& src, const memory& weights, const memory& dst,
                   int32_t src_zero_point, const std::vector<int32_t>& weights_zero_points,
                   const std::vector<float>& output_scales, int32_t dst_zero_point) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> row(0, c.m - 1), column(0, c.n - 1);
  for (int sample = 0; sample < 256; ++sample) {
    const int64_t i = row(rng), j = column(rng);
    const int32_t weights_zero_point = weights_zero_points[weights_zero_points.size() == 1 ? 0 : j];
    int64_t acc = 0;
    for (int64_t p = 0; p < c.k; ++p) {
      acc += int64_t{Element(src, c.a, i * c.k + p) - src_zero_point} *
             (Element(weights, c.b, p * c.n + j) - weights_zero_point);
    }
    const double scale = output_scales[output_scales.size() == 1 ? 0 : j];
    const double expected = std::clamp(
        std::nearbyint(static_cast<double>(acc) * scale) + dst_zero_point, -128.0, 127.0);
    if (std::abs(Element(dst, kS8, i * c.n + j) - expected) > 1) return false;
  }
  return true;
}

void BM_OneDnnQGemm(benchmark::State& state, QGemmCase c) {
  omp_set_num_threads(Threads());
  std::mt19937 rng(20240607);
  const int column_mask = 1 << 1;  // dimension 1 of {M,N} / {K,N}

  // Quantization parameters, passed at run time.
  std::vector<int32_t> src_zero_point = {SrcZeroPoint(c.a)};
  std::vector<int32_t> dst_zero_point = {0};
  std::vector<float> output_scales = {kAScale * kBScale / OutputScale(c)};
  std::vector<int32_t> weights_zero_points = {kBZeroPoint};
  if (c.per_column) {
    std::uniform_real_distribution<float> spread(0.5f, 1.5f);
    std::uniform_int_distribution<int32_t> zero_point(1, 3);
    output_scales.resize(c.n);
    weights_zero_points.resize(c.n);
    for (int64_t j = 0; j < c.n; ++j) {
      output_scales[j] = kAScale * kBScale * spread(rng) / OutputScale(c);
      weights_zero_points[j] = zero_point(rng);
    }
  }

  const memory::desc src_desc({c.m, c.k}, c.a, memory::format_tag::ab);
  const memory::desc user_weights_desc({c.k, c.n}, c.b, memory::format_tag::ab);
  const memory::desc any_weights_desc({c.k, c.n}, c.b, memory::format_tag::any);
  const memory::desc dst_desc({c.m, c.n}, kS8, memory::format_tag::ab);

  dnnl::matmul::primitive_desc pd;
  try {
    dnnl::primitive_attr attr;
    if (c.runtime_scales) {
      attr.set_output_scales(c.per_column ? column_mask : 0, {DNNL_RUNTIME_F32_VAL});
    } else {
      attr.set_output_scales(c.per_column ? column_mask : 0, output_scales);
    }
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    attr.set_zero_points(DNNL_ARG_WEIGHTS, c.per_column ? column_mask : 0, {DNNL_RUNTIME_S32_VAL});
    attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_desc, any_weights_desc, dst_desc),
                                      attr, Cpu());
  } catch (const dnnl::error& e) {
    // What oneDNN does not implement (u8 weights, per-column weights zero
    // points) is reported, not approximated.
    // compare.mjs shows messages starting with "unsupported" as n/a.
    const std::string message = std::string("unsupported by oneDNN 2.6: ") + e.what();
    state.SkipWithError(message.c_str());
    return;
  }
  state.SetLabel(pd.impl_info_str());

  dnnl::stream stream(Cpu());
  memory src = RandomInt8Memory(src_desc, rng);
  memory user_weights = RandomInt8Memory(user_weights_desc, rng, c.seven_bit_b);
  memory weights(pd.weights_desc(), Cpu());
  memory dst(pd.dst_desc(), Cpu());
  dnnl::reorder pack(user_weights, weights);
  // The first reorder: the only one for registered weights, a warm-up for
  // per-request ones (which reorder again in every iteration).
  pack.execute(stream, user_weights, weights);
  stream.wait();
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src},
      {DNNL_ARG_WEIGHTS, weights},
      {DNNL_ARG_DST, dst},
      {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC,
       VectorMemory(src_zero_point, memory::data_type::s32)},
      {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_WEIGHTS,
       VectorMemory(weights_zero_points, memory::data_type::s32)},
      {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST,
       VectorMemory(dst_zero_point, memory::data_type::s32)},
  };
  if (c.runtime_scales) {
    args[DNNL_ARG_ATTR_OUTPUT_SCALES] = VectorMemory(output_scales, memory::data_type::f32);
  }
  dnnl::matmul matmul(pd);
  matmul.execute(stream, args);
  stream.wait();
  if (!OutputMatches(c, src, user_weights, dst, src_zero_point[0], weights_zero_points,
                     output_scales, dst_zero_point[0])) {
    // DMLSERVE_ONEDNN_TIME_WRONG=1 (bench/cpu_isa_report.py) times it
    // anyway, marked: how fast oneDNN's AVX2 path is on full-range int8
    // weights, which it gets wrong.
    const char* time_wrong = std::getenv("DMLSERVE_ONEDNN_TIME_WRONG");
    if (time_wrong == nullptr || std::string(time_wrong) != "1") {
      state.SkipWithError("oneDNN's output differs from the reference by more than 1");
      return;
    }
    state.counters["wrong_output"] = 1;
  }
  for (auto _ : state) {
    if (!c.registered_b) pack.execute(stream, user_weights, weights);
    matmul.execute(stream, args);
    stream.wait();
  }
  state.counters["GOP/s"] = benchmark::Counter(2.0 * c.m * c.k * c.n * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

#define DMLSERVE_ONEDNN_BENCHMARK(name, ...)                      \
  BENCHMARK_CAPTURE(BM_OneDnnQGemm, name, QGemmCase{__VA_ARGS__}) \
      ->UseRealTime()                                             \
      ->Unit(benchmark::kMillisecond)

DMLSERVE_ONEDNN_BENCHMARK(u8s8_256x4096x4096_registered_b, kU8, kS8, 256, 4096, 4096, true);
DMLSERVE_ONEDNN_BENCHMARK(u8s8_256x4096x4096, kU8, kS8, 256, 4096, 4096, false);
DMLSERVE_ONEDNN_BENCHMARK(u8s8_b7_256x4096x4096_registered_b, kU8, kS8, 256, 4096, 4096, true,
                          false, false, true);
DMLSERVE_ONEDNN_BENCHMARK(u8s8_b7_256x4096x4096, kU8, kS8, 256, 4096, 4096, false, false, false,
                          true);
DMLSERVE_ONEDNN_BENCHMARK(u8s8_per_column_256x4096x4096_registered_b, kU8, kS8, 256, 4096, 4096,
                          true, true);
DMLSERVE_ONEDNN_BENCHMARK(u8u8_256x4096x4096_registered_b, kU8, kU8, 256, 4096, 4096, true);
DMLSERVE_ONEDNN_BENCHMARK(s8s8_256x4096x4096_registered_b, kS8, kS8, 256, 4096, 4096, true);
DMLSERVE_ONEDNN_BENCHMARK(s8u8_256x4096x4096_registered_b, kS8, kU8, 256, 4096, 4096, true);
DMLSERVE_ONEDNN_BENCHMARK(u8s8_1024x1024x1024_registered_b, kU8, kS8, 1024, 1024, 1024, true);
DMLSERVE_ONEDNN_BENCHMARK(u8s8_16x4096x4096_registered_b, kU8, kS8, 16, 4096, 4096, true);
DMLSERVE_ONEDNN_BENCHMARK(u8s8_1x4096x4096_registered_b, kU8, kS8, 1, 4096, 4096, true);
DMLSERVE_ONEDNN_BENCHMARK(u8s8_b7_1x4096x4096_registered_b, kU8, kS8, 1, 4096, 4096, true, false,
                          false, true);
DMLSERVE_ONEDNN_BENCHMARK(u8s8_1x4096x4096, kU8, kS8, 1, 4096, 4096, false);
// Not in the comparison table: the same products with run-time output scales.
DMLSERVE_ONEDNN_BENCHMARK(u8s8_256x4096x4096_registered_b_runtime_scales, kU8, kS8, 256, 4096, 4096,
                          true, false, true);
DMLSERVE_ONEDNN_BENCHMARK(u8s8_1x4096x4096_registered_b_runtime_scales, kU8, kS8, 1, 4096, 4096,
                          true, false, true);

}  // namespace

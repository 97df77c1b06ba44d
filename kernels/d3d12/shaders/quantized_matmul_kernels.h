#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_KERNELS_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_KERNELS_H_

// The quantized matrix multiply kernels (docs/kernels.md, "Quantized matrix
// multiply"; hlsl/quantized_matmul.hlsl is their HLSL equivalent).
//
// qmm.gemm: one group computes a 128 x 128 block of one output slice: 16 x 16
// threads, each an 8 x 8 micro-tile (rows ty*4+{0..3} and 64+ty*4+{0..3},
// columns likewise with tx). Per K step of 8 values every thread stages 4
// values of one A row and 4 of one B column: it loads them (one word each),
// extracts them and subtracts the row's (column's) zero point ONCE, and
// stores the centred values in structured groupshared memory,
// double-buffered, so a step needs one barrier. The K loop then is, per k,
// four 16-byte groupshared loads at immediate offsets and 16 vector
// multiply-adds (64 MACs):
//   acc = sum over k of (a - a_zp) * (b - b_zp)
// in int32 (imad, the default), or in float32 (mad: FMA issues at twice the
// IMAD rate on current GPUs), which is exact because 256 such products sum
// to less than 2^24: the float sums are flushed into int32 every 256 k. On
// an H100 through vkd3d the float32 kernel measured no faster (it holds
// both accumulator sets, 64 more registers a thread: docs/benchmarks.md). The planner checks
// K * max|a - a_zp| * max|b - b_zp| < 2^31, so the int32 sum never wraps.
// Requantization in float32: round_ne(float(acc) * (a_scale * b_scale /
// output_scale)) + output_zp, saturated to the output type.
//
// With split-K (output type i32) the group index's slice part is the split
// index (a split-K product has one slice): group s computes K octs
// [s * SplitOcts, (s + 1) * SplitOcts) and stores its int32 sums in
// partials u0 (split-major, rows of N4 * 4 int32); qmm.reduce then adds the
// splits of each output word (int32 addition is associative, so the result
// is bit-identical whatever the split) and requantizes.
//
// Layouts (the planner repacks on the host):
//   t0  A: rows of K4 = ceil(K/4) words, zero-padded; values past K are
//       masked in the kernel ("masked" variants, for K % 8 != 0)
//   t1  B: per B slice, KO = ceil(K/8) blocks of N columns' 8-byte octs (8
//       consecutive k): oct o of column n at (o * N + n) * 8, so a step's
//       128 columns are 1 KiB contiguous; padding holds the column's zero
//       point (it centres to 0)
//   t2  row params, 4 dwords per output row: a_scale, output_scale (float
//       bits), a_zp, output_zp (int32)
//   t3  column params, 2 dwords per column: b_scale (float bits), b_zp;
//       one entry for every column when kQmmConstColumnParamBytes is 0
//   u0  output: rows of N4 = ceil(N/4) words, 4 int8/uint8 per word (each
//       thread writes whole words; the finisher drops the padding); or, for
//       split-K, the int32 partials

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/d3d12/shaders/kernel_abi.h"

namespace dmlserve::d3d12 {

// Root constants.
inline constexpr int kQmmConstRows = 0;            // M: rows per output slice
inline constexpr int kQmmConstColumns = 1;         // N
inline constexpr int kQmmConstDepth = 2;           // K
inline constexpr int kQmmConstDepthOcts = 3;       // KO = ceil(K / 8)
inline constexpr int kQmmConstTilesN = 4;          // ceil(N / tile_n)
inline constexpr int kQmmConstTilesPerSlice = 5;   // tiles_m * tiles_n
inline constexpr int kQmmConstChannels = 6;        // output channel count
inline constexpr int kQmmConstABatchStride = 7;    // A slices per batch (0: broadcast)
inline constexpr int kQmmConstAChannelStride = 8;  // 1, or 0 when A broadcasts
inline constexpr int kQmmConstBBatchStride = 9;
inline constexpr int kQmmConstBChannelStride = 10;
inline constexpr int kQmmConstOutputWords = 11;  // N4
// Bytes between output rows' parameter entries (t2): 16, or 0 when every row
// shares one entry (per-tensor scales and zero points), so a product of
// millions of rows does not upload 16 bytes of parameters for each.
inline constexpr int kQmmConstRowParamBytes = 12;
// Split-K: K octs per split (qmm.gemm with i32 output, qmm.rows); the
// number of splits (qmm.reduce).
inline constexpr int kQmmConstSplitOcts = 13;
inline constexpr int kQmmConstSplits = 13;
// Bytes between columns' parameter entries (t3): 8, or 0 when every column
// shares one entry (per-tensor b_scale and b_zero_point), so B's parameters
// are one 8-byte entry rather than N of them.
// (14 and 15 hold the group grid: kernel_assembler.h.)
inline constexpr int kQmmConstColumnParamBytes = 16;
// qmm.packb: 1 when it packs an outer product's B (KO blocks of slices x N
// columns, column slice * N + n), 0 for per-slice blocks of N columns.
inline constexpr int kQmmConstPackOuter = 17;

static_assert(IsKernelConstant(kQmmConstRows));
static_assert(IsKernelConstant(kQmmConstColumns));
static_assert(IsKernelConstant(kQmmConstDepth));
static_assert(IsKernelConstant(kQmmConstDepthOcts));
static_assert(IsKernelConstant(kQmmConstTilesN));
static_assert(IsKernelConstant(kQmmConstTilesPerSlice));
static_assert(IsKernelConstant(kQmmConstChannels));
static_assert(IsKernelConstant(kQmmConstABatchStride));
static_assert(IsKernelConstant(kQmmConstAChannelStride));
static_assert(IsKernelConstant(kQmmConstBBatchStride));
static_assert(IsKernelConstant(kQmmConstBChannelStride));
static_assert(IsKernelConstant(kQmmConstOutputWords));
static_assert(IsKernelConstant(kQmmConstRowParamBytes));
static_assert(IsKernelConstant(kQmmConstSplitOcts));
static_assert(IsKernelConstant(kQmmConstSplits));
static_assert(IsKernelConstant(kQmmConstColumnParamBytes));
static_assert(IsKernelConstant(kQmmConstPackOuter));

// Output of a qmm.gemm kernel: requantized int8/uint8, or int32 split-K
// partial sums for qmm.reduce.
enum class QmmOutput { kInt8, kUint8, kInt32Partial };
// How qmm.gemm multiply-adds: int32 imad, or exact float32 FMA (see above).
enum class QmmAccumulate { kInt32, kFloat32 };

struct QuantizedMatMulKernelSpec {
  bool a_signed = true;
  bool b_signed = true;
  QmmOutput output = QmmOutput::kInt8;
  QmmAccumulate accumulate = QmmAccumulate::kInt32;
  bool masked = false;  // K % 8 != 0: mask the A values past K
  static constexpr uint32_t kThreadsX = 16, kThreadsY = 16;
  static constexpr uint32_t kMicroM = 8, kMicroN = 8;
  static constexpr uint32_t kStepWords = 2;  // K words (8 values) staged per step
  static constexpr uint32_t kStepValues = kStepWords * 4;
  static constexpr uint32_t tile_m() { return kThreadsY * kMicroM; }
  static constexpr uint32_t tile_n() { return kThreadsX * kMicroN; }

  // "qmm.gemm/s8/u8/s8/t16x16m8n8k8/f32": A, B, output type (s8, u8 or i32),
  // tile shape, accumulation (i32 or f32) with "m" when masked ("f32m").
  std::string Key() const;
  static absl::StatusOr<QuantizedMatMulKernelSpec> Parse(absl::string_view key);
};

// qmm.rows: products of few rows (a GEMV, a few fused requests), where a 128
// x 128 tile would mostly compute rows that do not exist. One group of 256
// threads computes R rows (1, 2, 4, 8 or 16) x 512 columns over one split of
// K and stores int32 partials for qmm.reduce (even with one split: a thread
// owns 2 columns, half an output word). The group first stages its R rows of
// A for the whole split, centred, in groupshared memory ([row][k], 16 KiB,
// so a split holds at most 512 / R octs); then per K oct each thread loads
// its 2 columns' 8-byte octs of B (consecutive threads, consecutive 16
// bytes), extracts and centres those 16 values once, and multiply-adds them
// with every row's 8 values, read as 2 broadcast 16-byte groupshared loads.
// Per oct a thread does 16 * R MACs for about 32 + 18 * R ALU ops. B is
// streamed once, so what bounds a GEMV is the bytes in flight: each
// iteration of the K loop first loads octs_in_flight() octs of both columns
// (16 for R = 1: 32 independent 8-byte loads a thread), then uses them; the
// planner makes splits whole iterations, and the last split's remainder is
// taken in blocks of half, a quarter, ... of them. R x octs is 16 for R = 1
// and 16 (R = 16) or 8 otherwise, so the unrolled loop stays small
// (lavapipe's compiler time grows with it) while taller tiles hide latency
// with MACs. On an H100 a 1 x 4096^2 GEMV took 27 us of GPU time with 16
// octs in flight against 32.5 with 8, and a 256 MiB B streamed at 1.95-1.98
// TB/s either way (docs/benchmarks.md).
struct QuantizedMatMulRowsSpec {
  bool a_signed = true;
  bool b_signed = true;
  uint32_t rows = 16;  // R: 1, 2, 4, 8 or 16
  static constexpr uint32_t kThreads = 256;
  static constexpr uint32_t kColumnsPerThread = 2;
  static constexpr uint32_t kSharedBytes = 16384;
  static constexpr uint32_t tile_n() { return kThreads * kColumnsPerThread; }
  // K octs one split may hold (A staged whole).
  uint32_t max_split_octs() const { return kSharedBytes / (rows * 32); }
  uint32_t octs_in_flight() const { return rows == 1 ? 16 : rows >= 8 ? 1 : 8 / rows; }
  std::string Key() const;  // "qmm.rows/s8/u8/r16"
  static absl::StatusOr<QuantizedMatMulRowsSpec> Parse(absl::string_view key);
};

// qmm.reduce: adds the split-K partials of one output word per thread and
// requantizes them like qmm.gemm. Bindings: t2, t3 as qmm.gemm, t0 the
// partials, u0 the output.
struct QuantizedMatMulReduceSpec {
  bool output_signed = true;
  static constexpr uint32_t kThreads = 256;
  std::string Key() const;  // "qmm.reduce/s8"
  static absl::StatusOr<QuantizedMatMulReduceSpec> Parse(absl::string_view key);
};

// qmm.packb: packs a B that is not registered (uploaded as it is, [slices][K]
// [N] bytes, t0) into the octs layout above (u0), on the device rather than
// the host: one thread per oct, zero points (t1, the column parameters) past
// K. Constants: kQmmConstDepth K, kQmmConstDepthOcts KO, kQmmConstColumns N,
// kQmmConstChannels the slices, kQmmConstPackOuter the layout (per slice,
// or an outer product's). A registered B is packed once on the host and
// stays resident instead.
struct QuantizedMatMulPackSpec {
  static constexpr uint32_t kThreads = 64;
  static constexpr const char* kKey = "qmm.packb";
};

absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulKernel(
    const QuantizedMatMulKernelSpec& spec);
absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulPackKernel();
absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulRowsKernel(
    const QuantizedMatMulRowsSpec& spec);
absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulReduceKernel(
    const QuantizedMatMulReduceSpec& spec);

// What one multiply-adding kernel computes, for reports: a group's tile, and
// per thread and iteration of its K loop, the K values and MACs.
struct QuantizedMatMulKernelShape {
  uint32_t tile_m = 0, tile_n = 0;
  uint32_t k_per_iteration = 0;
  uint32_t thread_macs_per_iteration = 0;
  bool split_k_partials = false;  // stores int32 partials for qmm.reduce
};
// NOT_FOUND for qmm.reduce and qmm.packb (no multiply-adds),
// INVALID_ARGUMENT for a bad key.
absl::StatusOr<QuantizedMatMulKernelShape> QuantizedMatMulShapeOf(absl::string_view key);

// Builds any of them from its key ("qmm.gemm/...", "qmm.rows/...",
// "qmm.reduce/...", "qmm.packb").
absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulKernelForKey(absl::string_view key);

// Every kernel key the planner can dispatch.
std::vector<std::string> AllQuantizedMatMulKernelKeys();

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_KERNELS_H_

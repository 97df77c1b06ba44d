#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_KERNELS_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_KERNELS_H_

// The quantized matrix multiply kernel (docs/kernels.md, "Quantized matrix
// multiply"; hlsl/quantized_matmul.hlsl is its HLSL equivalent).
//
// One group computes a (tile_m x tile_n) block of one output slice: 16 x 16
// threads, each a 4 x 4 micro-tile (so 64 x 64). Per K step the group stages
// 8 words (32 int8 values) of 64 A rows and 64 B columns in groupshared
// memory, 4 values packed per word, and every thread unpacks them with
// ibfe/ubfe and multiply-adds in int32. Zero points are folded in at the end
// from the row sums of A and column sums of B accumulated alongside:
//   acc = sum(a*b) - zb*sum(a) - za*sum(b) + K*za*zb   (wrapping int32,
// exact whenever the true sum fits: the planner checks K against the bound).
// Requantization in float32: round_ne(float(acc) * (a_scale * b_scale /
// output_scale)) + output_zp, saturated to the output type.
//
// Layouts (the planner repacks on the host):
//   t0  A: rows of K4 = ceil(K/4) words (4 consecutive k per word, zero pad)
//   t1  B: per B slice, N columns of K4 words (B transposed, K packed)
//   t2  row params, 4 dwords per output row: a_scale, output_scale (float
//       bits), a_zp, output_zp (int32)
//   t3  column params, 2 dwords per column: b_scale (float bits), b_zp
//   u0  output: rows of N4 = ceil(N/4) words, 4 int8/uint8 per word (each
//       thread writes whole words; the finisher drops the padding)

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dmlserve::d3d12 {

// Root constants.
inline constexpr int kQmmConstRows = 0;            // M: rows per output slice
inline constexpr int kQmmConstColumns = 1;         // N
inline constexpr int kQmmConstDepth = 2;           // K
inline constexpr int kQmmConstDepthWords = 3;      // K4
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

struct QuantizedMatMulKernelSpec {
  bool a_signed = true;
  bool b_signed = true;
  bool output_signed = true;
  // Fixed shape today; part of the key so that others can be added.
  static constexpr uint32_t kThreadsX = 16, kThreadsY = 16;
  static constexpr uint32_t kMicroM = 4, kMicroN = 4;
  static constexpr uint32_t kStepWords = 8;  // K words staged per step
  static constexpr uint32_t tile_m() { return kThreadsY * kMicroM; }
  static constexpr uint32_t tile_n() { return kThreadsX * kMicroN; }

  // "qmm.gemm/s8/u8/s8/t16x16m4n4k8": A, B, output signedness, tile shape.
  std::string Key() const;
  static absl::StatusOr<QuantizedMatMulKernelSpec> Parse(absl::string_view key);
};

absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulKernel(
    const QuantizedMatMulKernelSpec& spec);

std::vector<QuantizedMatMulKernelSpec> AllQuantizedMatMulKernelSpecs();

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_KERNELS_H_

#include "kernels/d3d12/shaders/quantized_matmul_b_forms.h"

namespace dmlserve::d3d12 {

std::shared_ptr<const Buffer> PackBOcts(const QuantizedMatMulOperation& op) {
  const uint64_t slices = uint64_t{op.b_batch} * op.b_channel;
  const uint32_t ko = DepthOcts(op.k);
  std::shared_ptr<Buffer> packed = Buffer::Uninitialized(slices * ko * op.n * 8);
  const uint8_t* b = op.b.data();
  uint8_t* out = reinterpret_cast<uint8_t*>(packed->data());
  for (uint64_t s = 0; s < slices; ++s) {
    const uint8_t* slice = b + s * op.k * op.n;
    uint8_t* slice_out = out + s * ko * op.n * 8;
    for (uint32_t k = 0; k < op.k; ++k) {
      const uint8_t* row = slice + uint64_t{k} * op.n;
      uint8_t* oct = slice_out + (uint64_t{k / 8} * op.n) * 8 + k % 8;
      for (uint32_t n = 0; n < op.n; ++n) oct[uint64_t{n} * 8] = row[n];
    }
    for (uint32_t k = op.k; k < ko * 8; ++k) {
      uint8_t* oct = slice_out + (uint64_t{k / 8} * op.n) * 8 + k % 8;
      for (uint32_t n = 0; n < op.n; ++n) {
        oct[uint64_t{n} * 8] = static_cast<uint8_t>(ZeroPointAt(op.b_zero_point, n));
      }
    }
  }
  return packed;
}

std::shared_ptr<const Buffer> PackOuterBOcts(const QuantizedMatMulOperation& op) {
  const uint64_t columns = uint64_t{op.b_channel} * op.n;
  const uint32_t ko = DepthOcts(op.k);
  std::shared_ptr<Buffer> packed = Buffer::Uninitialized(ko * columns * 8);
  uint8_t* out = reinterpret_cast<uint8_t*>(packed->data());
  for (uint32_t c = 0; c < op.b_channel; ++c) {
    const uint8_t* slice = op.b.data() + uint64_t{c} * op.k * op.n;
    for (uint32_t k = 0; k < ko * 8; ++k) {
      uint8_t* oct = out + (uint64_t{k / 8} * columns + uint64_t{c} * op.n) * 8 + k % 8;
      for (uint32_t n = 0; n < op.n; ++n) {
        oct[uint64_t{n} * 8] = k < op.k ? slice[uint64_t{k} * op.n + n]
                                        : static_cast<uint8_t>(ZeroPointAt(op.b_zero_point, n));
      }
    }
  }
  return packed;
}

}  // namespace dmlserve::d3d12

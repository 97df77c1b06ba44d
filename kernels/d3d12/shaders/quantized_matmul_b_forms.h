#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_B_FORMS_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_B_FORMS_H_

// B of a quantized matrix multiply packed on the host into the octs the
// qmm kernels load (quantized_matmul_kernels.h): how a registered B is made
// resident, and how any B is packed when the planner is told to pack on the
// host (QuantizedMatMulPlannerOptions::pack_b_on_device false). qmm.packb
// makes the same bytes on the device.

#include <cstdint>
#include <memory>

#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve::d3d12 {

// Element `index` itself of a present INT8/UINT8 zero point (no broadcast).
inline int32_t ZeroPointValue(const Tensor& t, uint64_t index) {
  return t.data_type == DataType::kInt8 ? static_cast<int32_t>(t.data_as<int8_t>()[index])
                                        : static_cast<int32_t>(t.data_as<uint8_t>()[index]);
}

// Element i of an INT8/UINT8 zero point (0 when absent), per-tensor
// broadcast.
inline int32_t ZeroPointAt(const Tensor& t, uint64_t i) {
  if (!t.present()) return 0;
  return ZeroPointValue(t, t.element_count() == 1 ? 0 : i);
}

// K octs: 8 consecutive k values, the unit the kernels load B in.
inline uint32_t DepthOcts(uint32_t k) { return (k + 7) / 8; }

// B [slices, K, N] -> per slice, KO blocks of N columns' octs (oct o of
// column n at (o * N + n) * 8); k past K holds the column's zero point,
// which the kernels centre to 0.
std::shared_ptr<const Buffer> PackBOcts(const QuantizedMatMulOperation& op);

// B {1, C, K, N} -> KO blocks of C * N columns' octs, column c * N + n
// holding B[c][:, n]; k past K holds the column's zero point.
std::shared_ptr<const Buffer> PackOuterBOcts(const QuantizedMatMulOperation& op);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_B_FORMS_H_

#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_EPILOGUE_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_EPILOGUE_H_

// Code that the quantized matrix multiply kernels (qmm.gemm, qmm.reduce)
// share: requantizing int32 sums into output words, so every path rounds the
// same way.

#include "kernels/d3d12/shaders/kernel_assembler.h"

namespace dmlserve::d3d12 {

// Requantizes 4 int32 sums of one output row into one output word and stores
// it at `address` of u0: round_ne(float(acc) * (a_scale * b_scale /
// output_scale)) + output_zp, saturated to int8 (`output_signed`) or uint8.
// `row_params` is the row's entry (a_scale, output_scale, a_zp, output_zp),
// `b_scale` the 4 columns' scales.
void EmitRequantizeWord(KernelAssembler& a, const dxbc::Operand& acc,
                        const dxbc::Operand& row_params, const dxbc::Operand& b_scale,
                        bool output_signed, const dxbc::Operand& address);

// Loads b_scale of columns column0..column0+3 into `scale` (0 for columns at
// or past N).
void EmitColumnScales(KernelAssembler& a, const dxbc::Operand& column0, const dxbc::Operand& scale);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_QUANTIZED_MATMUL_EPILOGUE_H_

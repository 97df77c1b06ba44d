#include "kernels/cpu/qgemm_rows.h"

#include <algorithm>
#include <cstring>

namespace dmlserve {
namespace {

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

// Appends rows [m_begin, m_end) of A slice `a_slice` of `op`, writing to
// output slice `out_slice` of `output`.
void AddRows(const QuantizedMatMulOperation& op, uint64_t a_slice, Tensor& output,
             uint64_t out_slice, uint32_t m_begin, uint32_t m_end, std::vector<QGemmRow>& rows) {
  const bool output_signed = op.output_data_type == DataType::kInt8;
  const uint8_t* a = op.a.data() + a_slice * op.m * op.k;
  uint8_t* out = output.mutable_data() + out_slice * op.m * op.n;
  for (uint32_t m = m_begin; m < m_end; ++m) {
    QGemmRow row;
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

}  // namespace

void QGemmRowList::Fill(uint64_t first, size_t count, std::vector<QGemmRow>& rows) const {
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

}  // namespace dmlserve

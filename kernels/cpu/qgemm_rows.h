#ifndef DMLSERVE_KERNELS_CPU_QGEMM_ROWS_H_
#define DMLSERVE_KERNELS_CPU_QGEMM_ROWS_H_

// The rows of one product of the int8 GEMM driver (qgemm_driver.h): every
// row of A that is multiplied by the same B, whichever operation (request)
// and A slice it comes from, with its own quantization parameters and the
// place its output goes.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"

namespace dmlserve {

// One row of the stacked A and where its results go.
struct QGemmRow {
  const uint8_t* a;  // K elements of A's type
  bool a_signed;
  int32_t a_zero_point;
  float a_scale;
  float output_scale;
  int32_t output_zero_point;
  int32_t low, high;  // output type range
  uint8_t* out;       // N elements of the output type
};

// The rows of one product: the M rows of each (operation, A slice) added, in
// order. QGemmRows (~56 bytes each) are made on demand a chunk at a time, so a
// request of 48M one-byte rows never holds 48M of them.
class QGemmRowList {
 public:
  void Add(const QuantizedMatMulOperation& op, uint64_t a_slice, Tensor& output,
           uint64_t out_slice) {
    if (op.m == 0) return;
    segments_.push_back({&op, a_slice, &output, out_slice, total_});
    total_ += op.m;
  }
  uint64_t size() const { return total_; }

  // Replaces `rows` with rows [first, first + count) (first + count <= size()).
  void Fill(uint64_t first, size_t count, std::vector<QGemmRow>& rows) const;

 private:
  struct Segment {
    const QuantizedMatMulOperation* op;
    uint64_t a_slice;
    Tensor* output;
    uint64_t out_slice;
    uint64_t start;  // index of its first row in the list
  };
  std::vector<Segment> segments_;
  uint64_t total_ = 0;
};

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_QGEMM_ROWS_H_

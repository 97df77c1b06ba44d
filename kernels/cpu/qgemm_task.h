#ifndef DMLSERVE_KERNELS_CPU_QGEMM_TASK_H_
#define DMLSERVE_KERNELS_CPU_QGEMM_TASK_H_

// One task of the int8 GEMM driver (qgemm_driver.h): a block of rows x
// columns of one product's output, multiplied into an int32 tile by one
// level's micro-kernel (qgemm_ukernel.h), depth block by depth block, then
// corrected for the zero points and requantized into each row's output.
// Tasks of one product run concurrently on the thread pool; each borrows its
// scratch memory for as long as it runs.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/packed_a.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_rows.h"
#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve {

// B as one task sees it: either fully packed, or packed panel by panel from
// the request's bytes (`packed` null).
struct QGemmBOperand {
  const PackedB* packed = nullptr;
  BSource source;
  const BColumns* columns = nullptr;
  // With one strip, the packed strip rearranged for the narrow path (every
  // quad, depth blocks at their quad offsets), else null.
  const int8_t* narrow = nullptr;
  // The whole B repacked for the kernel's repack_b, when PackB did it (strip
  // s at s * repacked_strip_stride), else null: each task repacks its own.
  const int8_t* repacked = nullptr;
  size_t repacked_strip_stride = 0;
};

// One task of a product: output rows [row0, row0 + rows) (indices into `a`;
// row i is jobs[job0 + i]) x columns [column0, column0 + columns). The
// fields above the blank line are the same for every task of a product
// (RunPanels fills in `a`, `jobs` and `job0` per panel of A, the rest per
// task).
struct QGemmTask {
  const CpuKernels* cpu = nullptr;       // the level's packers and epilogue
  const QGemmUkernel* kernel = nullptr;  // cpu->qgemm, or one it substitutes
  const QGemmBOperand* b = nullptr;
  size_t depth_block = 0;  // quads are walked depth_block / 4 at a time
  const PackedA* a = nullptr;
  const std::vector<QGemmRow>* jobs = nullptr;
  size_t job0 = 0;  // a's row 0 is jobs[job0]

  size_t row0 = 0, rows = 0;        // row0: a multiple of kernel->mr
  size_t column0 = 0, columns = 0;  // column0: a multiple of 16
};

// Computes and requantizes `task`'s block of the output: out[row][column]
// for its rows and columns, exactly (see quantized_matmul_kernels.h).
void RunQGemmTask(const QGemmTask& task);

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_QGEMM_TASK_H_

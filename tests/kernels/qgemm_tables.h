#ifndef DMLSERVE_TESTS_KERNELS_QGEMM_TABLES_H_
#define DMLSERVE_TESTS_KERNELS_QGEMM_TABLES_H_

// The int8 GEMM's kernel tables under test: every level this CPU runs, the
// tile path on the scalar model of the tiles, and the driver's other
// blockings and thresholds, each made once and held for the process. Shared
// by the GEMM's tests (qgemm_*_test.cc) and the exactness fuzzer
// (tests/fuzz/kernel_exactness_fuzzer.cc); no gtest here.

#include <vector>

#include "kernels/core/operation.h"
#include "kernels/core/tensor.h"
#include "kernels/cpu/cpu_kernels.h"

namespace dmlserve::testing {

// The tables of the SIMD levels this CPU runs (every one but the first,
// the portable level's).
std::vector<const CpuKernels*> SimdTables();

const CpuKernels& PortableTable();

// Every table the CPU runs, and the amx level on the model of the tiles
// (which runs anywhere): the tile path's blocking, edges and level choice
// are tested on every machine, its instructions natively where the CPU has
// them (the amx table among AvailableCpuKernels()).
std::vector<const CpuKernels*> TablesUnderTest();

// `op` computed with `table`'s kernels, B registered (packed whole once,
// through a cache of its own) or sent with the request (packed per call, or
// per task where the driver streams it).
Tensor ComputeWithTable(const QuantizedMatMulOperation& op, const CpuKernels& table,
                        bool registered);

}  // namespace dmlserve::testing

#endif  // DMLSERVE_TESTS_KERNELS_QGEMM_TABLES_H_

#ifndef DMLSERVE_KERNELS_CPU_PACKED_A_H_
#define DMLSERVE_KERNELS_CPU_PACKED_A_H_

// The A operand of a quantized matrix multiply as the micro-kernels read it
// (see qgemm_ukernel.h): rows of A' = A (UINT8) or A + 128 (INT8), each
// zero-padded to whole quads, and each row's sum, which the int32
// corrections need. One exception: an INT8 A that a kernel with a signed_a
// variant (the AMX tiles) can read in place is used as is, A' = A
// (PackedA::raw_signed).

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/packed_b.h"
#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve {

struct CpuKernels;  // cpu_kernels.h

// One row of A as it arrived: K elements.
struct ARowSource {
  const uint8_t* data;
  bool is_signed;  // INT8 (else UINT8)
};

struct PackedA {
  size_t k = 0;
  size_t stride = 0;  // bytes between rows (2 per value for a wide-A kernel)
  // The rows are an INT8 A used in place as is: A' = A (signed), read by the
  // kernel's signed_a variant; its zero point is not shifted, and its row
  // sums are of the signed values (SumSignedBytes).
  bool raw_signed = false;
  // sum over k of A'[i][k]; empty when PackA was asked not to compute them
  // (the caller sums rows() itself, see SumBytes).
  std::vector<int32_t> row_sums;

  // Rows first .. first + mr - 1 (first a multiple of mr), at `stride`
  // bytes from one another. A row's last quad may run past K into the next
  // row's bytes: packed B is zero there, so they add nothing.
  const uint8_t* rows(size_t first) const {
    return first < tail_first ? data + first * stride : tail + (first - tail_first) * stride;
  }

  const uint8_t* data = nullptr;  // row i at data + i * stride (i < tail_first)
  // The last blocks of mr rows when A is used in place but their last quads
  // would read past the end of the request's bytes: a copy with room for it.
  size_t tail_first = 0;
  const uint8_t* tail = nullptr;
  AlignedBytes storage;  // what `data` or `tail` point into, when copied
};

// Whether PackA uses `rows` in place for `kernel`: rows one after another in
// memory, read as bytes (not wide), all UINT8, or all INT8 when the kernel
// has a signed_a variant.
bool PacksAInPlace(absl::Span<const ARowSource> rows, size_t k, const QGemmUkernel& kernel);

// Bytes between rows of A copied by PackA for `kernel`: whole quads (of
// bytes, or of int16 for a wide-A kernel), or for a kernel whose blocking
// asks for it (QGemmBlocking::copy_a) whole 64-byte lines plus one, so that
// no two of 64 consecutive rows start in the same L1 set.
size_t PackedAStride(size_t k, const QGemmUkernel& kernel);

// Packs `rows` (K elements each) for `kernel` (its mr rows per call,
// whether it reads A wide, whether it has a signed_a variant) with the packers of `cpu` (the table
// of the ISA level `kernel` belongs to, or of any other level the CPU runs: every level's packers
// write the same bytes). When they are UINT8 and lie one after another in memory (one request's A
// slice) and the kernel reads bytes, they are used in place and only their sums are computed (plus
// a copy of the last blocks of rows when K is not a multiple of 4); otherwise they are copied
// (shifted for INT8, zero-padded to whole quads, widened to int16 for a wide-A kernel) into
// `storage`, and their sums are always computed. Runs on the ParallelFor pool. With `sums` false,
// rows used in place are not read at all (a copy still gets its sums, for free) : a caller that
// reads each row only once anyway sums it then, from cache, instead of reading A from memory twice.
void PackA(absl::Span<const ARowSource> rows, size_t k, const QGemmUkernel& kernel,
           const CpuKernels& cpu, bool sums, PackedA& packed);

// The sum of `count` bytes (rows of A' as PackedA::rows() gives them), with
// cpu's packer: as uint8, or as int8 (SumSignedBytes, for raw_signed rows).
int32_t SumBytes(const uint8_t* bytes, size_t count, const CpuKernels& cpu);
int32_t SumSignedBytes(const uint8_t* bytes, size_t count, const CpuKernels& cpu);

// The packers of one row, one per ISA level (CpuKernels::pack_a_row,
// pack_a_wide_row). Each copies one row of A' (row.data[j], XOR 0x80 when
// row.is_signed) to `out`, `k` values and then zeros up to `padded` (>= k),
// and returns the sum of the k values. PackARowFn writes bytes, and with
// `out` null only sums (reading nothing past k); PackAWideRowFn writes each
// value as an int16 (a wide-A kernel's layout, see qgemm_ukernel.h) and
// needs `out`. Every version writes the same values and returns the same sum.
using PackARowFn = int32_t (*)(const ARowSource& row, size_t k, size_t padded, uint8_t* out);
using PackAWideRowFn = int32_t (*)(const ARowSource& row, size_t k, size_t padded, int16_t* out);

int32_t PackARowPortable(const ARowSource& row, size_t k, size_t padded, uint8_t* out);
int32_t PackAWideRowPortable(const ARowSource& row, size_t k, size_t padded, int16_t* out);
#if DMLSERVE_X86
// packed_a_avx2.cc: only on CPUs with AVX2.
int32_t PackARowAvx2(const ARowSource& row, size_t k, size_t padded, uint8_t* out);
int32_t PackAWideRowAvx2(const ARowSource& row, size_t k, size_t padded, int16_t* out);
// packed_a_avx512.cc: only on CPUs with AVX-512 F and BW.
int32_t PackARowAvx512(const ARowSource& row, size_t k, size_t padded, uint8_t* out);
#endif

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_PACKED_A_H_

#ifndef DMLSERVE_KERNELS_CPU_PACKED_B_H_
#define DMLSERVE_KERNELS_CPU_PACKED_B_H_

// The B operand of a quantized matrix multiply in the micro-kernels' layout
// (see qgemm_ukernel.h), the packing routine that makes it, and a cache of it
// for registered (long-lived) B tensors.

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/string_view.h"
#include "kernels/core/buffer_pool.h"
#include "kernels/core/operation.h"
#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/qgemm_ukernel.h"

namespace dmlserve {

struct CpuKernels;  // cpu_kernels.h

// One row-major K x N slice of B as it arrived.
struct BSource {
  const uint8_t* data = nullptr;
  bool is_signed = false;  // INT8 (else UINT8)
  size_t k = 0, n = 0;

  // Slice `slice` (b_batch * b_channel order) of op's B.
  static BSource Of(const QuantizedMatMulOperation& op, uint64_t slice);
};

// When N is not a multiple of 16, the first padding column of packed B
// (column N) holds ones down to K instead of zeros: its dot product with a
// row of A' is that row's sum, which the corrections need, computed by the
// micro-kernel for free while the row is in registers. kNoRowSumColumn when
// N leaves no padding column.
inline constexpr size_t kNoRowSumColumn = ~size_t{0};
inline size_t RowSumColumn(size_t n) { return n % kQGemmStripColumns != 0 ? n : kNoRowSumColumn; }

// 0x80 for UINT8 B: XOR with it subtracts 128, turning uint8 into int8 (B').
inline uint8_t FlipOf(const BSource& b) { return b.is_signed ? 0 : 0x80; }

// A panel of packed B to write: rows [4 * quad0, 4 * (quad0 + quads)) of
// strips [strip0, strip0 + strips) of B' (B, or B - 128 for UINT8) in the
// micro-kernel layout, strip s at out + (s - strip0) * strip_stride, quad q of
// it at (q - quad0) * kQGemmQuadBytes; the sum of each column j's written
// values is added to column_sums[j - 16 * strip0] (exact in int32 for any K
// the operation allows). `strips` need not be even, nor a multiple of 4.
struct BPanel {
  BSource b;
  size_t quad0 = 0, quads = 0;
  size_t strip0 = 0, strips = 0;
  int8_t* out = nullptr;
  size_t strip_stride = 0;
  int32_t* column_sums = nullptr;
};

// Writes `panel`. Depth values past K and columns past N are written as
// zeros, except the row-sum column (above). cpu's packer does the work
// (every level's writes the same bytes).
void PackBPanel(const BPanel& panel, const CpuKernels& cpu);

// The packers of one panel, one per ISA level (CpuKernels::pack_b_panel):
// each writes the panel as PackBPanel does, with zeros in the row-sum column
// too (PackBPanel then writes its ones), and adds the column sums. Every
// version writes the same bytes and sums.
using PackBPanelFn = void (*)(const BPanel& panel);

void PackBPanelPortable(const BPanel& panel);
#if DMLSERVE_X86
// The rows of one packing step are N bytes apart, a pattern the hardware
// prefetchers follow too late: both SIMD packers ask for the same columns
// this many rows ahead (a hint; past the end it is dropped).
inline constexpr size_t kPackBPrefetchRows = 128;
// packed_b_avx2.cc: only on CPUs with AVX2.
void PackBPanelAvx2(const BPanel& panel);
// packed_b_avx512.cc: only on CPUs with AVX-512 F, BW, VL and VNNI.
void PackBPanelAvx512(const BPanel& panel);
#endif

// What the int32 corrections and the requantization need of B's columns.
struct BColumns {
  // zb' = b_zero_point (0 when absent) - (128 for UINT8 B, else 0), per
  // column.
  std::vector<int32_t> zero_points;
  // Whether zb' is the same for every column (a per-tensor zero point).
  bool uniform_zero_point = true;
  std::vector<float> scales;  // b_scale per column

  static BColumns Of(const QuantizedMatMulOperation& op);
};

// 64-byte aligned bytes (one cache line, one zmm), uninitialised, from the
// process-wide BufferPool: packing the same sizes call after call reuses
// memory that is already mapped instead of faulting in fresh pages.
struct PooledBlockRelease {
  size_t capacity = 0;
  void operator()(int8_t* p) const { BufferPool::Get().Release({p, capacity}); }
};
using AlignedBytes = std::unique_ptr<int8_t[], PooledBlockRelease>;
AlignedBytes AllocateAligned(size_t bytes);

// One whole B slice packed.
struct PackedB {
  size_t k = 0, n = 0;
  size_t quads = 0;   // ceil(K / 4)
  size_t strips = 0;  // ceil(N / 16)
  // strips * strip_stride() bytes; null when PackB was told the rows and
  // their kernel reads only `repacked` (see PackB).
  AlignedBytes values;
  BColumns columns;
  // sum over k of B'[k][j] - K * zb'[j]: with the row sums of A' this turns
  // the u8 x s8 dot products into sum (A - za)(B - zb); see
  // RequantizeTile in qgemm_task.cc.
  std::vector<int32_t> corrections;
  // Every value of B' (padding included) lies in [-64, 63]: a micro-kernel's
  // seven_bit_b kernel is exact on it (see qgemm_ukernel.h). Checked only
  // when packed for a kernel that has one; false otherwise.
  bool seven_bit = false;
  // B' as repacked_by (the repack_b of the kernel that will read it, see
  // PackB) leaves it: every strip, repacked_strip_stride() bytes each.
  // Null when no kernel reads B repacked (at AVX2: when B fits 7 bits).
  QGemmStripRepackFn repacked_by = nullptr;
  size_t repacked_quad_bytes = 0;
  AlignedBytes repacked;

  // One cache line more than the strip: the strips a micro-kernel reads
  // together would otherwise (with power-of-two K) all map to the same L1
  // set and evict one another.
  size_t strip_stride() const { return (quads + 1) * kQGemmQuadBytes; }
  // Requires values (not null).
  const int8_t* strip(size_t s) const { return values.get() + s * strip_stride(); }
  size_t repacked_strip_stride() const { return quads * repacked_quad_bytes; }
  size_t byte_size() const {
    return strips * ((values != nullptr ? strip_stride() : 0) + repacked_strip_stride()) +
           n * (2 * sizeof(int32_t) + sizeof(float));
  }
};

// PackB's `rows` for a B packed for any product (a registered one, cached).
inline constexpr uint64_t kPackBAnyRows = ~uint64_t{0};

// Packs slice `slice` of op's B (in parallel on the ParallelFor pool) with
// cpu's packer, for cpu's micro-kernel (cpu.qgemm, "the kernel" below), for
// a product of `rows` rows of A, or for any (kPackBAnyRows). When the kernel
// that would multiply it by that many rows (any: many; ChooseQGemmUkernel)
// reads B repacked, it is repacked too,
// once, here: a registered B then costs that kernel nothing per call, and
// takes that much more memory (AVX2's int16 pairs: 3x B's size in all,
// counted by byte_size() and so by PackedBCache). A B that fits 7 bits is
// read by the 7-bit kernel instead and is not repacked at all (the repack
// waits for the first wider value). For a known row count
// whose kernel reads B repacked, the strips are kept only if B fits 7 bits:
// otherwise `values` is null and only the repacked copy exists.
std::shared_ptr<const PackedB> PackB(const QuantizedMatMulOperation& op, uint64_t slice,
                                     const CpuKernels& cpu, uint64_t rows = kPackBAnyRows);

// Packed copies of registered B tensors, keyed by registered id, slice, scales
// and zero points, least recently used first out once over `capacity_bytes`.
// Thread-safe.
class PackedBCache {
 public:
  explicit PackedBCache(uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // The packed slice, from the cache when op.b is registered (and packed
  // before, for any row count), freshly packed (and remembered) otherwise;
  // a B not registered is packed for `rows` rows only (see PackB).
  std::shared_ptr<const PackedB> Get(const QuantizedMatMulOperation& op, uint64_t slice,
                                     const CpuKernels& cpu, uint64_t rows = kPackBAnyRows);

  bool Contains(absl::string_view registered_id) const;
  void Evict(absl::string_view registered_id);
  uint64_t memory_bytes() const;

 private:
  struct Entry {
    std::string key;
    std::string registered_id;
    std::weak_ptr<const Buffer> bytes;  // the registered tensor packed
    std::shared_ptr<const PackedB> packed;
  };
  void EvictOverCapacityLocked();

  const uint64_t capacity_bytes_;
  mutable std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> by_key_;
  uint64_t bytes_ = 0;
};

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_PACKED_B_H_

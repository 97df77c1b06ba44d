#include "kernels/cpu/packed_b.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "kernels/cpu/isa_portability.h"

#if DMLSERVE_X86
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "kernels/core/parallel_for.h"
#include "kernels/cpu/cpu_kernels.h"

namespace dmlserve {
namespace {

void PackPanel(const BSource& b, size_t quad0, size_t quads, size_t strip0, size_t strips,
               int8_t* out, size_t strip_stride, int32_t* column_sums) {
  const uint8_t flip = FlipOf(b);
  for (size_t q = 0; q < quads; ++q) {
    const size_t k = 4 * (quad0 + q);
    for (size_t s = 0; s < strips; ++s) {
      int8_t* quad = out + s * strip_stride + q * kQGemmQuadBytes;
      for (size_t j = 0; j < kQGemmStripColumns; ++j) {
        const size_t column = (strip0 + s) * kQGemmStripColumns + j;
        int32_t sum = 0;
        for (size_t r = 0; r < 4; ++r) {
          int8_t value = 0;
          if (k + r < b.k && column < b.n) {
            value = static_cast<int8_t>(b.data[(k + r) * b.n + column] ^ flip);
          }
          quad[j * 4 + r] = value;
          sum += value;
        }
        column_sums[s * kQGemmStripColumns + j] += sum;
      }
    }
  }
}

// Whether every one of `count` bytes, as int8, lies in [-64, 63]: adding 64
// maps that range, and only it, to [0, 127]. Branch-free, so it vectorises
// (about a byte per cycle per lane at the baseline ISA); it reads what the
// task just packed, from cache.
bool FitsSevenBits(const int8_t* bytes, size_t count) {
  uint8_t outside = 0;
  for (size_t i = 0; i < count; ++i) {
    outside |= static_cast<uint8_t>(static_cast<uint8_t>(bytes[i]) + 64) & 0x80;
  }
  return outside == 0;
}

// Quads PackB packs (and checks and repacks) at a time: with 16 strips,
// 128 KiB of packed bytes, which stay in L2 for the passes that follow.
constexpr size_t kPackChunkQuads = 128;

// Columns packed by one task of PackB: their rows are read 4 x 256 bytes at
// a time and written to 16 strips, which keeps both sides within a few
// pages (B rows are often exactly one 4 KiB page apart).
constexpr size_t kStripsPerTask = 16;

// Packed strips or a repacked copy at least this large (more than the
// caches keep for the first call to read) are written with streaming stores:
// each cache line is written without being read first, half the memory
// traffic of an ordinary store, and without evicting what the caches hold.
// (Packing a 7-bit 16 MiB B straight into its strips with ordinary stores
// took 15.6% of a 256 x 4096 x 4096 product with B per request.)
constexpr size_t kStreamBytes = size_t{8} << 20;

// Copies `bytes` (a multiple of 16) from `in` to `out` (both 16-byte
// aligned) with streaming stores; the caller fences (FenceStreamingStores)
// before another thread reads `out`.
void StreamCopy(int8_t* out, const int8_t* in, size_t bytes) {
#if DMLSERVE_X86
  for (size_t i = 0; i < bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm_load_si128(reinterpret_cast<const __m128i*>(in + i)));
  }
#else
  std::memcpy(out, in, bytes);
#endif
}

void FenceStreamingStores() {
#if DMLSERVE_X86
  _mm_sfence();
#endif
}

}  // namespace

// The portable packer; the SIMD ones are in packed_b_<isa>.cc.
void PackBPanelPortable(const BPanel& p) {
  PackPanel(p.b, p.quad0, p.quads, p.strip0, p.strips, p.out, p.strip_stride, p.column_sums);
}

BSource BSource::Of(const QuantizedMatMulOperation& op, uint64_t slice) {
  BSource b;
  b.k = op.k;
  b.n = op.n;
  b.is_signed = op.b.data_type == DataType::kInt8;
  b.data = op.b.data() + slice * op.k * op.n;
  return b;
}

void PackBPanel(const BPanel& panel, const CpuKernels& cpu) {
  cpu.pack_b_panel(panel);
  // The row-sum column: ones down to K (see RowSumColumn).
  const BSource& b = panel.b;
  const size_t quad0 = panel.quad0, quads = panel.quads;
  const size_t strip0 = panel.strip0, strips = panel.strips;
  const size_t column = RowSumColumn(b.n);
  if (column != kNoRowSumColumn && column / kQGemmStripColumns >= strip0 &&
      column / kQGemmStripColumns < strip0 + strips) {
    int8_t* strip = panel.out + (column / kQGemmStripColumns - strip0) * panel.strip_stride +
                    (column % kQGemmStripColumns) * 4;
    for (size_t q = 0; q < quads; ++q) {
      for (size_t r = 0; r < 4; ++r) {
        strip[q * kQGemmQuadBytes + r] = 4 * (quad0 + q) + r < b.k ? 1 : 0;
      }
    }
  }
}

BColumns BColumns::Of(const QuantizedMatMulOperation& op) {
  BColumns columns;
  columns.zero_points.resize(op.n);
  columns.scales.resize(op.n);
  const bool per_column = op.b_quantization != QuantizationAxis::kPerTensor;
  const int32_t shift = op.b.data_type == DataType::kUint8 ? 128 : 0;
  for (uint32_t j = 0; j < op.n; ++j) {
    const uint64_t index = per_column ? j : 0;
    int32_t zero_point = 0;
    if (op.b_zero_point.present()) {
      zero_point = op.b_zero_point.data_type == DataType::kInt8
                       ? int32_t{op.b_zero_point.data_as<int8_t>()[index]}
                       : int32_t{op.b_zero_point.data_as<uint8_t>()[index]};
    }
    columns.zero_points[j] = zero_point - shift;
    columns.uniform_zero_point &= columns.zero_points[j] == columns.zero_points[0];
    std::memcpy(&columns.scales[j], op.b_scale.data_as<float>() + index, sizeof(float));
  }
  return columns;
}

AlignedBytes AllocateAligned(size_t bytes) {
  const BufferPool::Block block = BufferPool::Get().Acquire(std::max<size_t>(bytes, 1));
  return AlignedBytes(static_cast<int8_t*>(block.data), PooledBlockRelease{block.capacity});
}

std::shared_ptr<const PackedB> PackB(const QuantizedMatMulOperation& op, uint64_t slice,
                                     const CpuKernels& cpu, uint64_t rows) {
  const QGemmUkernel& kernel = QGemmLevelKernel(*cpu.qgemm, rows);
  auto packed = std::make_shared<PackedB>();
  const BSource b = BSource::Of(op, slice);
  packed->k = b.k;
  packed->n = b.n;
  packed->quads = (b.k + 3) / 4;
  packed->strips = (b.n + kQGemmStripColumns - 1) / kQGemmStripColumns;
  // Left uninitialised: every byte, padding included, is written below
  // (but for chunks not kept, see `keep`, after which values is dropped).
  packed->values = AllocateAligned(packed->strips * packed->strip_stride());
  packed->columns = BColumns::Of(op);
  std::vector<int32_t> sums(packed->strips * kQGemmStripColumns, 0);
  std::atomic<bool> wide_values{false};  // a task saw B' outside [-64, 63]
  // Only a level with a 7-bit kernel pays for the check.
  const bool check_seven_bits = kernel.seven_bit_b != nullptr;
  // The kernel that will multiply B, should B not fit 7 bits (for any row
  // count: the one for many rows): when it reads B repacked, B is repacked
  // here, as it is packed (and the copy dropped below if B turns out to fit
  // 7 bits after all).
  const uint64_t reader_rows = rows == kPackBAnyRows ? kQGemmManyRows : rows;
  const QGemmUkernel& reader =
      ChooseQGemmUkernel(kernel, /*b_fits_seven_bits=*/false, b.n, reader_rows,
                         /*b_repacked=*/false);
  if (reader.repack_b != nullptr) {
    packed->repacked_by = reader.repack_b;
    packed->repacked_quad_bytes = reader.repacked_quad_bytes;
    packed->repacked = AllocateAligned(packed->strips * packed->repacked_strip_stride());
  }
  // For one product (rows known), a B its kernel reads repacked needs the
  // strips themselves only if it fits 7 bits: once a value outside is seen,
  // chunks are never written to `values` (whole chunks are packed straight
  // into the repacked layout, where the kernel can; the edges into a scratch
  // buffer, from which they are repacked).
  const bool strips_optional = rows != kPackBAnyRows && reader.repack_b != nullptr;
  const bool stream_repacked = packed->strips * packed->repacked_strip_stride() >= kStreamBytes;
  // Strips so large are packed a chunk at a time into the task's scratch
  // buffer (in L2, where they are checked and repacked) and streamed out.
  const bool stream_values = packed->strips * packed->strip_stride() >= kStreamBytes;
  // Repacks `chunk` quads from q0 of one strip (`part`, its packed bytes)
  // into the repacked copy; `scratch` is the calling thread's.
  auto repack = [&](size_t strip, size_t q0, size_t chunk, const int8_t* part,
                    AlignedBytes& scratch) {
    int8_t* repacked = packed->repacked.get() + strip * packed->repacked_strip_stride() +
                       q0 * packed->repacked_quad_bytes;
    if (!stream_repacked) {
      packed->repacked_by(part, chunk, repacked);
      return;
    }
    if (scratch == nullptr)
      scratch = AllocateAligned(kPackChunkQuads * packed->repacked_quad_bytes);
    packed->repacked_by(part, chunk, scratch.get());
    StreamCopy(repacked, scratch.get(), chunk * packed->repacked_quad_bytes);
  };
  // While every value seen fits 7 bits, repacking waits: a B that fits is
  // read by the 7-bit kernel, and its repacked copy would be dropped (for a
  // 16 MiB B, 32 MiB written for nothing). Chunks packed before the first
  // wider value are repacked after the pass, from their strips, which are
  // kept until then (`keep`).
  const size_t chunks = (packed->quads + kPackChunkQuads - 1) / kPackChunkQuads;
  std::vector<uint8_t> repack_later(check_seven_bits ? packed->strips * chunks : 0, 0);
  const int64_t tasks = (packed->strips + kStripsPerTask - 1) / kStripsPerTask;
  const int64_t min_tasks = std::max<int64_t>(1, (1 << 16) / (int64_t{op.k} * kStripsPerTask * 16));
  ParallelFor(tasks, min_tasks, [&](int64_t first, int64_t last) {
    AlignedBytes chunk_scratch;     // kStripsPerTask strips of a chunk, not kept or streamed
    AlignedBytes repacked_scratch;  // one strip of a chunk, then streamed out
    const size_t scratch_stride = kPackChunkQuads * kQGemmQuadBytes;
    for (int64_t task = first; task < last; ++task) {
      const size_t strip0 = task * kStripsPerTask;
      const size_t strips = std::min(kStripsPerTask, packed->strips - strip0);
      int8_t* panel = packed->values.get() + strip0 * packed->strip_stride();
      // A chunk of quads at a time (its packed bytes, 128 KiB, still in L2)
      // is checked and repacked right after it is packed: one pass over B
      // from memory instead of three.
      for (size_t q0 = 0; q0 < packed->quads; q0 += kPackChunkQuads) {
        const size_t chunk = std::min(kPackChunkQuads, packed->quads - q0);
        const bool keep =
            !strips_optional || (check_seven_bits && !wide_values.load(std::memory_order_relaxed));
        // A chunk only the repacking kernel will read, all inside B: packed
        // straight into its layout where the kernel can (the edges, with
        // their zeros and row-sum column, take the way below).
        if (!keep && reader.pack_repacked_b != nullptr && 4 * (q0 + chunk) <= b.k &&
            (strip0 + strips) * kQGemmStripColumns <= b.n && strips % 2 == 0) {
          reader.pack_repacked_b(b.data + 4 * q0 * b.n + strip0 * kQGemmStripColumns, b.n,
                                 FlipOf(b), chunk, strips,
                                 packed->repacked.get() + strip0 * packed->repacked_strip_stride() +
                                     q0 * packed->repacked_quad_bytes,
                                 packed->repacked_strip_stride(),
                                 sums.data() + strip0 * kQGemmStripColumns, stream_repacked);
          continue;
        }
        int8_t* out = panel + q0 * kQGemmQuadBytes;
        size_t stride = packed->strip_stride();
        if (!keep || stream_values) {
          if (chunk_scratch == nullptr) {
            chunk_scratch = AllocateAligned(kStripsPerTask * scratch_stride);
          }
          out = chunk_scratch.get();
          stride = scratch_stride;
        }
        PackBPanel(
            {b, q0, chunk, strip0, strips, out, stride, sums.data() + strip0 * kQGemmStripColumns},
            cpu);
        for (size_t s = 0; s < strips; ++s) {
          const int8_t* part = out + s * stride;
          if (keep && stream_values) {
            StreamCopy(panel + s * packed->strip_stride() + q0 * kQGemmQuadBytes, part,
                       chunk * kQGemmQuadBytes);
          }
          // Once one value is wider, no check can change the outcome.
          if (check_seven_bits && !wide_values.load(std::memory_order_relaxed) &&
              !FitsSevenBits(part, chunk * kQGemmQuadBytes)) {
            wide_values.store(true, std::memory_order_relaxed);
          }
          if (packed->repacked_by == nullptr) continue;
          if (check_seven_bits && !wide_values.load(std::memory_order_relaxed)) {
            // Nothing wider seen yet, so this chunk was kept in `values`.
            repack_later[(strip0 + s) * chunks + q0 / kPackChunkQuads] = 1;
            continue;
          }
          repack(strip0 + s, q0, chunk, part, repacked_scratch);
        }
      }
    }
    if (stream_repacked || stream_values) FenceStreamingStores();
  });
  // B turned out wider than 7 bits after some chunks: repack those now.
  if (packed->repacked_by != nullptr && wide_values.load(std::memory_order_relaxed)) {
    ParallelFor(tasks, min_tasks, [&](int64_t first, int64_t last) {
      AlignedBytes repacked_scratch;
      for (size_t strip = first * kStripsPerTask;
           strip < std::min<size_t>(last * kStripsPerTask, packed->strips); ++strip) {
        for (size_t c = 0; c < chunks; ++c) {
          if (!repack_later[strip * chunks + c]) continue;
          const size_t q0 = c * kPackChunkQuads;
          repack(strip, q0, std::min(kPackChunkQuads, packed->quads - q0),
                 packed->values.get() + strip * packed->strip_stride() + q0 * kQGemmQuadBytes,
                 repacked_scratch);
        }
      }
      if (stream_repacked) FenceStreamingStores();
    });
  }
  packed->seven_bit = check_seven_bits && !wide_values.load(std::memory_order_relaxed);
  if (&ChooseQGemmUkernel(kernel, packed->seven_bit, b.n, reader_rows, /*b_repacked=*/false) !=
      &reader) {
    packed->repacked_by = nullptr;  // the 7-bit kernel reads the strips themselves
    packed->repacked_quad_bytes = 0;
    packed->repacked.reset();
  } else if (strips_optional) {
    packed->values.reset();  // only the repacked copy is read (and complete)
  }
  packed->corrections.resize(b.n);
  for (size_t j = 0; j < b.n; ++j) {
    // Wrapping arithmetic: only the final sum of all terms must fit.
    packed->corrections[j] = static_cast<int32_t>(
        static_cast<uint32_t>(sums[j]) -
        static_cast<uint32_t>(b.k) * static_cast<uint32_t>(packed->columns.zero_points[j]));
  }
  return packed;
}

std::shared_ptr<const PackedB> PackedBCache::Get(const QuantizedMatMulOperation& op, uint64_t slice,
                                                 const CpuKernels& cpu, uint64_t rows) {
  if (op.b.registered_id().empty()) return PackB(op, slice, cpu, rows);
  // The scales and zero points are small and part of what was packed.
  auto bytes_of = [](const Tensor& tensor) {
    return tensor.present() ? absl::string_view(*tensor.bytes) : absl::string_view();
  };
  const std::string key =
      absl::StrCat(op.b.registered_id().size(), ":", op.b.registered_id(), slice, ":",
                   static_cast<int>(op.b_quantization), ":", bytes_of(op.b_scale).size(), ":",
                   bytes_of(op.b_scale), bytes_of(op.b_zero_point));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = by_key_.find(key);
    if (it != by_key_.end()) {
      // Same id but different storage: the id was released and reused.
      if (it->second->bytes.lock() == op.b.bytes) {
        entries_.splice(entries_.begin(), entries_, it->second);
        return it->second->packed;
      }
      bytes_ -= it->second->packed->byte_size();
      entries_.erase(it->second);
      by_key_.erase(it);
    }
  }
  // Packed outside the lock; two threads may race to pack the same slice,
  // which only wastes work.
  std::shared_ptr<const PackedB> packed = PackB(op, slice, cpu);
  std::lock_guard<std::mutex> lock(mutex_);
  if (by_key_.count(key) == 0 && packed->byte_size() <= capacity_bytes_) {
    entries_.push_front(Entry{key, op.b.registered_id(), op.b.bytes, packed});
    by_key_[key] = entries_.begin();
    bytes_ += packed->byte_size();
    EvictOverCapacityLocked();
  }
  return packed;
}

bool PackedBCache::Contains(absl::string_view registered_id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& entry : entries_) {
    if (entry.registered_id == registered_id) return true;
  }
  return false;
}

void PackedBCache::Evict(absl::string_view registered_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->registered_id == registered_id) {
      bytes_ -= it->packed->byte_size();
      by_key_.erase(it->key);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

uint64_t PackedBCache::memory_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

void PackedBCache::EvictOverCapacityLocked() {
  while (bytes_ > capacity_bytes_ && !entries_.empty()) {
    bytes_ -= entries_.back().packed->byte_size();
    by_key_.erase(entries_.back().key);
    entries_.pop_back();
  }
}

}  // namespace dmlserve

#include "kernels/cpu/packed_a.h"

#include <algorithm>
#include <cstring>

#include "kernels/core/parallel_for.h"
#include "kernels/cpu/cpu_kernels.h"

namespace dmlserve {

// The portable packers; the SIMD ones are in packed_a_<isa>.cc.
int32_t PackARowPortable(const ARowSource& row, size_t k, size_t padded, uint8_t* out) {
  const uint8_t flip = row.is_signed ? 0x80 : 0;
  uint32_t sum = 0;
  for (size_t j = 0; j < k; ++j) {
    const uint8_t value = row.data[j] ^ flip;
    sum += value;
    if (out != nullptr) out[j] = value;
  }
  if (out != nullptr) std::fill(out + k, out + padded, uint8_t{0});
  return static_cast<int32_t>(sum);
}

int32_t PackAWideRowPortable(const ARowSource& row, size_t k, size_t padded, int16_t* out) {
  const uint8_t flip = row.is_signed ? 0x80 : 0;
  uint32_t sum = 0;
  for (size_t j = 0; j < k; ++j) {
    const uint8_t value = row.data[j] ^ flip;
    sum += value;
    out[j] = value;
  }
  std::fill(out + k, out + padded, int16_t{0});
  return static_cast<int32_t>(sum);
}

bool PacksAInPlace(absl::Span<const ARowSource> rows, size_t k, const QGemmUkernel& kernel) {
  if (rows.empty() || kernel.wide_a || kernel.blocking.copy_a) return false;
  const bool is_signed = rows[0].is_signed;
  if (is_signed && kernel.signed_a == nullptr) return false;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].is_signed != is_signed || rows[i].data != rows[0].data + i * k) return false;
  }
  return true;
}

int32_t SumBytes(const uint8_t* bytes, size_t count, const CpuKernels& cpu) {
  return cpu.pack_a_row(ARowSource{bytes, false}, count, count, nullptr);
}

// The packer sums A XOR 0x80 = A + 128 for an INT8 row: 128 per value less.
int32_t SumSignedBytes(const uint8_t* bytes, size_t count, const CpuKernels& cpu) {
  return static_cast<int32_t>(
      static_cast<uint32_t>(cpu.pack_a_row(ARowSource{bytes, true}, count, count, nullptr)) -
      128u * static_cast<uint32_t>(count));
}

size_t PackedAStride(size_t k, const QGemmUkernel& kernel) {
  const size_t padded = (k + 3) / 4 * 4;
  if (kernel.blocking.copy_a) return (padded + 63) / 64 * 64 + 64;
  return padded * (kernel.wide_a ? sizeof(int16_t) : 1);
}

void PackA(absl::Span<const ARowSource> rows, size_t k, const QGemmUkernel& kernel,
           const CpuKernels& cpu, bool sums, PackedA& packed) {
  const size_t count = rows.size();
  const size_t mr = static_cast<size_t>(kernel.mr);
  const size_t padded = (k + 3) / 4 * 4;
  packed.k = k;
  packed.tail = nullptr;
  packed.tail_first = count;
  const bool in_place = PacksAInPlace(rows, k, kernel);
  packed.raw_signed = in_place && rows[0].is_signed;
  // For the vector kernels rows are not padded to dodge L1 set conflicts (as
  // B's strips are): they read only one quad per row per step, and using a
  // UINT8 A in place measured faster than a padded copy. A kernel whose
  // blocking keeps a call's A block in L1 asks for a copy (PackedAStride).
  // (An INT8 A in place is read as is, by the kernel's signed_a variant; the
  // tail below is copied as is.)
  uint8_t* out = nullptr;
  if (in_place) {
    packed.stride = k;
    packed.data = rows[0].data;
    if (padded != k) {
      // A row's last quad reads padded - k bytes of the rows after it; the
      // last rows have too few after them (up to 3 bytes would be read past
      // the request's bytes), so the blocks from the first such row on get a
      // copy with room for them.
      const size_t rows_read_after = (padded - k + k - 1) / k;  // ceil((padded - k) / k)
      const size_t safe_rows = count > rows_read_after ? count - rows_read_after : 0;
      packed.tail_first = safe_rows / mr * mr;
      const size_t tail_rows = count - packed.tail_first;
      packed.storage = AllocateAligned(tail_rows * k + 4);
      uint8_t* tail = reinterpret_cast<uint8_t*>(packed.storage.get());
      std::memcpy(tail, rows[packed.tail_first].data, tail_rows * k);
      std::memset(tail + tail_rows * k, 0, 4);
      packed.tail = tail;
    }
  } else {
    packed.stride = PackedAStride(k, kernel);
    packed.storage = AllocateAligned(std::max<size_t>(1, count * packed.stride));
    out = reinterpret_cast<uint8_t*>(packed.storage.get());
    packed.data = out;
  }
  if (in_place && !sums) {
    packed.row_sums.clear();
    return;
  }
  packed.row_sums.resize(count);
  ParallelFor(
      static_cast<int64_t>(count), std::max<int64_t>(1, (1 << 18) / static_cast<int64_t>(padded)),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          uint8_t* row_out = out == nullptr ? nullptr : out + i * packed.stride;
          if (packed.raw_signed) {
            packed.row_sums[i] = SumSignedBytes(rows[i].data, k, cpu);
            continue;
          }
          packed.row_sums[i] =
              kernel.wide_a
                  ? cpu.pack_a_wide_row(rows[i], k, padded, reinterpret_cast<int16_t*>(row_out))
                  : cpu.pack_a_row(rows[i], k, packed.stride, row_out);
        }
      });
}

}  // namespace dmlserve

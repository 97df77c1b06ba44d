#include "kernels/dxbc/container.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace dmlserve::dxbc {
namespace {

constexpr size_t kChecksumOffset = 4;
constexpr size_t kHashedFrom = 20;  // magic + checksum are not hashed

uint32_t RotateLeft(uint32_t v, int s) { return (v << s) | (v >> (32 - s)); }

uint32_t LoadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

void StoreLe32(uint32_t v, uint8_t* p) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

// The MD5 block function (RFC 1321).
void Md5Compress(uint32_t state[4], const uint8_t block[64]) {
  static constexpr uint32_t kSines[64] = {
      0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
      0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
      0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
      0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
      0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
      0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
      0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
      0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
      0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
      0xeb86d391};  // floor(|sin(i + 1)| * 2^32)
  static constexpr int kShifts[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                                      5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                                      4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                                      6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};
  uint32_t m[16];
  for (int i = 0; i < 16; ++i) m[i] = LoadLe32(block + 4 * i);
  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  for (int i = 0; i < 64; ++i) {
    uint32_t f;
    int g;
    if (i < 16) {
      f = (b & c) | (~b & d);
      g = i;
    } else if (i < 32) {
      f = (d & b) | (~d & c);
      g = (5 * i + 1) % 16;
    } else if (i < 48) {
      f = b ^ c ^ d;
      g = (3 * i + 5) % 16;
    } else {
      f = c ^ (b | ~d);
      g = (7 * i) % 16;
    }
    f = f + a + kSines[i] + m[g];
    a = d;
    d = c;
    c = b;
    b = b + RotateLeft(f, kShifts[i]);
  }
  state[0] += a;
  state[1] += b;
  state[2] += c;
  state[3] += d;
}

}  // namespace

DxbcChecksum ComputeDxbcChecksum(absl::Span<const uint8_t> blob) {
  const uint8_t* data = blob.data() + kHashedFrom;
  const size_t length = blob.size() - kHashedFrom;
  // DXBC's padding differs from MD5's: the bit count goes in front of the
  // tail (or in its own final block), and a second count, (bits >> 2) | 1,
  // closes the last block.
  const uint32_t num_bits = static_cast<uint32_t>(length * 8);
  const uint32_t num_bits2 = (num_bits >> 2) | 1;
  const size_t leftover = length % 64;
  uint32_t state[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
  for (size_t i = 0; i + 64 <= length; i += 64) Md5Compress(state, data + i);
  const uint8_t* tail = data + (length - leftover);
  uint8_t block[64];
  if (leftover >= 56) {
    std::memset(block, 0, sizeof(block));
    std::memcpy(block, tail, leftover);
    block[leftover] = 0x80;
    Md5Compress(state, block);
    std::memset(block, 0, sizeof(block));
    StoreLe32(num_bits, block);
    StoreLe32(num_bits2, block + 60);
    Md5Compress(state, block);
  } else {
    std::memset(block, 0, sizeof(block));
    StoreLe32(num_bits, block);
    std::memcpy(block + 4, tail, leftover);
    block[4 + leftover] = 0x80;
    StoreLe32(num_bits2, block + 60);
    Md5Compress(state, block);
  }
  DxbcChecksum out;
  for (int i = 0; i < 4; ++i) StoreLe32(state[i], out.data() + 4 * i);
  return out;
}

std::vector<uint8_t> BuildDxbcContainer(absl::Span<const uint32_t> program) {
  struct Chunk {
    const char* fourcc;
    std::vector<uint8_t> data;
  };
  // An empty signature: element count 0, elements at offset 8.
  const std::vector<uint8_t> empty_signature = {0, 0, 0, 0, 8, 0, 0, 0};
  std::vector<uint8_t> shex(program.size() * 4);
  for (size_t i = 0; i < program.size(); ++i) StoreLe32(program[i], shex.data() + 4 * i);
  const Chunk chunks[] = {{"ISGN", empty_signature}, {"OSGN", empty_signature}, {"SHEX", shex}};
  constexpr size_t kChunkCount = sizeof(chunks) / sizeof(chunks[0]);

  const size_t header_size = 32 + 4 * kChunkCount;
  size_t total = header_size;
  for (const Chunk& c : chunks) total += 8 + c.data.size();

  std::vector<uint8_t> blob(total, 0);
  std::memcpy(blob.data(), "DXBC", 4);
  StoreLe32(1, blob.data() + 20);  // container version
  StoreLe32(static_cast<uint32_t>(total), blob.data() + 24);
  StoreLe32(kChunkCount, blob.data() + 28);
  size_t offset = header_size;
  for (size_t i = 0; i < kChunkCount; ++i) {
    StoreLe32(static_cast<uint32_t>(offset), blob.data() + 32 + 4 * i);
    std::memcpy(blob.data() + offset, chunks[i].fourcc, 4);
    StoreLe32(static_cast<uint32_t>(chunks[i].data.size()), blob.data() + offset + 4);
    std::memcpy(blob.data() + offset + 8, chunks[i].data.data(), chunks[i].data.size());
    offset += 8 + chunks[i].data.size();
  }
  const DxbcChecksum checksum = ComputeDxbcChecksum(blob);
  std::memcpy(blob.data() + kChecksumOffset, checksum.data(), checksum.size());
  return blob;
}

absl::StatusOr<std::vector<uint32_t>> ExtractProgram(absl::Span<const uint8_t> blob) {
  if (blob.size() < 32 || std::memcmp(blob.data(), "DXBC", 4) != 0) {
    return absl::InvalidArgumentError("not a DXBC container");
  }
  if (LoadLe32(blob.data() + 24) != blob.size()) {
    return absl::InvalidArgumentError("DXBC size field does not match the blob size");
  }
  const DxbcChecksum checksum = ComputeDxbcChecksum(blob);
  if (std::memcmp(checksum.data(), blob.data() + kChecksumOffset, checksum.size()) != 0) {
    return absl::InvalidArgumentError("invalid DXBC checksum");
  }
  const uint32_t chunk_count = LoadLe32(blob.data() + 28);
  if (32 + 4ull * chunk_count > blob.size()) return absl::InvalidArgumentError("bad chunk count");
  for (uint32_t i = 0; i < chunk_count; ++i) {
    const uint32_t offset = LoadLe32(blob.data() + 32 + 4 * i);
    if (offset + 8ull > blob.size()) return absl::InvalidArgumentError("bad chunk offset");
    const uint32_t size = LoadLe32(blob.data() + offset + 4);
    if (offset + 8ull + size > blob.size()) return absl::InvalidArgumentError("bad chunk size");
    if (std::memcmp(blob.data() + offset, "SHEX", 4) == 0 ||
        std::memcmp(blob.data() + offset, "SHDR", 4) == 0) {
      std::vector<uint32_t> program(size / 4);
      for (size_t t = 0; t < program.size(); ++t) {
        program[t] = LoadLe32(blob.data() + offset + 8 + 4 * t);
      }
      return program;
    }
  }
  return absl::InvalidArgumentError("no SHEX/SHDR chunk");
}

}  // namespace dmlserve::dxbc

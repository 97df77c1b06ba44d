#ifndef DMLSERVE_KERNELS_CPU_AMX_TILES_H_
#define DMLSERVE_KERNELS_CPU_AMX_TILES_H_

// Intel AMX's tile registers as the AMX micro-kernel uses them (qgemm_ukernel_amx-inl.h), and a
// scalar model of the instructions it issues, so that the kernel's blocking, edges and packing run
// in the exactness tests on CPUs without tiles (AmxTileModel below).
//
// What the hardware provides (Intel SDM vol. 1 ch. 18, "Intel AMX"; vol. 2, TDPBUSD):
//   - 8 tile registers tmm0..tmm7, each up to 16 rows of up to 64 bytes.
//   - LDTILECFG loads a 64-byte configuration (TileConfig): palette 1, and per tile its rows and
//     bytes per row (colsb). It zeroes every tile. Until a thread has loaded one, and after
//     TILERELEASE, tile instructions fault.
//   - TILELOADD tmm, [base + stride]: rows[t] rows of colsb[t] bytes, row r from base + r * stride
//     (bytes past colsb, and rows past rows[t], read as zeros). TILESTORED writes the same shape.
//     TILEZERO zeroes a tile.
//   - TDPBUSD c, a, b: for m < rows[c], n < colsb[c] / 4, k < colsb[a] / 4:
//       c.int32[m][n] += sum over r < 4 of a.uint8[m][4k + r] * b.int8[k][4n + r]
//     in int32, wrapping, never saturating (exact for what fits). Shapes must agree:
//     rows[a] == rows[c], colsb[b] == colsb[c], rows[b] == colsb[a] / 4. TDPBSSD is the same
//     with a.int8 (TDPBUUD and TDPBSUD, unsigned B, are not used: B' is int8).
//   - On Linux a process must ask for the tile state once (cpu_features.cc); Windows enables it.
//
// The model implements exactly that, per thread, and checks the configuration's limits and the
// shape rules where the hardware would fault (an abort naming the rule). Tests only: it is some
// thousand times slower than the tiles.

#include <cstddef>
#include <cstdint>

namespace dmlserve {

inline constexpr int kAmxTiles = 8;
inline constexpr int kAmxMaxRows = 16;
inline constexpr int kAmxMaxRowBytes = 64;

// LDTILECFG's operand, palette 1 (Intel SDM vol. 1, 18.2.2): 64 bytes, 64-byte aligned.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row, per tile (only 0..7 exist)
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

// Every tile at its largest, 16 rows x 64 bytes (the probes' configuration).
inline TileConfig FullTileConfig() {
  TileConfig config;
  for (int t = 0; t < kAmxTiles; ++t) {
    config.rows[t] = kAmxMaxRows;
    config.colsb[t] = kAmxMaxRowBytes;
  }
  return config;
}

// The tile instructions run in software, on the calling thread's own 8 tiles and configuration
// (thread-local, like the hardware's). Every function checks what the hardware checks and aborts
// with the rule's name where it would fault.
class AmxTileModel {
 public:
  // LDTILECFG: the palette is 1, rows <= 16 and colsb <= 64 per tile, and a tile is used (both
  // non-zero) or unused (both zero). Zeroes every tile.
  static void LoadConfig(const TileConfig& config);
  // TILERELEASE: the tiles are unconfigured again.
  static void Release();
  static bool Configured();

  static void LoadTile(int tile, const void* base, size_t stride);
  static void StoreTile(int tile, void* base, size_t stride);
  static void ZeroTile(int tile);
  // TDPBUSD c, a, b (u8 a), TDPBSSD c, a, b (s8 a).
  static void DotProductBusd(int c, int a, int b) { DotProduct(c, a, b, /*signed_a=*/false); }
  static void DotProductBssd(int c, int a, int b) { DotProduct(c, a, b, /*signed_a=*/true); }

  // The spelling the kernel template uses (tile numbers are immediates on the hardware).
  template <int kTile>
  static void Load(const void* base, size_t stride) {
    LoadTile(kTile, base, stride);
  }
  template <int kTile>
  static void Store(void* base, size_t stride) {
    StoreTile(kTile, base, stride);
  }
  template <int kTile>
  static void Zero() {
    ZeroTile(kTile);
  }
  template <int kC, int kA, int kB>
  static void DotBusd() {
    DotProductBusd(kC, kA, kB);
  }
  template <int kC, int kA, int kB>
  static void DotBssd() {
    DotProductBssd(kC, kA, kB);
  }

 private:
  static void DotProduct(int c, int a, int b, bool signed_a);
};

}  // namespace dmlserve

#endif  // DMLSERVE_KERNELS_CPU_AMX_TILES_H_

// The scalar model of the AMX tile instructions (amx_tiles.h).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/amx_tiles.h"

namespace dmlserve {
namespace {

// One thread's tile state. Plain data (no destructor), so a thread_local of it costs nothing at
// thread exit (see ScratchLease in qgemm_task.cc for why that matters on mingw).
struct TileState {
  bool configured;
  TileConfig config;
  uint8_t tiles[kAmxTiles][kAmxMaxRows][kAmxMaxRowBytes];
};

TileState& State() {
  thread_local TileState state;
  return state;
}

// Where the hardware raises a fault (#UD or #GP), the model stops the program.
void Require(bool condition, const char* rule) {
  if (condition) return;
  std::fprintf(stderr, "AmxTileModel: the hardware would fault: %s\n", rule);
  std::fflush(stderr);
  std::abort();
}

// A configured tile that is in use.
const TileState& Using(int tile) {
  const TileState& state = State();
  Require(state.configured, "tile instruction before LDTILECFG (or after TILERELEASE)");
  Require(0 <= tile && tile < kAmxTiles, "tile number is 0..7");
  Require(state.config.rows[tile] != 0, "tile is not configured (rows 0)");
  return state;
}

}  // namespace

void AmxTileModel::LoadConfig(const TileConfig& config) {
  Require(config.palette == 1, "palette 1");
  Require(config.start_row == 0, "start_row 0");
  for (int t = 0; t < 16; ++t) {
    const bool in_range = t < kAmxTiles;
    Require(config.rows[t] <= (in_range ? kAmxMaxRows : 0), "rows <= 16 (tiles 8..15: 0)");
    Require(config.colsb[t] <= (in_range ? kAmxMaxRowBytes : 0), "colsb <= 64 (tiles 8..15: 0)");
    Require((config.rows[t] == 0) == (config.colsb[t] == 0),
            "a tile's rows and colsb both zero or both not");
  }
  TileState& state = State();
  state.config = config;
  state.configured = true;
  std::memset(state.tiles, 0, sizeof(state.tiles));
}

void AmxTileModel::Release() {
  TileState& state = State();
  state.configured = false;
  std::memset(state.tiles, 0, sizeof(state.tiles));
}

bool AmxTileModel::Configured() { return State().configured; }

void AmxTileModel::LoadTile(int tile, const void* base, size_t stride) {
  TileState& state = State();
  Using(tile);
  const int rows = state.config.rows[tile];
  const int colsb = state.config.colsb[tile];
  std::memset(state.tiles[tile], 0, sizeof(state.tiles[tile]));
  for (int r = 0; r < rows; ++r) {
    std::memcpy(state.tiles[tile][r], static_cast<const uint8_t*>(base) + r * stride, colsb);
  }
}

void AmxTileModel::StoreTile(int tile, void* base, size_t stride) {
  TileState& state = State();
  Using(tile);
  const int rows = state.config.rows[tile];
  const int colsb = state.config.colsb[tile];
  for (int r = 0; r < rows; ++r) {
    std::memcpy(static_cast<uint8_t*>(base) + r * stride, state.tiles[tile][r], colsb);
  }
}

void AmxTileModel::ZeroTile(int tile) {
  Using(tile);
  std::memset(State().tiles[tile], 0, sizeof(State().tiles[tile]));
}

void AmxTileModel::DotProduct(int c, int a, int b, bool signed_a) {
  TileState& state = State();
  Using(c);
  Using(a);
  Using(b);
  Require(c != a && c != b && a != b, "the dot product's three tiles differ");
  const TileConfig& config = state.config;
  Require(config.rows[a] == config.rows[c], "rows[a] == rows[c]");
  Require(config.colsb[b] == config.colsb[c], "colsb[b] == colsb[c]");
  Require(config.colsb[a] % 4 == 0 && config.colsb[c] % 4 == 0,
          "colsb[a] and colsb[c] are whole dwords");
  Require(config.rows[b] == config.colsb[a] / 4, "rows[b] == colsb[a] / 4");
  const int rows = config.rows[c];
  const int columns = config.colsb[c] / 4;
  const int depth = config.colsb[a] / 4;
  for (int m = 0; m < rows; ++m) {
    for (int n = 0; n < columns; ++n) {
      uint32_t sum;  // wraps as the hardware's int32 does
      std::memcpy(&sum, &state.tiles[c][m][4 * n], 4);
      for (int k = 0; k < depth; ++k) {
        for (int r = 0; r < 4; ++r) {
          const uint8_t byte = state.tiles[a][m][4 * k + r];
          const int32_t x = signed_a ? int32_t{static_cast<int8_t>(byte)} : int32_t{byte};
          const int32_t y = static_cast<int8_t>(state.tiles[b][k][4 * n + r]);
          sum += static_cast<uint32_t>(x * y);
        }
      }
      std::memcpy(&state.tiles[c][m][4 * n], &sum, 4);
    }
  }
}

}  // namespace dmlserve

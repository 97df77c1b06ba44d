// HLSL equivalents of the quantized matrix multiply kernels
// (quantized_matmul_gemm_kernel.cc, quantized_matmul_rows_kernel.cc,
// quantized_matmul_reduce_kernel.cc, quantized_matmul_pack_kernel.cc):
// documentation of the kernels dmlserve
// assembles itself, written for cs_5_0. One entry point per kernel:
//
//   Gemm    "qmm.gemm/<A>/<B>/<Y>/t16x16m8n8k8/<i32|f32>[m]": A_SIGNED,
//           B_SIGNED, Y_SIGNED (int8 vs uint8), PARTIAL (Y = i32: split-K
//           partial sums instead of outputs), FLOAT_ACC (f32), MASKED (m).
//   Rows    "qmm.rows/<A>/<B>/r<R>": A_SIGNED, B_SIGNED, R.
//   Reduce  "qmm.reduce/<Y>": Y_SIGNED.
//   PackB   "qmm.packb": a request's own B into the octs layout.

ByteAddressBuffer A : register(t0);          // rows of K4 = ceil(K/4) words, zero-padded
ByteAddressBuffer B : register(t1);          // per B slice: KO blocks of N columns' 8-byte octs
ByteAddressBuffer RowParams : register(t2);  // per output row: a_scale, out_scale, a_zp, out_zp
ByteAddressBuffer ColParams : register(t3);  // per column (col_param_bytes apart): b_scale, b_zp
RWByteAddressBuffer Y : register(u0);        // rows of N4 words (4 outputs), or int32 partials
cbuffer Root : register(b0) {
  uint M, N, K, KO;  // KO = ceil(K / 8)
  uint tiles_n, tiles_per_slice, channels, a_batch_stride;
  uint a_channel_stride, b_batch_stride, b_channel_stride, N4;
  uint row_param_bytes, split_octs, groups_x, group_count;  // split_octs: splits in Reduce
  uint col_param_bytes;  // 8, or 0: every column shares one entry (per-tensor b_scale, b_zp)
  uint pack_outer;       // PackB: 1 for an outer product's layout
};

int4 Unpack(uint word, bool is_signed) {
  uint4 w = uint4(word, word, word, word);
  return is_signed ? ((int4)(w << uint4(24, 16, 8, 0))) >> 24  // ibfe
                   : (int4)((w >> uint4(0, 8, 16, 24)) & 0xff);  // ubfe
}

// round_ne(float(acc) * (a_scale * b_scale / output_scale)) + output_zp,
// saturated, packed into one output word (quantized_matmul_epilogue.cc).
uint Requantize(int4 acc, uint4 p, float4 b_scale, bool y_signed) {
  // a_scale * b_scale may leave float32's range while the ratio does not:
  // pre-scale a_scale by 2^-64 (2^64) and scale the ratio back (exact).
  float a_scale = asfloat(p.x);
  float4 ab = a_scale * b_scale;
  bool4 down = abs(ab) >= 0x1p100f;
  bool4 up = abs(ab) < 0x1p-100f && abs(a_scale) < 0x1p64f;
  float4 factor = down ? 0x1p-64f : (up ? 0x1p64f : 1.0f);
  float4 unscale = down ? 0x1p64f : (up ? 0x1p-64f : 1.0f);
  // GPUs divide as x * rcp(y); rcp of an output scale >= 2^126 is subnormal
  // and flushed: scale both sides by 2^-64 then (exact).
  float big = abs(asfloat(p.y)) >= 0x1p64f ? 0x1p-64f : 1.0f;
  float4 ratio = (a_scale * factor * b_scale * big) / (asfloat(p.y) * big) * unscale;
  float4 real = (float4)acc * ratio;
  real = acc != 0 ? real : 0;  // 0 * inf (a ratio beyond float32) is 0
  int4 q = (int4)clamp(round(real), -1073741824.0f, 1073741824.0f) + (int)p.w;  // half to even
  q = y_signed ? clamp(q, -128, 127) : clamp(q, 0, 255);
  uint4 bytes = ((uint4)q & 0xff) << uint4(0, 8, 16, 24);
  return bytes.x | bytes.y | bytes.z | bytes.w;
}

float4 ColumnScales(uint column0) {
  float4 s = 0;
  [unroll] for (uint j = 0; j < 4; ++j) {
    if (column0 + j < N) s[j] = asfloat(ColParams.Load((column0 + j) * col_param_bytes));
  }
  return s;
}

// ---------------------------------------------------------------- Gemm ---
// 16 x 16 threads, 8 x 8 outputs each (rows ty*4+{0..3}, 64+ty*4+{0..3};
// columns likewise): a 128 x 128 tile. Per step of 8 k each thread stages
// one word of A row r and one of B column r (r = flat % 128, word h =
// flat / 128), centred once, into a structure of its thread row (A) or
// column (B): 8 k x 8 slots, 272 bytes with padding, double-buffered.
#ifdef FLOAT_ACC
typedef float4 Acc;
#else
typedef int4 Acc;
#endif
struct Line {
  Acc v[8][2];  // [k][slots 0-3, 4-7]; 256 bytes + 16 of padding below
  uint4 pad;
};
groupshared Line Shared[2][2][16];  // [buffer][A, B][thread row or column]

[numthreads(16, 16, 1)]
void Gemm(uint3 gid : SV_GroupID, uint3 t : SV_GroupThreadID, uint flat : SV_GroupIndex) {
  uint group = gid.y * groups_x + gid.x;
  if (group >= group_count) return;
  uint outer = group / tiles_per_slice, rest = group % tiles_per_slice;
  uint m0 = (rest / tiles_n) * 128, n0 = (rest % tiles_n) * 128;
#ifdef PARTIAL
  uint slice = 0, a_slice = 0, b_slice = 0, split = outer;
  uint first = split * split_octs, end = min(first + split_octs, KO);
#else
  uint slice = outer, batch = slice / channels, channel = slice % channels;
  uint a_slice = batch * a_batch_stride + channel * a_channel_stride;
  uint b_slice = batch * b_batch_stride + channel * b_channel_stride;
  uint first = 0, end = KO;
#endif
  // Staging: rows/columns past the matrix clamp to its last one (their sums
  // are never stored; root descriptors are not bounds-checked).
  uint r = flat & 127, h = flat >> 7;
  uint a_r = min(r, M - m0 - 1), b_r = min(r, N - n0 - 1);
  int a_zp = (int)RowParams.Load(((slice * M + m0 + a_r) * row_param_bytes) + 8);
  int b_zp = (int)ColParams.Load((n0 + b_r) * col_param_bytes + 4);
  uint k4 = (K + 3) / 4;
  uint a_row = (a_slice * M + m0 + a_r) * k4 * 4;
  uint b_at = ((b_slice * KO + first) * N + n0 + b_r) * 8 + h * 4;
  uint line = (r >> 2) & 15, slot = (r >> 6) * 4 + (r & 3);

  int acc[8][2][4];  // the int32 sums (float sums are flushed into them)
  Acc fsum[8][2];
  [unroll] for (uint i = 0; i < 8; ++i) {
    [unroll] for (uint c = 0; c < 2; ++c) { acc[i][c] = (int[4])0; fsum[i][c] = 0; }
  }

  uint a_word = 0, b_word = 0;
  uint buffer = 0;
  // Loads step s's two words (clamped to the row; the mask handles k >= K).
  #define LOAD(s)                                                         \
    a_word = A.Load(a_row + min((s) * 2 + h, k4 - 1) * 4);                \
    b_word = B.Load(b_at + ((s) - first) * N * 8);
  #define STORE(buf, s)                                                   \
    {                                                                     \
      int4 av = Unpack(a_word, A_SIGNED) - a_zp;                          \
      int4 bv = Unpack(b_word, B_SIGNED) - b_zp;                          \
      uint4 k = (s) * 8 + h * 4 + uint4(0, 1, 2, 3);                      \
      av = (k < K) ? av : 0; /* MASKED variants only */                   \
      [unroll] for (uint j = 0; j < 4; ++j) {                             \
        Shared[buf][0][line].v[h * 4 + j][slot >> 2][slot & 3] = av[j];   \
        Shared[buf][1][line].v[h * 4 + j][slot >> 2][slot & 3] = bv[j];   \
      }                                                                   \
    }
  if (first < end) { LOAD(first); STORE(0, first); }
  GroupMemoryBarrierWithGroupSync();
  for (uint s = first; s < end;) {
    uint block_end = min(s + 32, end);  // 256 k: float sums stay below 2^24
    for (; s < block_end;) {
      uint next = s + 1;
      bool more = next < end;
      if (more) { LOAD(next); }
      [unroll] for (uint k = 0; k < 8; ++k) {
        Acc a_lo = Shared[buffer][0][t.y].v[k][0], a_hi = Shared[buffer][0][t.y].v[k][1];
        Acc b_lo = Shared[buffer][1][t.x].v[k][0], b_hi = Shared[buffer][1][t.x].v[k][1];
        [unroll] for (uint i = 0; i < 4; ++i) {
          fsum[i][0] += a_lo[i] * b_lo;  // imad or mad
          fsum[i][1] += a_lo[i] * b_hi;
          fsum[i + 4][0] += a_hi[i] * b_lo;
          fsum[i + 4][1] += a_hi[i] * b_hi;
        }
      }
      if (more) { STORE(buffer ^ 1, next); }
      buffer ^= 1;
      s = next;
      GroupMemoryBarrierWithGroupSync();  // one barrier per step
    }
    [unroll] for (uint i2 = 0; i2 < 8; ++i2) {  // flush (a no-op copy for int32)
      [unroll] for (uint c = 0; c < 2; ++c) {
        int4 whole = (int4)fsum[i2][c];
        [unroll] for (uint j = 0; j < 4; ++j) acc[i2][c][j] += whole[j];
        fsum[i2][c] = 0;
      }
    }
  }

  [unroll] for (uint i = 0; i < 8; ++i) {
    uint m = m0 + t.y * 4 + (i / 4) * 64 + i % 4;
    if (m >= M) continue;
    [unroll] for (uint c = 0; c < 2; ++c) {
      uint word = n0 / 4 + t.x + c * 16;
      if (word >= N4) continue;
      int4 sum = int4(acc[i][c][0], acc[i][c][1], acc[i][c][2], acc[i][c][3]);
#ifdef PARTIAL
      Y.Store4(((split * M + m) * N4 + word) * 16, (uint4)sum);
#else
      uint out_row = slice * M + m;
      uint4 p = RowParams.Load4(out_row * row_param_bytes);
      Y.Store((out_row * N4 + word) * 4, Requantize(sum, p, ColumnScales(word * 4), Y_SIGNED));
#endif
    }
  }
}

// ---------------------------------------------------------------- Rows ---
// R rows x 512 columns over one split of K; int32 partials for Reduce.
groupshared int4 RowsA[R][512 / R * 2];  // [row][k / 4]: the split's A, centred

[numthreads(256, 1, 1)]
void Rows(uint3 gid : SV_GroupID, uint flat : SV_GroupIndex) {
  uint group = gid.y * groups_x + gid.x;
  if (group >= group_count) return;
  uint split = group / tiles_per_slice, rest = group % tiles_per_slice;
  uint m0 = (rest / tiles_n) * R, n0 = (rest % tiles_n) * 512;
  uint first = split * split_octs, octs = min(first + split_octs, KO) - first;
  uint k4 = (K + 3) / 4;
  for (uint i = flat; i < R * split_octs * 2; i += 256) {
    uint r = i / (split_octs * 2), w = i % (split_octs * 2) + first * 2;
    uint row = min(m0 + r, M - 1);
    int zp = (int)RowParams.Load(row * row_param_bytes + 8);
    int4 v = Unpack(A.Load((row * k4 + min(w, k4 - 1)) * 4), A_SIGNED) - zp;
    RowsA[r][w - first * 2] = (w * 4 + uint4(0, 1, 2, 3) < K) ? v : 0;
  }
  GroupMemoryBarrierWithGroupSync();
  uint column0 = n0 + flat * 2;
  uint c0 = min(column0, N - 1), c1 = min(column0 + 1, N - 1);
  int zp0 = (int)ColParams.Load(c0 * col_param_bytes + 4),
      zp1 = (int)ColParams.Load(c1 * col_param_bytes + 4);
  int2 acc[R];
  [unroll] for (uint r = 0; r < R; ++r) acc[r] = 0;
  for (uint o = 0; o < octs; ++o) {
    uint2 w0 = B.Load2(((first + o) * N + c0) * 8), w1 = B.Load2(((first + o) * N + c1) * 8);
    int4 b0 = Unpack(w0.x, B_SIGNED) - zp0, b1 = Unpack(w0.y, B_SIGNED) - zp0;
    int4 b2 = Unpack(w1.x, B_SIGNED) - zp1, b3 = Unpack(w1.y, B_SIGNED) - zp1;
    [unroll] for (uint r = 0; r < R; ++r) {
      int4 a0 = RowsA[r][o * 2], a1 = RowsA[r][o * 2 + 1];
      acc[r].x += dot(a0, b0) + dot(a1, b1);  // as 8 scalar imads
      acc[r].y += dot(a0, b2) + dot(a1, b3);
    }
  }
  if (column0 >= N4 * 4) return;
  [unroll] for (uint r = 0; r < R; ++r) {
    uint row = m0 + r;
    if (row < M) Y.Store2(((split * M + row) * N4 * 4 + column0) * 4, (uint2)acc[r]);
  }
}

// -------------------------------------------------------------- Reduce ---
ByteAddressBuffer Partials : register(t0);  // in place of A

[numthreads(256, 1, 1)]
void Reduce(uint3 gid : SV_GroupID, uint flat : SV_GroupIndex) {
  uint index = (gid.y * groups_x + gid.x) * 256 + flat;  // one output word
  if (index >= M * N4) return;
  uint row = index / N4, word = index % N4;
  int4 sum = 0;
  for (uint s = 0; s < split_octs; ++s) {  // split_octs holds the split count here
    sum += (int4)Partials.Load4((s * M * N4 + index) * 16);
  }
  uint4 p = RowParams.Load4(row * row_param_bytes);
  Y.Store(index * 4, Requantize(sum, p, ColumnScales(word * 4), Y_SIGNED));
}

// --------------------------------------------------------------- PackB ---
ByteAddressBuffer RawB : register(t0);  // in place of A: [slices][K][N] bytes as uploaded
RWByteAddressBuffer PackedB : register(u0);  // in place of Y: the octs layout of B above
// ColParams stays at t1 here (bound as the second SRV); channels = B slices.

[numthreads(64, 1, 1)]
void PackB(uint3 gid : SV_GroupID, uint flat : SV_GroupIndex) {
  // One oct: (slice * KO + o) * N + n, or for an outer product's B (pack_outer,
  // root constant 17) (o * slices + slice) * N + n.
  uint index = (gid.y * groups_x + gid.x) * 64 + flat;
  if (index >= channels * KO * N) return;
  uint n = index % N, rest = index / N, inner = pack_outer ? channels : KO;
  uint slice = pack_outer ? rest % inner : rest / inner;
  uint o = pack_outer ? rest / inner : rest % inner;
  uint zp = ColParams.Load(n * col_param_bytes + 4) & 0xff;
  uint2 oct = 0;
  for (uint j = 0; j < 8; ++j) {
    uint k = o * 8 + j, value = zp;  // past K: the zero point, centred to 0 later
    if (k < K) {
      uint source = (slice * K + k) * N + n;
      value = (RawB.Load(source & ~3u) >> ((source & 3) * 8)) & 0xff;
    }
    if (j < 4) oct.x |= value << (8 * j); else oct.y |= value << (8 * (j - 4));
  }
  PackedB.Store2(index * 8, oct);
}

// HLSL equivalent of qmm.gemm (quantized_matmul_kernels.cc): documentation of
// the kernel dmlserve assembles itself; compiles with fxc/dxc as cs_5_0.
//
// Specialisation (key "qmm.gemm/<A>/<B>/<Y>/t16x16m4n4k8"): A_SIGNED,
// B_SIGNED, Y_SIGNED (int8 vs uint8 for A, B and the output).

ByteAddressBuffer A : register(t0);          // rows of K4 words, 4 k per word
ByteAddressBuffer B : register(t1);          // per B slice: N columns of K4 words
ByteAddressBuffer RowParams : register(t2);  // per output row: a_scale, out_scale, a_zp, out_zp
ByteAddressBuffer ColParams : register(t3);  // per column: b_scale, b_zp
RWByteAddressBuffer Y : register(u0);        // rows of N4 words, 4 outputs per word
cbuffer Root : register(b0) {
  uint M, N, K, K4;             // M: rows per output slice
  uint tiles_n, tiles_per_slice, channels, a_batch_stride;
  uint a_channel_stride, b_batch_stride, b_channel_stride, N4;
  uint pad0, pad1, groups_x, group_count;
};

#define TM 64  // 16 x 16 threads, 4 x 4 outputs each
#define TN 64
#define KW 8   // words (32 values) of K staged per step

groupshared uint As[KW * TM];  // [kw][row]: a thread's 4 rows are 4 consecutive words
groupshared uint Bs[KW * TN];  // [kw][column]

int4 Unpack(uint4 words, uint byte, bool is_signed) {
  return is_signed ? ((int4)(words << (24 - 8 * byte))) >> 24   // ibfe
                   : (int4)((words >> (8 * byte)) & 0xff);        // ubfe
}

[numthreads(16, 16, 1)]
void main(uint3 gid : SV_GroupID, uint3 t : SV_GroupThreadID, uint flat : SV_GroupIndex) {
  uint group = gid.y * groups_x + gid.x;
  if (group >= group_count) return;
  uint slice = group / tiles_per_slice, rest = group % tiles_per_slice;
  uint m0 = (rest / tiles_n) * TM, n0 = (rest % tiles_n) * TN;
  uint batch = slice / channels, channel = slice % channels;
  uint a_row0 = (batch * a_batch_stride + channel * a_channel_stride) * M + m0;
  uint b_col0 = (batch * b_batch_stride + channel * b_channel_stride) * N + n0;

  int4 acc[4] = {int4(0, 0, 0, 0), int4(0, 0, 0, 0), int4(0, 0, 0, 0), int4(0, 0, 0, 0)};
  int4 row_sums = 0, column_sums = 0;  // sum over k of a (this thread's rows), of b (columns)
  for (uint kw0 = 0; kw0 < K4; kw0 += KW) {
    for (uint s = 0; s < 2; ++s) {  // 512 words of A and of B per step
      uint index = flat + 256 * s, row = index >> 3, kw = index & 7;
      uint a = 0, b = 0;  // zero padding past the matrices (root SRVs are not bounds-checked)
      if (row < M - m0 && kw0 + kw < K4) a = A.Load(((a_row0 + row) * K4 + kw0 + kw) * 4);
      if (row < N - n0 && kw0 + kw < K4) b = B.Load(((b_col0 + row) * K4 + kw0 + kw) * 4);
      As[kw * TM + row] = a;
      Bs[kw * TN + row] = b;
    }
    GroupMemoryBarrierWithGroupSync();
    [unroll] for (uint kw = 0; kw < KW; ++kw) {
      uint4 aw = uint4(As[kw * TM + t.y * 4], As[kw * TM + t.y * 4 + 1],
                       As[kw * TM + t.y * 4 + 2], As[kw * TM + t.y * 4 + 3]);
      uint4 bw = uint4(Bs[kw * TN + t.x * 4], Bs[kw * TN + t.x * 4 + 1],
                       Bs[kw * TN + t.x * 4 + 2], Bs[kw * TN + t.x * 4 + 3]);
      [unroll] for (uint byte = 0; byte < 4; ++byte) {
        int4 av = Unpack(aw, byte, A_SIGNED), bv = Unpack(bw, byte, B_SIGNED);
        [unroll] for (uint i = 0; i < 4; ++i) acc[i] += av[i] * bv;
        row_sums += av;
        column_sums += bv;
      }
    }
    GroupMemoryBarrierWithGroupSync();
  }

  float4 b_scale = 0;
  int4 b_zp = 0;
  [unroll] for (uint j = 0; j < 4; ++j) {
    uint n = n0 + t.x * 4 + j;
    if (n < N) { uint2 p = ColParams.Load2(n * 8); b_scale[j] = asfloat(p.x); b_zp[j] = (int)p.y; }
  }
  uint word = n0 / 4 + t.x;
  [unroll] for (uint i = 0; i < 4; ++i) {
    uint m = m0 + t.y * 4 + i;
    if (m >= M || word >= N4) continue;
    uint out_row = slice * M + m;
    uint4 p = RowParams.Load4(out_row * 16);
    int a_zp = (int)p.z;
    // sum (a - za)(b - zb) = sum ab - zb sum a - za sum b + K za zb, wrapping int32:
    // exact because the true value fits (K * max|a - za| * max|b - zb| < 2^31).
    int4 v = acc[i] - b_zp * row_sums[i] - a_zp * column_sums + (int)K * a_zp * b_zp;
    // a_scale * b_scale may leave float32's range while the ratio does not:
    // pre-scale a_scale by 2^-64 (2^64) and scale the ratio back (exact).
    float a_scale = asfloat(p.x);
    float4 ab = a_scale * b_scale;
    bool4 down = abs(ab) >= 0x1p100f;
    bool4 up = abs(ab) < 0x1p-100f && abs(a_scale) < 0x1p64f;
    float4 factor = down ? 0x1p-64f : (up ? 0x1p64f : 1.0f);
    float4 unscale = down ? 0x1p64f : (up ? 0x1p-64f : 1.0f);
    float4 real = (float4)v * ((a_scale * factor * b_scale) / asfloat(p.y) * unscale);
    real = v != 0 ? real : 0;  // 0 * inf (a ratio beyond float32) is 0
    int4 q = (int4)clamp(round(real), -1073741824.0f, 1073741824.0f) + (int)p.w;  // round: half to even
    q = Y_SIGNED ? clamp(q, -128, 127) : clamp(q, 0, 255);
    uint4 bytes = ((uint4)q & 0xff) << uint4(0, 8, 16, 24);
    Y.Store((out_row * N4 + word) * 4, bytes.x | bytes.y | bytes.z | bytes.w);
  }
}

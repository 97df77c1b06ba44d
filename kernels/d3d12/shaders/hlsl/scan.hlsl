// HLSL equivalent of the scan kernels built by scan_kernels.cc (documentation:
// dmlserve generates the DXBC with its own assembler; this file states the
// intent in the language reviewers know, and compiles with fxc/dxc as cs_5_0).
//
// Specialisation (the kernel key "scan.<PASS>/<op>/<format>/<dir>/<excl>/t<T>p<P>"):
//   PASS       SERIAL | LINE | REDUCE | TILE | PACK16
//   PRODUCT    0: sum, 1: product
//   FORMAT     F32 | F16 | I32 | U16 | I64   (input format; output is the
//              wide format: F16 -> float32, U16 -> uint32, others unchanged)
//   REVERSE    AxisDirection DECREASING
//   EXCLUSIVE  HasExclusiveSum / HasExclusiveProduct
//   THREADS, PER_THREAD  tile shape (tile = THREADS * PER_THREAD elements)

ByteAddressBuffer Input : register(t0);
ByteAddressBuffer Carries : register(t1);  // TILE: exclusive scan of tile totals
RWByteAddressBuffer Output : register(u0);
cbuffer Root : register(b0) {
  uint axis;    // c0: elements per line      (PACK16: element count)
  uint inner;   // c1: stride between a line's elements
  uint lines;   // c2: outer * inner
  uint tiles;   // c3: tiles per line
  uint4 unused[2];
  uint pad0, pad1;
  uint groups_x;     // c14: the dispatch is a 2-D grid of groups_x columns
  uint group_count;  // c15
};

#if FORMAT == F32 || FORMAT == F16
typedef float Value;
Value Identity() { return PRODUCT ? 1.0f : 0.0f; }
Value Combine(Value a, Value b) { return PRODUCT ? a * b : a + b; }
#elif FORMAT == I32 || FORMAT == U16
typedef uint Value;  // wrapping 32-bit arithmetic (UINT16 products wrap when packed)
Value Identity() { return PRODUCT ? 1u : 0u; }
Value Combine(Value a, Value b) { return PRODUCT ? a * b : a + b; }
#else  // I64: (lo, hi) with an explicit carry
typedef uint2 Value;
Value Identity() { return uint2(0, 0); }
Value Combine(Value a, Value b) {
  uint lo = a.x + b.x;
  return uint2(lo, a.y + b.y + (lo < a.x ? 1u : 0u));
}
#endif

Value Load(ByteAddressBuffer buffer, uint index) {
#if FORMAT == F16 || FORMAT == U16
  // Raw buffers are dword-addressed: load the dword, pick the half.
  uint half = (buffer.Load((index >> 1) << 2) >> ((index & 1) * 16)) & 0xffff;
#if FORMAT == F16
  return f16tof32(half);
#else
  return half;
#endif
#elif FORMAT == I64
  return buffer.Load2(index * 8);
#else
  return (Value)asfloat(buffer.Load(index * 4));  // asuint for I32
#endif
}

void Store(uint index, Value v) {  // the wide format: whole dwords only
#if FORMAT == I64
  Output.Store2(index * 8, v);
#else
  Output.Store(index * 4, asuint(v));
#endif
}

// Element at scan position p of line L = (o, n) is origin + p * step.
void LineGeometry(uint line, out uint origin, out uint step) {
  uint o = line / inner, n = line % inner;
  uint base = o * axis * inner + n;
  origin = REVERSE ? base + (axis - 1) * inner : base;
  step = REVERSE ? (uint)(-(int)inner) : inner;  // wraps
}

#if PASS == SERIAL
[numthreads(THREADS, 1, 1)]
void main(uint3 gid : SV_GroupID, uint tid : SV_GroupIndex) {
  uint line = (gid.y * groups_x + gid.x) * THREADS + tid;
  if (line >= lines) return;
  uint origin, step;
  LineGeometry(line, origin, step);
  Value acc = Identity();
  for (uint i = 0; i < axis; ++i) {
    uint e = origin + i * step;
    Value x = Load(Input, e);
    if (EXCLUSIVE) { Store(e, acc); acc = Combine(acc, x); }
    else { acc = Combine(acc, x); Store(e, acc); }
  }
}
#elif PASS == PACK16
[numthreads(64, 1, 1)]
void main(uint3 gid : SV_GroupID, uint tid : SV_GroupIndex) {
  uint w = (gid.y * groups_x + gid.x) * 64 + tid;
  uint count = axis;
  if (w >= (count + 1) / 2) return;
  uint lo = Input.Load(w * 8), hi = 0;
  if (2 * w + 1 < count) hi = Input.Load(w * 8 + 4);  // root SRVs are not bounds-checked
#if FORMAT == F16
  lo = f32tof16(asfloat(lo)); hi = f32tof16(asfloat(hi));
#else
  lo &= 0xffff; hi &= 0xffff;
#endif
  Output.Store(w * 4, lo | (hi << 16));  // one thread per output dword
}
#else  // LINE, REDUCE, TILE
groupshared Value partial[THREADS];

[numthreads(THREADS, 1, 1)]
void main(uint3 gid : SV_GroupID, uint tid : SV_GroupIndex) {
  uint group = gid.y * groups_x + gid.x;
  if (group >= group_count) return;  // uniform per group
#if PASS == LINE
  uint line = group, first_tile = 0, last_tile = tiles;
  Value carry = Identity();
#else
  uint line = group / tiles, first_tile = group % tiles, last_tile = first_tile + 1;
#if PASS == TILE
  Value carry = Load(Carries, group);  // wide format
#endif
#endif
  uint origin, step;
  LineGeometry(line, origin, step);
  for (uint tile = first_tile; tile < last_tile; ++tile) {
    uint start = tile * THREADS * PER_THREAD + tid * PER_THREAD;
    // Phase 1: this thread's PER_THREAD consecutive elements.
    Value v = Identity();
    for (uint j = 0; j < PER_THREAD; ++j)
      if (start + j < axis) v = Combine(v, Load(Input, origin + (start + j) * step));
    // Phase 2: inclusive Hillis-Steele scan of the thread totals.
    partial[tid] = v;
    GroupMemoryBarrierWithGroupSync();
    for (uint offset = 1; offset < THREADS; offset <<= 1) {
      if (tid >= offset) v = Combine(partial[tid - offset], v);
      GroupMemoryBarrierWithGroupSync();
      partial[tid] = v;
      GroupMemoryBarrierWithGroupSync();
    }
    Value total = partial[THREADS - 1];
    Value prefix = tid >= 1 ? partial[tid - 1] : Identity();
#if PASS == LINE
    GroupMemoryBarrierWithGroupSync();  // the next tile rewrites partial[]
#endif
#if PASS == REDUCE
    if (tid == 0) Store(group, total);  // partials[line * tiles + tile]
#else
    // Phase 3: rescan the elements from this thread's carry-in.
    Value running = Combine(carry, prefix);
    for (uint j = 0; j < PER_THREAD; ++j) {
      if (start + j >= axis) continue;
      uint e = origin + (start + j) * step;
      Value x = Load(Input, e);
      if (EXCLUSIVE) { Store(e, running); running = Combine(running, x); }
      else { running = Combine(running, x); Store(e, running); }
    }
#endif
#if PASS == LINE
    carry = Combine(carry, total);
#endif
  }
}
#endif

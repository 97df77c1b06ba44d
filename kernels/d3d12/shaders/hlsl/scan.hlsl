// HLSL equivalent of the scan kernels built by scan_kernels.cc and
// scan_lookback_kernel.cc (documentation: dmlserve generates the DXBC with its
// own assembler; this file states the intent in the language reviewers know,
// and compiles with fxc/dxc as cs_5_0).
//
// Specialisation (the kernel key "scan.<PASS>/<op>/<format>/<dir>/<excl>/t<T>p<P>",
// LOOKBACK adds "/w<POLLS>"):
//   PASS       SERIAL | LINE | LOOKBACK | PACK16 | CLEAR
//   PRODUCT    0: sum, 1: product
//   FORMAT     F32 | F16 | I32 | U16 | I64   (input format; output is the
//              wide format: F16 -> float32, U16 -> uint32, others unchanged)
//   REVERSE    AxisDirection DECREASING
//   EXCLUSIVE  HasExclusiveSum / HasExclusiveProduct
//   THREADS, PER_THREAD  tile shape (tile = THREADS * PER_THREAD elements)
//   POLLS      LOOKBACK: polls of a silent predecessor before reducing it here
//
// The DXBC also stages each tile through groupshared memory (coalesced
// loads and stores); this file leaves that out.

ByteAddressBuffer Input : register(t0);
RWByteAddressBuffer Output : register(u0);
// LOOKBACK: per (line, tile) slot of 4 values [flag, aggregate, inclusive, -],
// flag 0 (nothing), 1 (aggregate) or 2 (inclusive); zeroed by CLEAR in the
// stage before. Atomics only.
RWByteAddressBuffer State : register(u1);
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
#elif PASS == CLEAR
[numthreads(64, 1, 1)]
void main(uint3 gid : SV_GroupID, uint tid : SV_GroupIndex) {
  uint slot = (gid.y * groups_x + gid.x) * 64 + tid;
  if (slot < axis) Output.Store4(slot * 16, uint4(0, 0, 0, 0));  // c0: 16-byte slots
}
#else  // LINE, LOOKBACK
groupshared Value partial[THREADS];
groupshared uint window[THREADS];
groupshared uint decision_shared;
groupshared Value found_shared;

#if PASS == LOOKBACK
#if FORMAT == I64
static const uint kValueBytes = 8;
Value AtomicRead(uint address) {
  uint lo, hi;
  State.InterlockedAdd(address, 0, lo);
  State.InterlockedAdd(address + 4, 0, hi);
  return uint2(lo, hi);
}
void AtomicWrite(uint address, Value v) {
  uint old;
  State.InterlockedExchange(address, v.x, old);
  State.InterlockedExchange(address + 4, v.y, old);
}
#else
static const uint kValueBytes = 4;
Value AtomicRead(uint address) {
  uint bits;
  State.InterlockedAdd(address, 0, bits);
  return (Value)asfloat(bits);  // asuint for integer formats
}
void AtomicWrite(uint address, Value v) {
  uint old;
  State.InterlockedExchange(address, asuint(v), old);
}
#endif
static const uint kSlotBytes = 4 * kValueBytes;

// Field `kind` (1 aggregate, 2 inclusive), a device-wide fence, then the
// flag. The fence is a group barrier (vkd3d 1.2 makes every device-wide fence
// one), so the whole group calls this.
void Publish(uint slot, uint kind, Value v, uint tid) {
  if (tid == 0) AtomicWrite(slot + kind * kValueBytes, v);
  DeviceMemoryBarrierWithGroupSync();
  uint old;
  if (tid == 0) State.InterlockedExchange(slot, kind, old);
}

uint ReadFlag(uint slot) {
  uint flag;
  State.InterlockedAdd(slot, 0, flag);
  return flag;
}
#endif

[numthreads(THREADS, 1, 1)]
void main(uint3 gid : SV_GroupID, uint tid : SV_GroupIndex) {
  uint group = gid.y * groups_x + gid.x;
  if (group >= group_count) return;  // uniform per group
#if PASS == LINE
  uint line = group, first_tile = 0, last_tile = tiles;
  Value carry = Identity();
#else
  uint line = group / tiles, first_tile = group % tiles, last_tile = first_tile + 1;
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
    GroupMemoryBarrierWithGroupSync();  // partial[] is free again
#if PASS == LOOKBACK
    // Decoupled look-back: publish the total at once, then fold the
    // predecessors' published values, nearest first, up to an inclusive one.
    uint slot = group * kSlotBytes;
    Publish(slot, tile == 0 ? 2 : 1, total, tid);
    Value carry = Identity();
    if (tile != 0) {
      int look = int(tile) - 1;  // uniform: the nearest predecessor not yet folded
      for (;;) {
        // A window of THREADS predecessors: thread t reads look - t.
        uint own = slot - (tile - look + tid) * kSlotBytes;
        uint d = (POLLS > 0 && int(tid) <= look) ? ReadFlag(own) : 0;
        DeviceMemoryBarrierWithGroupSync();  // each field was written before its flag
        if (d != 0) partial[tid] = AtomicRead(own + d * kValueBytes);
        window[tid] = d;
        GroupMemoryBarrierWithGroupSync();
        if (tid == 0) {  // fold: aggregates up to an inclusive (2), a silent one (0) or the end (3)
          Value acc = Identity();
          uint count = 0, decision = 3;
          for (; count < THREADS && int(count) <= look; ++count) {
            if (window[count] == 0) { decision = 0; break; }
            acc = Combine(partial[count], acc);
            if (window[count] == 2) { decision = 2; ++count; break; }
          }
          decision_shared = decision | (count << 2);
          found_shared = acc;
        }
        GroupMemoryBarrierWithGroupSync();
        uint decision = decision_shared & 3, count = decision_shared >> 2;
        carry = Combine(found_shared, carry);
        if (decision == 2) break;
        look -= int(count);
        if (decision == 0) {
          // Predecessor `look` is silent: poll it, else reduce its tile here
          // (so no group ever waits on one that may not have started).
          GroupMemoryBarrierWithGroupSync();
          if (tid == 0) {
            uint polled = 0;
            for (uint p = 0; p < POLLS && polled == 0; ++p) polled = ReadFlag(slot - (tile - look) * kSlotBytes);
            decision_shared = polled;
          }
          DeviceMemoryBarrierWithGroupSync();
          uint polled = decision_shared;
          Value value = Identity();
          if (polled != 0) {
            if (tid == 0) found_shared = AtomicRead(slot - (tile - look) * kSlotBytes + polled * kValueBytes);
            GroupMemoryBarrierWithGroupSync();
            value = found_shared;
          } else {
            for (uint j = 0; j < PER_THREAD; ++j)  // a full tile, any element order
              value = Combine(value, Load(Input, origin + (look * THREADS * PER_THREAD + j * THREADS + tid) * step));
            partial[tid] = value;
            GroupMemoryBarrierWithGroupSync();
            for (uint half = THREADS / 2; half >= 1; half /= 2) {
              if (tid < half) partial[tid] = Combine(partial[tid], partial[tid + half]);
              GroupMemoryBarrierWithGroupSync();
            }
            value = partial[0];
          }
          carry = Combine(value, carry);
          if (polled == 2 || look == 0) break;
          look -= 1;
        }
        GroupMemoryBarrierWithGroupSync();  // window[], partial[] and the mailbox are rewritten
      }
      Publish(slot, 2, Combine(carry, total), tid);
    }
#endif
    // Phase 3: rescan the elements from this thread's carry-in.
    Value running = Combine(carry, prefix);
    for (uint j = 0; j < PER_THREAD; ++j) {
      if (start + j >= axis) continue;
      uint e = origin + (start + j) * step;
      Value x = Load(Input, e);
      if (EXCLUSIVE) { Store(e, running); running = Combine(running, x); }
      else { running = Combine(running, x); Store(e, running); }
    }
#if PASS == LINE
    GroupMemoryBarrierWithGroupSync();  // the next tile rewrites partial[]
    carry = Combine(carry, total);
#endif
  }
}
#endif

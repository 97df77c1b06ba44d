#include "kernels/d3d12/shaders/scan_kernels.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/d3d12/shaders/kernel_assembler.h"

namespace dmlserve::d3d12 {
namespace {

using dxbc::Operand;

constexpr const char* kPassNames[] = {"serial", "line", "lookback", "pack16", "clear"};
constexpr const char* kOpNames[] = {"sum", "prod"};
constexpr const char* kFormatNames[] = {"f32", "f16", "i32", "u16", "i64"};

template <typename E, size_t N>
bool ParseName(absl::string_view text, const char* const (&names)[N], E* out) {
  for (size_t i = 0; i < N; ++i) {
    if (text == names[i]) {
      *out = static_cast<E>(i);
      return true;
    }
  }
  return false;
}

bool IsPowerOfTwo(uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Emits the per-format arithmetic of a scan. A value lives in one temp:
// .x (32-bit formats, floats for FLOAT16) or .xy = (lo, hi) for 64-bit.
class ScanCodegen {
 public:
  ScanCodegen(KernelAssembler& a, ScanOp op, ScanFormat format)
      : a_(a), op_(op), compute_(WideFormat(format)) {}

  uint32_t NewValue() { return a_.NewTemp(); }
  Operand Dst(uint32_t v) const { return KernelAssembler::r(v).sel(wide64() ? "xy" : "x"); }
  Operand Src(uint32_t v) const { return KernelAssembler::r(v).sel(wide64() ? "xyyy" : "x"); }
  uint32_t value_bytes() const { return wide64() ? 8 : 4; }

  void Identity(uint32_t v) {
    const bool product = op_ == ScanOp::kProduct;
    switch (compute_) {
      case ScanFormat::kF32:
        a_.mov(Dst(v), KernelAssembler::lf(product ? 1.0f : 0.0f));
        break;
      case ScanFormat::kI32:
        a_.mov(Dst(v), KernelAssembler::l(product ? 1 : 0));
        break;
      default:  // i64 sums
        a_.mov(Dst(v), KernelAssembler::l(0, 0, 0, 0));
        break;
    }
  }

  // d = x (+|*) y, with x the earlier elements; d may alias x or y.
  void Combine(uint32_t d, uint32_t x, uint32_t y) {
    const bool product = op_ == ScanOp::kProduct;
    if (compute_ == ScanFormat::kF32) {
      if (product) {
        a_.mul(Dst(d), Src(x), Src(y));
      } else {
        a_.add(Dst(d), Src(x), Src(y));
      }
    } else if (compute_ == ScanFormat::kI32) {
      if (product) {
        a_.imul(Dst(d), Src(x), Src(y));
      } else {
        a_.iadd(Dst(d), Src(x), Src(y));
      }
    } else {
      // 64-bit add: lo = x.lo + y.lo; carry = lo < x.lo; hi = x.hi + y.hi + carry.
      const uint32_t t = Scratch(0);
      using A = KernelAssembler;
      a_.iadd(A::r(t).x(), A::r(x).x(), A::r(y).x());
      a_.ult(A::r(t).y(), A::r(t).x(), A::r(x).x());
      a_.and_(A::r(t).y(), A::r(t).y(), A::l(1));
      a_.iadd(A::r(t).z(), A::r(x).y(), A::r(y).y());
      a_.iadd(A::r(d).y(), A::r(t).z(), A::r(t).y());
      a_.mov(A::r(d).x(), A::r(t).x());
    }
  }

  // Loads element `index` of a buffer in `format`, converted to the compute
  // type (FLOAT16 -> float32, UINT16 -> uint32).
  void Load(uint32_t v, const Operand& index, const Operand& resource, ScanFormat format) {
    using A = KernelAssembler;
    const uint32_t s = Scratch(1);
    switch (format) {
      case ScanFormat::kF32:
      case ScanFormat::kI32:
        a_.ishl(A::r(s).x(), index, A::l(2));
        a_.ld_raw(Dst(v), A::r(s).x(), resource);
        break;
      case ScanFormat::kI64:
        a_.ishl(A::r(s).x(), index, A::l(3));
        a_.ld_raw(Dst(v), A::r(s).x(), resource);
        break;
      case ScanFormat::kF16:
      case ScanFormat::kU16:
        // Raw buffers are dword-addressed: load the dword, pick the half.
        a_.ushr(A::r(s).x(), index, A::l(1));
        a_.ishl(A::r(s).x(), A::r(s).x(), A::l(2));
        a_.ld_raw(A::r(s).y(), A::r(s).x(), resource);
        a_.and_(A::r(s).z(), index, A::l(1));
        a_.ishl(A::r(s).z(), A::r(s).z(), A::l(4));
        a_.ubfe(Dst(v), A::l(16), A::r(s).z(), A::r(s).y());
        if (format == ScanFormat::kF16) a_.f16tof32(Dst(v), Src(v));
        break;
    }
  }

  // Stores a value at element `index` of a buffer in the compute format.
  void Store(const Operand& uav, const Operand& index, uint32_t v) {
    using A = KernelAssembler;
    const uint32_t s = Scratch(1);
    a_.ishl(A::r(s).x(), index, A::l(wide64() ? 3 : 2));
    a_.store_raw(uav.sel(wide64() ? "xy" : "x"), A::r(s).x(), Src(v));
  }

  void StoreShared(const Operand& byte_offset, uint32_t v) {
    a_.store_raw(KernelAssembler::g(0).sel(wide64() ? "xy" : "x"), byte_offset, Src(v));
  }
  void LoadShared(uint32_t v, const Operand& byte_offset) {
    a_.ld_raw(Dst(v), byte_offset, KernelAssembler::g(0));
  }

 private:
  bool wide64() const { return compute_ == ScanFormat::kI64; }
  uint32_t Scratch(int i) {
    if (scratch_[i] == 0) scratch_[i] = a_.NewTemp() + 1;
    return scratch_[i] - 1;
  }

  KernelAssembler& a_;
  ScanOp op_;
  ScanFormat compute_;
  uint32_t scratch_[2] = {0, 0};  // temp index + 1, allocated on first use
};

// Where a line starts and how far apart its elements are, in scan order:
// element at scan position p is origin + p * step (wrapping arithmetic, so a
// negative step for decreasing scans is fine).
struct LineGeometry {
  Operand origin;
  Operand step;
};

LineGeometry EmitLineGeometry(KernelAssembler& a, const Operand& line, bool reverse) {
  using A = KernelAssembler;
  const Operand outer = a.Scalar(), inner_index = a.Scalar();
  a.udiv(outer, inner_index, line, A::Constant(kScanConstInner));
  const Operand t = a.Scalar();
  a.imul(t, outer, A::Constant(kScanConstAxis));
  const Operand base = a.Scalar();
  a.imad(base, t, A::Constant(kScanConstInner), inner_index);
  if (!reverse) return {base, A::Constant(kScanConstInner)};
  const Operand last = a.Scalar(), step = a.Scalar();
  a.iadd(t, A::Constant(kScanConstAxis), A::l(-1));
  a.imad(last, t, A::Constant(kScanConstInner), base);
  a.ineg(step, A::Constant(kScanConstInner));
  return {last, step};
}

void BuildSerial(KernelAssembler& a, const ScanKernelSpec& spec) {
  using A = KernelAssembler;
  a.DeclareBindings(/*srvs=*/1, /*uavs=*/1);
  a.dcl_input(A::vThreadGroupID().xy());
  a.dcl_input(A::vThreadIDInGroupFlattened());
  a.dcl_thread_group(spec.threads, 1, 1);
  ScanCodegen c(a, spec.op, spec.format);

  const Operand group = a.Scalar(), line = a.Scalar();
  a.LinearGroupIndex(group);
  a.imad(line, group, A::l(spec.threads), A::vThreadIDInGroupFlattened().x());
  a.IfUnsignedLess(line, A::Constant(kScanConstLines));
  const LineGeometry geo = EmitLineGeometry(a, line, spec.reverse);
  const uint32_t acc = c.NewValue(), x = c.NewValue();
  c.Identity(acc);
  const Operand i = a.Scalar(), e = a.Scalar();
  a.mov(i, A::l(0));
  a.LoopWhileUnsignedLess(i, A::Constant(kScanConstAxis));
  a.imad(e, i, geo.step, geo.origin);
  c.Load(x, e, A::t(0), spec.format);
  if (spec.exclusive) {
    c.Store(A::u(0), e, acc);
    c.Combine(acc, acc, x);
  } else {
    c.Combine(acc, acc, x);
    c.Store(A::u(0), e, acc);
  }
  a.iadd(i, i, A::l(1));
  a.endloop();
  a.endif();
  a.ret();
}

// What the look-back needs from the tile pass around it (BuildTiled).
struct TileFrame {
  Operand tid, group, tile;  // this thread, its group, the group's tile in its line
  LineGeometry geo;          // where the line starts and its step, in scan order
  Operand slot;              // g0 byte offset of this thread's totals slot (free by now)
  uint32_t mailbox, window;  // g0 byte offsets of the mailbox and the look-back window
};

// Into `found` (all threads): the reduction of tile `look` of this line, read
// from the input; the tile is full (only a line's last tile is partial) and
// element order does not matter to sums and products. Uses the totals' slots.
void EmitReduceTile(KernelAssembler& a, ScanCodegen& c, const ScanKernelSpec& spec,
                    const TileFrame& f, const Operand& look, uint32_t found) {
  using A = KernelAssembler;
  const uint32_t bytes = c.value_bytes();
  const Operand j = a.Scalar(), local = a.Scalar(), pos = a.Scalar(), e = a.Scalar();
  const Operand other = a.Scalar();
  const uint32_t x = c.NewValue(), u = c.NewValue();
  const Operand look_start = a.Scalar();
  a.imul(look_start, look, A::l(spec.tile()));
  c.Identity(found);
  a.mov(j, A::l(0));
  a.LoopWhileUnsignedLess(j, A::l(spec.per_thread));
  a.imad(local, j, A::l(spec.threads), f.tid);
  a.iadd(pos, look_start, local);
  a.imad(e, pos, f.geo.step, f.geo.origin);
  c.Load(x, e, A::t(0), spec.format);
  c.Combine(found, found, x);
  a.iadd(j, j, A::l(1));
  a.endloop();
  c.StoreShared(f.slot, found);
  a.sync_g_t();
  for (uint32_t half = spec.threads / 2; half >= 1; half /= 2) {
    a.IfUnsignedLess(f.tid, A::l(half));
    a.iadd(other, f.slot, A::l(half * bytes));
    c.LoadShared(u, other);
    c.Combine(found, found, u);
    c.StoreShared(f.slot, found);
    a.endif();
    a.sync_g_t();
  }
  c.LoadShared(found, A::l(0));
}

// The decoupled look-back (scan_kernels.h), reached by the whole group once
// the tile's `total` is known and the totals' slots, the mailbox and the
// window are free: publishes the total, folds what the predecessors published
// into `carry` (the elements before the tile), publishes the tile's inclusive
// prefix.
void EmitLookBack(KernelAssembler& a, ScanCodegen& c, const ScanKernelSpec& spec,
                  const TileFrame& f, uint32_t total, uint32_t carry) {
  using A = KernelAssembler;
  const uint32_t bytes = c.value_bytes();
  const uint32_t u = c.NewValue();
  const uint32_t state_bytes = LookbackStateBytes(spec.format);
  const Operand first_thread = a.Scalar(), first_tile = a.Scalar();
  const Operand state = a.Scalar(), field = a.Scalar(), flag = a.Scalar();
  const Operand test = a.Scalar();
  a.ieq(first_thread, f.tid, A::l(0));
  a.ieq(first_tile, f.tile, A::l(0));
  a.imul(state, f.group, A::l(state_bytes));
  // Writes go through atomics too (performed where every group's
  // atomics meet), and the fences sit where the whole group arrives:
  // vkd3d 1.2 turns a device-wide fence into a group control barrier,
  // which must not be reached by thread 0 alone.
  auto atomic_store = [&](const Operand& address, uint32_t value) {
    a.imm_atomic_exch(test, A::u(1).x(), address, A::r(value).x());
    if (bytes == 8) {
      a.iadd(field, address, A::l(4));
      a.imm_atomic_exch(test, A::u(1).x(), field, A::r(value).y());
    }
  };
  // value = the published field at `address` (atomic reads).
  auto atomic_load = [&](uint32_t value, const Operand& address) {
    a.imm_atomic_iadd(A::r(value).x(), A::u(1).x(), address, A::l(0));
    if (bytes == 8) {
      a.iadd(field, address, A::l(4));
      a.imm_atomic_iadd(A::r(value).y(), A::u(1).x(), field, A::l(0));
    }
  };
  // Publishes `value` in field `kind` (1 aggregate, 2 inclusive) of this
  // tile's slot: the field, a device-wide fence, then the flag.
  auto publish = [&](uint32_t value, const Operand& kind) {
    a.if_nz(first_thread);
    a.imad(field, kind, A::l(bytes), state);
    atomic_store(field, value);
    a.endif();
    a.sync_uglobal_g_t();
    a.if_nz(first_thread);
    a.imm_atomic_exch(test, A::u(1).x(), state, kind);
    a.endif();
  };
  // The tile's total at once, so that successors need not wait for this
  // group's own look-back: as its inclusive prefix if it is the line's
  // first tile, else as its aggregate.
  const Operand kind = a.Scalar();
  a.movc(kind, first_tile, A::l(2), A::l(1));
  publish(total, kind);

  c.Identity(carry);
  a.if_z(first_tile);
  // Uniform state of the walk back: `look` is the nearest predecessor
  // not yet folded into `carry`, `look_state` its slot.
  const Operand look = a.Scalar(), look_state = a.Scalar(), decision = a.Scalar();
  const Operand polls = a.Scalar(), count = a.Scalar(), own = a.Scalar();
  const uint32_t found = c.NewValue();
  a.iadd(look, f.tile, A::l(-1));
  a.imad(look_state, f.group, A::l(state_bytes), A::l(-static_cast<int32_t>(state_bytes)));
  a.loop();
  // 1. A window of `threads` predecessors at once: thread t reads the
  //    flag, then the published field, of predecessor look - t into
  //    window slot t (flags at `window`, values in the totals' slots).
  //    (polls = 0, for tests: no flag is read, every predecessor is
  //    reduced from the input.)
  a.mov(decision, A::l(0));
  a.imad(own, f.tid, A::l(-static_cast<int32_t>(state_bytes)), look_state);
  if (spec.polls > 0) {
    a.IfUnsignedGreaterEqual(look, f.tid);
    a.imm_atomic_iadd(decision, A::u(1).x(), own, A::l(0));  // an atomic read
    a.endif();
  }
  a.sync_uglobal_g_t();  // each field was written before its flag
  a.if_nz(decision);
  a.imad(field, decision, A::l(bytes), own);
  atomic_load(found, field);
  c.StoreShared(f.slot, found);
  a.endif();
  a.imad(field, f.tid, A::l(4), A::l(f.window));
  a.store_raw(A::g(0).x(), field, decision);
  a.sync_g_t();
  // 2. Thread 0 folds the window from the nearest predecessor back,
  //    through aggregates, up to an inclusive prefix (decision 2), a
  //    predecessor that published nothing (0), or the window's end (3);
  //    count = the predecessors folded.
  a.if_nz(first_thread);
  c.Identity(found);
  a.mov(count, A::l(0));
  a.mov(decision, A::l(3));
  a.loop();
  a.uge(test, count, A::l(spec.threads));
  a.breakc_nz(test);
  a.ult(test, look, count);  // past the line's first tile: never reached
  a.breakc_nz(test);
  a.imad(field, count, A::l(4), A::l(f.window));
  a.ld_raw(flag, field, A::g(0));
  a.if_z(flag);
  a.mov(decision, A::l(0));
  a.break_();
  a.endif();
  a.imul(field, count, A::l(bytes));
  c.LoadShared(u, field);
  c.Combine(found, u, found);  // u covers earlier elements
  a.iadd(count, count, A::l(1));
  a.ieq(test, flag, A::l(2));
  a.if_nz(test);
  a.mov(decision, A::l(2));
  a.break_();
  a.endif();
  a.endloop();
  a.store_raw(A::g(0).x(), A::l(f.mailbox), decision);
  a.store_raw(A::g(0).x(), A::l(f.mailbox + 4), count);
  c.StoreShared(A::l(f.mailbox + 8), found);
  a.endif();
  a.sync_g_t();
  a.ld_raw(decision, A::l(f.mailbox), A::g(0));
  a.ld_raw(count, A::l(f.mailbox + 4), A::g(0));
  c.LoadShared(found, A::l(f.mailbox + 8));
  c.Combine(carry, found, carry);
  a.ieq(test, decision, A::l(2));
  a.breakc_nz(test);
  a.iadd(look, look, -count);
  a.imad(look_state, count, A::l(-static_cast<int32_t>(state_bytes)), look_state);
  a.if_z(decision);
  {
    // 3. Predecessor `look` has published nothing yet: thread 0 polls
    //    it; if it stays silent, the group reduces its tile from the
    //    input (a full tile: only a line's last tile is partial; element
    //    order does not matter to sums and products).
    a.sync_g_t();  // the mailbox is rewritten
    a.if_nz(first_thread);
    a.mov(decision, A::l(0));
    a.mov(polls, A::l(0));
    a.LoopWhileUnsignedLess(polls, A::l(spec.polls));
    a.imm_atomic_iadd(decision, A::u(1).x(), look_state, A::l(0));
    a.breakc_nz(decision);
    a.iadd(polls, polls, A::l(1));
    a.endloop();
    a.store_raw(A::g(0).x(), A::l(f.mailbox), decision);
    a.endif();
    a.sync_uglobal_g_t();
    a.ld_raw(decision, A::l(f.mailbox), A::g(0));
    a.if_nz(decision);
    a.if_nz(first_thread);
    a.imad(field, decision, A::l(bytes), look_state);
    atomic_load(found, field);
    c.StoreShared(A::l(f.mailbox + 8), found);
    a.endif();
    a.sync_g_t();
    c.LoadShared(found, A::l(f.mailbox + 8));
    a.else_();
    EmitReduceTile(a, c, spec, f, look, found);
    a.endif();
    c.Combine(carry, found, carry);
    a.ieq(test, decision, A::l(2));
    a.breakc_nz(test);
    a.breakc_z(look);  // the line's first tile, reduced above
    a.iadd(look, look, A::l(-1));
    a.iadd(look_state, look_state, A::l(-static_cast<int32_t>(state_bytes)));
  }
  a.endif();
  a.sync_g_t();  // the window, the mailbox and the slots are rewritten next round
  a.endloop();
  const uint32_t inclusive = c.NewValue();
  c.Combine(inclusive, carry, total);
  publish(inclusive, A::l(2));
  a.endif();  // not the first tile
}

// line / lookback: see the header.
void BuildTiled(KernelAssembler& a, const ScanKernelSpec& spec) {
  using A = KernelAssembler;
  const bool lookback = spec.pass == ScanPass::kLookback;
  // u1 (look-back state) is read and written only through atomics, which
  // every group performs at device scope: it needs no globallycoherent
  // declaration (which vkd3d 1.2 would ignore).
  a.DeclareBindings(/*srvs=*/1, /*uavs=*/lookback ? 2 : 1);
  a.dcl_input(A::vThreadGroupID().xy());
  a.dcl_input(A::vThreadIDInGroupFlattened());
  ScanCodegen c(a, spec.op, spec.format);
  const uint32_t bytes = c.value_bytes();
  // g0: the thread totals, then the tile's elements (staged so that global
  // loads and stores are coalesced: lane t touches element j * threads + t),
  // with one padding slot every 32 so that a thread's consecutive elements
  // (stride per_thread) spread over the banks; lookback adds a mailbox
  // (decision word, count word, value) through which thread 0 tells the
  // group what it found, and the look-back window's flags.
  const uint32_t stage_base = spec.threads * bytes;
  const uint32_t stage_slots = spec.tile() + spec.tile() / 32;
  const uint32_t mailbox = stage_base + stage_slots * bytes;
  const uint32_t window = mailbox + 8 + bytes;
  a.dcl_tgsm_raw(0, lookback ? window + spec.threads * 4 : mailbox);
  a.dcl_thread_group(spec.threads, 1, 1);
  const Operand tid = A::vThreadIDInGroupFlattened().x();

  const Operand group = a.Scalar();
  a.LinearGroupIndex(group);
  a.IfUnsignedLess(group, A::Constant(kConstGroupCount));

  Operand line = group;
  const Operand tile = a.Scalar();
  if (lookback) {
    line = a.Scalar();
    a.udiv(line, tile, group, A::Constant(kScanConstTiles));
  } else {
    a.mov(tile, A::l(0));
  }
  const LineGeometry geo = EmitLineGeometry(a, line, spec.reverse);
  const Operand slot = a.Scalar(), previous_slot = a.Scalar();
  a.imul(slot, tid, A::l(bytes));
  a.iadd(previous_slot, slot, A::l(-static_cast<int32_t>(bytes)));

  const uint32_t carry = c.NewValue();
  if (!lookback) {
    c.Identity(carry);
    a.LoopWhileUnsignedLess(tile, A::Constant(kScanConstTiles));
  }

  // The tile's first scan position; this thread's elements in scan order
  // are tile positions tid * per_thread .. + per_thread - 1.
  const Operand tile_start = a.Scalar();
  a.imul(tile_start, tile, A::l(spec.tile()));

  const uint32_t v = c.NewValue(), x = c.NewValue();
  const Operand j = a.Scalar(), local = a.Scalar(), pos = a.Scalar(), e = a.Scalar();
  const Operand stage = a.Scalar();
  // stage = byte offset in g0 of tile position `local`.
  auto stage_address = [&] {
    a.ushr(stage, local, A::l(5));
    a.iadd(stage, stage, local);
    a.imad(stage, stage, A::l(bytes), A::l(stage_base));
  };
  // Tile positions j * threads + tid, j = 0 .. per_thread - 1, that lie on
  // the line: coalesced global access.
  auto for_each_strided = [&](auto&& body) {
    a.mov(j, A::l(0));
    a.LoopWhileUnsignedLess(j, A::l(spec.per_thread));
    a.imad(local, j, A::l(spec.threads), tid);
    a.iadd(pos, tile_start, local);
    a.IfUnsignedLess(pos, A::Constant(kScanConstAxis));
    a.imad(e, pos, geo.step, geo.origin);
    stage_address();
    body();
    a.endif();
    a.iadd(j, j, A::l(1));
    a.endloop();
  };
  // This thread's consecutive positions, read from (and written to) g0.
  auto for_each_own = [&](auto&& body) {
    a.mov(j, A::l(0));
    a.LoopWhileUnsignedLess(j, A::l(spec.per_thread));
    a.imad(local, tid, A::l(spec.per_thread), j);
    a.iadd(pos, tile_start, local);
    a.IfUnsignedLess(pos, A::Constant(kScanConstAxis));
    stage_address();
    c.LoadShared(x, stage);
    body();
    a.endif();
    a.iadd(j, j, A::l(1));
    a.endloop();
  };

  // Stage the tile, then phase 1: the thread's total.
  for_each_strided([&] {
    c.Load(x, e, A::t(0), spec.format);
    c.StoreShared(stage, x);
  });
  a.sync_g_t();
  c.Identity(v);
  for_each_own([&] { c.Combine(v, v, x); });

  // Phase 2: inclusive Hillis-Steele scan of the thread totals in g0.
  c.StoreShared(slot, v);
  a.sync_g_t();
  const Operand offset = a.Scalar(), other = a.Scalar();
  const uint32_t u = c.NewValue();
  a.mov(offset, A::l(1));
  a.LoopWhileUnsignedLess(offset, A::l(spec.threads));
  a.IfUnsignedGreaterEqual(tid, offset);
  a.imul(other, offset, A::l(bytes));
  a.ineg(other, other);
  a.iadd(other, slot, other);
  c.LoadShared(u, other);
  c.Combine(v, u, v);
  a.endif();
  a.sync_g_t();
  c.StoreShared(slot, v);
  a.sync_g_t();
  a.ishl(offset, offset, A::l(1));
  a.endloop();

  const uint32_t total = c.NewValue(), prefix = c.NewValue();
  c.LoadShared(total, A::l((spec.threads - 1) * bytes));
  c.Identity(prefix);
  a.IfUnsignedGreaterEqual(tid, A::l(1));
  c.LoadShared(prefix, previous_slot);
  a.endif();
  // The totals' slots are free again (the next tile restages g0; look-back
  // reduces a predecessor through them).
  a.sync_g_t();

  if (lookback) {
    EmitLookBack(a, c, spec, {tid, group, tile, geo, slot, mailbox, window}, total, carry);
  }

  // Phase 3: rescan the elements from the thread's carry-in, results back
  // into g0, then store them coalesced.
  const uint32_t running = c.NewValue();
  c.Combine(running, carry, prefix);
  for_each_own([&] {
    if (spec.exclusive) {
      c.StoreShared(stage, running);
      c.Combine(running, running, x);
    } else {
      c.Combine(running, running, x);
      c.StoreShared(stage, running);
    }
  });
  a.sync_g_t();
  for_each_strided([&] {
    c.LoadShared(x, stage);
    c.Store(A::u(0), e, x);
  });
  if (!lookback) {
    a.sync_g_t();  // the next tile restages g0
    c.Combine(carry, carry, total);
    a.iadd(tile, tile, A::l(1));
    a.endloop();
  }
  a.endif();
  a.ret();
}

void BuildPack16(KernelAssembler& a, const ScanKernelSpec& spec) {
  using A = KernelAssembler;
  a.DeclareBindings(/*srvs=*/1, /*uavs=*/1);
  a.dcl_input(A::vThreadGroupID().xy());
  a.dcl_input(A::vThreadIDInGroupFlattened());
  a.dcl_thread_group(spec.threads, 1, 1);
  const Operand group = a.Scalar(), word = a.Scalar(), words = a.Scalar();
  a.LinearGroupIndex(group);
  a.imad(word, group, A::l(spec.threads), A::vThreadIDInGroupFlattened().x());
  a.iadd(words, A::Constant(kPackConstCount), A::l(1));
  a.ushr(words, words, A::l(1));
  a.IfUnsignedLess(word, words);
  const uint32_t v = a.NewTemp();  // .x = element 2w, .y = element 2w + 1
  const Operand address = a.Scalar(), second = a.Scalar();
  a.ishl(address, word, A::l(3));
  a.ld_raw(A::r(v).x(), address, A::t(0));
  a.mov(A::r(v).y(), A::l(0));
  a.imad(second, word, A::l(2), A::l(1));
  // Root descriptors are not bounds-checked: never read past the scratch.
  a.IfUnsignedLess(second, A::Constant(kPackConstCount));
  a.iadd(address, address, A::l(4));
  a.ld_raw(A::r(v).y(), address, A::t(0));
  a.endif();
  if (spec.format == ScanFormat::kF16) {
    a.f32tof16(A::r(v).xy(), A::r(v).xy());
  } else {
    a.and_(A::r(v).xy(), A::r(v).xy(), A::l(0xffff, 0xffff, 0, 0));
  }
  a.bfi(A::r(v).x(), A::l(16), A::l(16), A::r(v).y(), A::r(v).x());
  a.ishl(address, word, A::l(2));
  a.store_raw(A::u(0).x(), address, A::r(v).x());
  a.endif();
  a.ret();
}

// clear: thread t zeroes 16-byte slot t.
void BuildClear(KernelAssembler& a) {
  using A = KernelAssembler;
  a.DeclareBindings(/*srvs=*/0, /*uavs=*/1);
  a.dcl_input(A::vThreadGroupID().xy());
  a.dcl_input(A::vThreadIDInGroupFlattened());
  a.dcl_thread_group(kClearThreads, 1, 1);
  const Operand group = a.Scalar(), slot = a.Scalar();
  a.LinearGroupIndex(group);
  a.imad(slot, group, A::l(kClearThreads), A::vThreadIDInGroupFlattened().x());
  a.IfUnsignedLess(slot, A::Constant(kClearConstSlots));
  a.ishl(slot, slot, A::l(4));
  a.store_raw(A::u(0).xyzw(), slot, A::l(0, 0, 0, 0));
  a.endif();
  a.ret();
}

absl::Status Validate(const ScanKernelSpec& spec) {
  if (spec.pass == ScanPass::kClear) return absl::OkStatus();
  if (spec.pass == ScanPass::kPack16) {
    if (spec.format != ScanFormat::kF16 && spec.format != ScanFormat::kU16) {
      return absl::InvalidArgumentError("pack16 packs f16 or u16");
    }
    return absl::OkStatus();
  }
  if (spec.op == ScanOp::kProduct && spec.format == ScanFormat::kI64) {
    return absl::InvalidArgumentError("64-bit products are not a cumulative product type");
  }
  if (spec.op == ScanOp::kSum && spec.format == ScanFormat::kU16) {
    return absl::InvalidArgumentError("UINT16 is not a cumulative summation type");
  }
  if (!IsPowerOfTwo(spec.threads) || spec.threads > 1024 || spec.per_thread == 0 ||
      spec.per_thread > 64) {
    return absl::InvalidArgumentError("bad scan tile shape");
  }
  // Groupshared: totals, the staged tile with its padding, the mailbox and
  // the look-back window.
  const uint64_t value_bytes = WideFormat(spec.format) == ScanFormat::kI64 ? 8 : 4;
  const uint64_t tile = uint64_t{spec.threads} * spec.per_thread;
  if ((spec.threads + tile + tile / 32) * value_bytes + 8 + value_bytes + spec.threads * 4 >
      32768) {
    return absl::InvalidArgumentError("scan tile needs more than 32 KiB of groupshared memory");
  }
  if (spec.pass != ScanPass::kLookback && spec.polls != ScanKernelSpec::kDefaultLookbackPolls) {
    return absl::InvalidArgumentError("only lookback polls");
  }
  return absl::OkStatus();
}

}  // namespace

ScanFormat WideFormat(ScanFormat format) {
  switch (format) {
    case ScanFormat::kF16:
      return ScanFormat::kF32;
    case ScanFormat::kU16:
      return ScanFormat::kI32;
    default:
      return format;
  }
}

uint32_t FormatBytes(ScanFormat format) {
  switch (format) {
    case ScanFormat::kF16:
    case ScanFormat::kU16:
      return 2;
    case ScanFormat::kI64:
      return 8;
    default:
      return 4;
  }
}

std::string ScanKernelSpec::Key() const {
  if (pass == ScanPass::kClear) return "scan.clear";
  const char* format_name = kFormatNames[static_cast<int>(format)];
  if (pass == ScanPass::kPack16) return absl::StrCat("scan.pack16/", format_name);
  std::string key =
      absl::StrCat("scan.", kPassNames[static_cast<int>(pass)], "/", kOpNames[static_cast<int>(op)],
                   "/", format_name, "/", reverse ? "dec" : "inc");
  absl::StrAppend(&key, exclusive ? "/excl" : "/incl");
  if (pass == ScanPass::kSerial) {
    absl::StrAppend(&key, "/g", threads);
  } else {
    absl::StrAppend(&key, "/t", threads, "p", per_thread);
  }
  if (pass == ScanPass::kLookback) absl::StrAppend(&key, "/w", polls);
  return key;
}

absl::StatusOr<ScanKernelSpec> ScanKernelSpec::Parse(absl::string_view key) {
  std::vector<absl::string_view> parts = absl::StrSplit(key, '/');
  const absl::Status bad = absl::InvalidArgumentError(absl::StrCat("bad scan kernel key: ", key));
  ScanKernelSpec spec;
  if (parts.empty() || !absl::ConsumePrefix(&parts[0], "scan.") ||
      !ParseName(parts[0], kPassNames, &spec.pass)) {
    return bad;
  }
  if (spec.pass == ScanPass::kClear) {
    if (parts.size() != 1) return bad;
    spec.threads = kClearThreads;
  } else if (spec.pass == ScanPass::kPack16) {
    if (parts.size() != 2 || !ParseName(parts[1], kFormatNames, &spec.format)) return bad;
    spec.threads = kPackThreads;
  } else {
    const bool lookback = spec.pass == ScanPass::kLookback;
    if (parts.size() != (lookback ? 7u : 6u) || !ParseName(parts[1], kOpNames, &spec.op) ||
        !ParseName(parts[2], kFormatNames, &spec.format)) {
      return bad;
    }
    if (parts[3] != "inc" && parts[3] != "dec") return bad;
    spec.reverse = parts[3] == "dec";
    if (parts[4] != "incl" && parts[4] != "excl") return bad;
    spec.exclusive = parts[4] == "excl";
    if (lookback) {
      absl::string_view polls = parts[6];
      if (!absl::ConsumePrefix(&polls, "w") || !absl::SimpleAtoi(polls, &spec.polls)) return bad;
    }
    absl::string_view shape = parts[5];
    if (spec.pass == ScanPass::kSerial) {
      if (!absl::ConsumePrefix(&shape, "g") || !absl::SimpleAtoi(shape, &spec.threads)) return bad;
    } else {
      std::vector<absl::string_view> tp = absl::StrSplit(shape, 'p');
      if (tp.size() != 2 || !absl::ConsumePrefix(&tp[0], "t") ||
          !absl::SimpleAtoi(tp[0], &spec.threads) || !absl::SimpleAtoi(tp[1], &spec.per_thread)) {
        return bad;
      }
    }
  }
  absl::Status status = Validate(spec);
  if (!status.ok()) return status;
  if (spec.Key() != key) return bad;  // one canonical spelling per kernel
  return spec;
}

absl::StatusOr<std::vector<uint8_t>> BuildScanKernel(const ScanKernelSpec& spec) {
  absl::Status status = Validate(spec);
  if (!status.ok()) return status;
  KernelAssembler a;
  switch (spec.pass) {
    case ScanPass::kSerial:
      BuildSerial(a, spec);
      break;
    case ScanPass::kPack16:
      BuildPack16(a, spec);
      break;
    case ScanPass::kClear:
      BuildClear(a);
      break;
    default:
      BuildTiled(a, spec);
      break;
  }
  return FinishKernel(a, spec.Key());
}

uint32_t LookbackStateBytes(ScanFormat format) {
  return 4 * (WideFormat(format) == ScanFormat::kI64 ? 8 : 4);
}

// 64 threads, each scanning 4 (short axes: few idle threads) or 16 elements
// serially: on lavapipe the group barriers of the Hillis-Steele step cost far
// more than the serial part (16 per thread ran 2-3x faster than 4 on 4M
// elements), and 64 threads keep it to 6 steps. Look-back tiles are larger
// (64 per thread, 4096 elements: 16 bytes of state per 4096 elements, and a
// quarter of the look-back steps); 64-bit values take 16 per thread so that
// the staged tile fits 32 KiB of groupshared memory.
const std::vector<ScanTileShape>& ScanTileShapes() {
  static const std::vector<ScanTileShape> shapes = {{64, 4}, {64, 16}, {64, 64}};
  return shapes;
}

size_t LookbackTileShape(ScanFormat format) {
  return WideFormat(format) == ScanFormat::kI64 ? 1 : 2;
}

std::vector<ScanKernelSpec> AllScanKernelSpecs() {
  struct OpFormat {
    ScanOp op;
    ScanFormat format;
  };
  const OpFormat kinds[] = {
      {ScanOp::kSum, ScanFormat::kF32},     {ScanOp::kSum, ScanFormat::kF16},
      {ScanOp::kSum, ScanFormat::kI32},     {ScanOp::kSum, ScanFormat::kI64},
      {ScanOp::kProduct, ScanFormat::kF32}, {ScanOp::kProduct, ScanFormat::kF16},
      {ScanOp::kProduct, ScanFormat::kI32}, {ScanOp::kProduct, ScanFormat::kU16},
  };
  const std::vector<ScanTileShape>& shapes = ScanTileShapes();
  std::vector<ScanKernelSpec> specs;
  for (const OpFormat& kind : kinds) {
    for (bool reverse : {false, true}) {
      for (bool exclusive : {false, true}) {
        ScanKernelSpec s;
        s.op = kind.op;
        s.format = kind.format;
        s.reverse = reverse;
        s.exclusive = exclusive;
        s.pass = ScanPass::kSerial;
        s.threads = kSerialThreads;
        s.per_thread = 1;
        specs.push_back(s);
        s.pass = ScanPass::kLine;
        for (size_t shape : {kLineShortTileShape, kLineLongTileShape}) {
          s.threads = shapes[shape].threads;
          s.per_thread = shapes[shape].per_thread;
          specs.push_back(s);
        }
        s.pass = ScanPass::kLookback;
        s.threads = shapes[LookbackTileShape(kind.format)].threads;
        s.per_thread = shapes[LookbackTileShape(kind.format)].per_thread;
        specs.push_back(s);
      }
    }
  }
  ScanKernelSpec clear;
  clear.pass = ScanPass::kClear;
  clear.threads = kClearThreads;
  specs.push_back(clear);
  for (ScanFormat f : {ScanFormat::kF16, ScanFormat::kU16}) {
    ScanKernelSpec s;
    s.pass = ScanPass::kPack16;
    s.format = f;
    s.threads = kPackThreads;
    specs.push_back(s);
  }
  return specs;
}

}  // namespace dmlserve::d3d12

#include <cstdint>

#include "kernels/d3d12/shaders/kernel_assembler.h"
#include "kernels/d3d12/shaders/scan_codegen.h"
#include "kernels/d3d12/shaders/scan_kernels.h"

// The tiled scan passes, `line` and `lookback` (scan_kernels.h): a group
// scans one tile of a line in groupshared memory; with the look-back, tiles
// of one line chain their carries through u1 (the decoupled look-back).

namespace dmlserve::d3d12 {
namespace {

using dxbc::Operand;

// What the look-back needs from the tile pass around it (BuildTiledScan).
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

}  // namespace

// line / lookback: see the header.
void BuildTiledScan(KernelAssembler& a, const ScanKernelSpec& spec) {
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

}  // namespace dmlserve::d3d12

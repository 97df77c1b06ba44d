#include <cstdint>
#include <string>
#include <vector>

#include "kernels/d3d12/shaders/kernel_assembler.h"
#include "kernels/d3d12/shaders/quantized_matmul_epilogue.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

// qmm.gemm (quantized_matmul_kernels.h has the layouts and the blocking).

namespace dmlserve::d3d12 {
namespace {

using dxbc::Operand;
using Spec = QuantizedMatMulKernelSpec;

constexpr uint32_t kGroupThreads = Spec::kThreadsX * Spec::kThreadsY;
// Groupshared memory: two buffers (double buffering), each the centred int32
// values of one K step, A then B, as [k][row] and [k][column]:
//   buffer + k * kLineBytes + row * 4           (A)
//   buffer + kBBytes + k * kLineBytes + col * 4 (B)
constexpr uint32_t kLineBytes = Spec::tile_m() * 4;
constexpr uint32_t kBBytes = Spec::kStepValues * kLineBytes;
constexpr uint32_t kBufferBytes = 2 * kBBytes;
constexpr uint32_t kSharedBytes = 2 * kBufferBytes;  // 32 KiB: D3D12's groupshared limit
// A thread's rows are two runs of 4 (16 bytes each), half a tile apart.
constexpr uint32_t kHalfTileBytes = Spec::tile_m() / 2 * 4;
// Every thread stages half a row of A and half a column of B per step.
constexpr uint32_t kStagedWords = Spec::kStepWords / 2;
static_assert(Spec::tile_m() == Spec::tile_n(), "A and B share the staging layout");
static_assert(2 * Spec::tile_m() == kGroupThreads, "two threads stage each row and column");
static_assert(Spec::kMicroM == 8 && Spec::kMicroN == 8, "two vec4 runs per micro-tile side");
static_assert(kSharedBytes <= 32768, "D3D12 allows 32 KiB of groupshared memory");

Operand C(int i) { return KernelAssembler::Constant(i); }

class GemmBuilder {
 public:
  GemmBuilder(KernelAssembler& a, const Spec& spec) : a_(a), spec_(spec) {}

  void Build() {
    using A = KernelAssembler;
    a_.DeclareBindings(/*srvs=*/4, /*uavs=*/1);
    a_.dcl_input(A::vThreadGroupID().xy());
    a_.dcl_input(A::vThreadIDInGroup().xy());
    a_.dcl_input(A::vThreadIDInGroupFlattened());
    a_.dcl_tgsm_raw(0, kSharedBytes);
    a_.dcl_thread_group(Spec::kThreadsX, Spec::kThreadsY, 1);

    const Operand group = a_.Scalar();
    a_.LinearGroupIndex(group);
    a_.IfUnsignedLess(group, C(kConstGroupCount));
    LocateTile(group);
    PrepareStaging();
    Accumulate();
    if (spec_.output == QmmOutput::kInt32Partial) {
      StorePartials();
    } else {
      Requantize();
    }
    a_.endif();
    a_.ret();
  }

 private:
  bool partial() const { return spec_.output == QmmOutput::kInt32Partial; }

  // Which slice (or split) and 128 x 128 block this group computes, and
  // where its rows of A and columns of B start.
  void LocateTile(const Operand& group) {
    using A = KernelAssembler;
    const Operand outer = a_.Scalar(), rest = a_.Scalar();
    const Operand tile_m = a_.Scalar(), tile_n = a_.Scalar();
    a_.udiv(outer, rest, group, C(kQmmConstTilesPerSlice));
    a_.udiv(tile_m, tile_n, rest, C(kQmmConstTilesN));
    slice_ = a_.Scalar();
    first_quad_ = a_.Scalar();
    end_quad_ = a_.Scalar();
    const Operand a_slice = a_.Scalar(), b_slice = a_.Scalar();
    if (partial()) {
      // One slice; the outer index is the split.
      a_.mov(slice_, A::l(0));
      a_.mov(a_slice, A::l(0));
      a_.mov(b_slice, A::l(0));
      split_ = outer;
      a_.imul(first_quad_, split_, C(kQmmConstSplitQuads));
      a_.iadd(end_quad_, first_quad_, C(kQmmConstSplitQuads));
      a_.umin(end_quad_, end_quad_, C(kQmmConstDepthQuads));
    } else {
      a_.mov(slice_, outer);
      const Operand batch = a_.Scalar(), channel = a_.Scalar(), t = a_.Scalar();
      a_.udiv(batch, channel, slice_, C(kQmmConstChannels));
      a_.imul(t, channel, C(kQmmConstAChannelStride));
      a_.imad(a_slice, batch, C(kQmmConstABatchStride), t);
      a_.imul(t, channel, C(kQmmConstBChannelStride));
      a_.imad(b_slice, batch, C(kQmmConstBBatchStride), t);
      a_.mov(first_quad_, A::l(0));
      a_.mov(end_quad_, C(kQmmConstDepthQuads));
    }
    m0_ = a_.Scalar();
    n0_ = a_.Scalar();
    a_.imul(m0_, tile_m, A::l(Spec::tile_m()));
    a_.imul(n0_, tile_n, A::l(Spec::tile_n()));
    a_row0_ = a_.Scalar();
    b_slice_ = b_slice;
    a_.imad(a_row0_, a_slice, C(kQmmConstRows), m0_);
  }

  // Each thread stages, every step, words h*2 and h*2+1 of the step's quad
  // of A row r and of B column r (r = flat % 128, h = flat / 128). Rows and
  // columns past the matrix are clamped to its last one: their loads stay
  // inside the buffer (root descriptors are not bounds-checked) and the
  // values only reach outputs that are never stored.
  void PrepareStaging() {
    using A = KernelAssembler;
    const Operand f = A::vThreadIDInGroupFlattened().x();
    const Operand r = a_.Scalar(), h = a_.Scalar(), last = a_.Scalar();
    a_.and_(r, f, A::l(Spec::tile_m() - 1));
    a_.ushr(h, f, A::l(7));
    static_assert(Spec::tile_m() == 128, "h = flat >> 7");
    // A row: min(r, M - m0 - 1).
    const Operand a_r = a_.Scalar(), b_r = a_.Scalar();
    a_.iadd(last, C(kQmmConstRows), -m0_);
    a_.iadd(last, last, A::l(-1));
    a_.umin(a_r, r, last);
    a_.iadd(last, C(kQmmConstColumns), -n0_);
    a_.iadd(last, last, A::l(-1));
    a_.umin(b_r, r, last);

    // Zero points: the A row's from its row parameters, the B column's from
    // the column parameters.
    a_zp_ = a_.Scalar();
    b_zp_ = a_.Scalar();
    const Operand address = a_.Scalar(), params = KernelAssembler::r(a_.NewTemp());
    a_.imad(address, slice_, C(kQmmConstRows), m0_);
    a_.iadd(address, address, a_r);
    a_.imul(address, address, C(kQmmConstRowParamBytes));
    a_.iadd(address, address, A::l(8));
    a_.ld_raw(params.x(), address, A::t(2));
    a_.mov(a_zp_, params.x());
    a_.iadd(address, n0_, b_r);
    a_.imad(address, address, A::l(8), A::l(4));
    a_.ld_raw(params.x(), address, A::t(3));
    a_.mov(b_zp_, params.x());

    // A rows are K4 = ceil(K/4) words (A is uploaded as it is when K % 4 is
    // 0), so a step's words may run past the row: word indices are clamped
    // to the row's last word, and the values past K masked to 0 when staged.
    //   A: row base (a_row0 + a_r) * K4 * 4, word index q * 4 + h * 2 (+1)
    //   B: ((b_slice * KQ + q) * N + n0 + b_r) * 16 + h * 8
    a_row_base_ = a_.Scalar();
    a_word_ = a_.Scalar();
    a_last_word_ = a_.Scalar();
    a_.iadd(a_last_word_, C(kQmmConstDepth), A::l(3));
    a_.ushr(a_last_word_, a_last_word_, A::l(2));
    a_.iadd(a_row_base_, a_row0_, a_r);
    a_.imul(a_row_base_, a_row_base_, a_last_word_);
    a_.ishl(a_row_base_, a_row_base_, A::l(2));
    a_.iadd(a_last_word_, a_last_word_, A::l(-1));
    a_.ishl(a_word_, first_quad_, A::l(2));
    a_.imad(a_word_, h, A::l(2), a_word_);
    b_address_ = a_.Scalar();
    b_step_ = a_.Scalar();
    a_.imad(b_address_, b_slice_, C(kQmmConstDepthQuads), first_quad_);
    a_.imul(b_address_, b_address_, C(kQmmConstColumns));
    a_.iadd(b_address_, b_address_, n0_);
    a_.iadd(b_address_, b_address_, b_r);
    a_.ishl(b_address_, b_address_, A::l(4));
    a_.imad(b_address_, h, A::l(8), b_address_);
    a_.ishl(b_step_, C(kQmmConstColumns), A::l(4));

    // Groupshared byte address of this thread's first staged value (k = h*8)
    // in buffer 0: A at k * kLineBytes + r * 4, B kBBytes further.
    store_base_ = a_.Scalar();
    a_.imul(store_base_, h, A::l(kStagedWords * 4 * kLineBytes));
    a_.imad(store_base_, r, A::l(4), store_base_);
  }

  // Loads this step's words into a_words_ / b_words_, sets a_mask_ (which
  // of the 8 A values lie before K) and advances.
  void LoadStep() {
    using A = KernelAssembler;
    const Operand word = a_.Scalar(), address = a_.Scalar(), k = a_.Scalar();
    for (uint32_t w = 0; w < kStagedWords; ++w) {
      a_.iadd(word, a_word_, A::l(w));
      a_.umin(word, word, a_last_word_);
      a_.imad(address, word, A::l(4), a_row_base_);
      a_.ld_raw(a_words_.sel(w == 0 ? "x" : "y"), address, A::t(0));
    }
    a_.ld_raw(b_words_.xy(), b_address_, A::t(1));
    a_.ishl(k, a_word_, A::l(2));
    for (uint32_t w = 0; w < kStagedWords; ++w) {
      const Operand mask = a_mask_[w];
      const int32_t k0 = static_cast<int32_t>(4 * w);
      a_.iadd(mask, k.sel("xxxx"), A::l(k0, k0 + 1, k0 + 2, k0 + 3));
      a_.ult(mask, mask, C(kQmmConstDepth));
    }
    a_.iadd(a_word_, a_word_, A::l(Spec::kStepWords));
    a_.iadd(b_address_, b_address_, b_step_);
  }

  // Extracts the 8 values of `words`, centres them on `zp` and stores them in
  // groupshared memory at `base` + k * kLineBytes, k = 0..7.
  void StoreCentred(const Operand& words, bool is_signed, const Operand& zp, const Operand* mask,
                    const Operand& base) {
    using A = KernelAssembler;
    const Operand address = a_.Scalar();
    for (uint32_t w = 0; w < kStagedWords; ++w) {
      const Operand word = words.sel(w == 0 ? "xxxx" : "yyyy");
      if (is_signed) {
        a_.ibfe(values_, A::l(8, 8, 8, 8), A::l(0, 8, 16, 24), word);
      } else {
        a_.ubfe(values_, A::l(8, 8, 8, 8), A::l(0, 8, 16, 24), word);
      }
      a_.iadd(values_, values_, -zp.sel("xxxx"));
      if (mask != nullptr) a_.and_(values_, values_, mask[w]);
      for (uint32_t byte = 0; byte < 4; ++byte) {
        const uint32_t k = w * 4 + byte;
        if (k == 0) {
          a_.store_raw(A::g(0).x(), base, values_.x());
          continue;
        }
        a_.iadd(address, base, A::l(k * kLineBytes));
        a_.store_raw(A::g(0).x(), address, values_.sel(std::string(1, "xyzw"[byte])));
      }
    }
  }

  // Stages the loaded words into the buffer at byte offset `buffer`.
  void StoreStep(const Operand& buffer) {
    using A = KernelAssembler;
    const Operand a_base = a_.Scalar(), b_base = a_.Scalar();
    a_.iadd(a_base, store_base_, buffer);
    a_.iadd(b_base, a_base, A::l(kBBytes));
    // B's padding holds its zero point (the planner packs it): no mask.
    StoreCentred(a_words_, spec_.a_signed, a_zp_, a_mask_, a_base);
    StoreCentred(b_words_, spec_.b_signed, b_zp_, nullptr, b_base);
  }

  void Accumulate() {
    using A = KernelAssembler;
    for (Operand& acc : acc_) {
      acc = A::r(a_.NewTemp());
      a_.mov(acc, A::l(0, 0, 0, 0));
    }
    a_words_ = A::r(a_.NewTemp());
    b_words_ = A::r(a_.NewTemp());
    for (Operand& mask : a_mask_) mask = A::r(a_.NewTemp());
    values_ = A::r(a_.NewTemp());
    const Operand a_values[2] = {A::r(a_.NewTemp()), A::r(a_.NewTemp())};
    const Operand b_values[2] = {A::r(a_.NewTemp()), A::r(a_.NewTemp())};
    // This thread's rows start at byte ty * 16 of a line, its columns at
    // kBBytes + tx * 16.
    const Operand a_thread = a_.Scalar(), b_thread = a_.Scalar();
    const Operand a_read = a_.Scalar(), b_read = a_.Scalar(), address = a_.Scalar();
    const Operand buffer = a_.Scalar(), next = a_.Scalar(), quad = a_.Scalar();
    const Operand more = a_.Scalar();
    a_.ishl(a_thread, A::vThreadIDInGroup().y(), A::l(4));
    a_.imad(b_thread, A::vThreadIDInGroup().x(), A::l(16), A::l(kBBytes));

    // Prologue: the first step into buffer 0 (a split-K group may have no
    // step: K quads past the end of K are not loaded).
    a_.mov(buffer, A::l(0));
    a_.IfUnsignedLess(first_quad_, end_quad_);
    LoadStep();
    StoreStep(buffer);
    a_.endif();
    a_.sync_g_t();

    a_.mov(quad, first_quad_);
    a_.LoopWhileUnsignedLess(quad, end_quad_);
    // Next step's loads are issued before this step's multiply-adds, so
    // their latency hides behind them; they land in the other buffer after.
    a_.iadd(quad, quad, A::l(1));
    a_.ult(more, quad, end_quad_);
    a_.if_nz(more);
    LoadStep();
    a_.endif();
    a_.iadd(a_read, a_thread, buffer);
    a_.iadd(b_read, b_thread, buffer);
    for (uint32_t k = 0; k < Spec::kStepValues; ++k) {
      for (uint32_t half = 0; half < 2; ++half) {
        a_.iadd(address, a_read, A::l(k * kLineBytes + half * kHalfTileBytes));
        a_.ld_raw(a_values[half], address, A::g(0));
        a_.iadd(address, b_read, A::l(k * kLineBytes + half * kHalfTileBytes));
        a_.ld_raw(b_values[half], address, A::g(0));
      }
      for (uint32_t i = 0; i < Spec::kMicroM; ++i) {
        const Operand a_value = a_values[i / 4].sel(std::string(1, "xyzw"[i % 4]));
        for (uint32_t half = 0; half < 2; ++half) {
          Operand& acc = acc_[2 * i + half];
          a_.imad(acc, a_value, b_values[half], acc);
        }
      }
    }
    a_.xor_(next, buffer, A::l(kBufferBytes));
    a_.if_nz(more);
    StoreStep(next);
    a_.endif();
    a_.mov(buffer, next);
    // One barrier per step: it orders this step's reads of `buffer` before
    // the next step's stores into it, and the stores into `next` before the
    // next step's reads of it.
    a_.sync_g_t();
    a_.endloop();
  }

  // Row i of this thread (0..7): m0 + ty * 4 + i (i < 4), m0 + 64 + ty * 4 + i - 4.
  void RowOf(const Operand& row, uint32_t i) {
    using A = KernelAssembler;
    a_.imad(row, A::vThreadIDInGroup().y(), A::l(4), m0_);
    a_.iadd(row, row, A::l((i / 4) * (Spec::tile_m() / 2) + i % 4));
  }

  // Output word of column half `half`: n0 / 4 + tx (+ 16).
  void WordOf(const Operand& word, uint32_t half) {
    using A = KernelAssembler;
    a_.ushr(word, n0_, A::l(2));
    a_.iadd(word, word, A::vThreadIDInGroup().x());
    a_.iadd(word, word, A::l(half * Spec::tile_n() / 8));
  }

  void Requantize() {
    using A = KernelAssembler;
    const bool output_signed = spec_.output == QmmOutput::kInt8;
    Operand b_scale[2], word[2], word_ok[2];
    for (uint32_t half = 0; half < 2; ++half) {
      b_scale[half] = A::r(a_.NewTemp());
      word[half] = a_.Scalar();
      word_ok[half] = a_.Scalar();
      WordOf(word[half], half);
      const Operand column0 = a_.Scalar();
      a_.ishl(column0, word[half], A::l(2));
      EmitColumnScales(a_, column0, b_scale[half]);
      a_.ult(word_ok[half], word[half], C(kQmmConstOutputWords));
    }
    const Operand row = a_.Scalar(), out_row = a_.Scalar();
    const Operand address = a_.Scalar(), params = A::r(a_.NewTemp());
    for (uint32_t i = 0; i < Spec::kMicroM; ++i) {
      RowOf(row, i);
      a_.IfUnsignedLess(row, C(kQmmConstRows));
      a_.imad(out_row, slice_, C(kQmmConstRows), row);
      a_.imul(address, out_row, C(kQmmConstRowParamBytes));
      a_.ld_raw(params, address, A::t(2));  // a_scale, output_scale, a_zp, output_zp
      for (uint32_t half = 0; half < 2; ++half) {
        a_.if_nz(word_ok[half]);
        a_.imad(address, out_row, C(kQmmConstOutputWords), word[half]);
        a_.ishl(address, address, A::l(2));
        EmitRequantizeWord(a_, acc_[2 * i + half], params, b_scale[half], output_signed, address);
        a_.endif();
      }
      a_.endif();
    }
  }

  // Split-K: the raw int32 sums, at ((split * M + row) * N4 + word) * 16.
  void StorePartials() {
    using A = KernelAssembler;
    Operand word[2], word_ok[2];
    for (uint32_t half = 0; half < 2; ++half) {
      word[half] = a_.Scalar();
      word_ok[half] = a_.Scalar();
      WordOf(word[half], half);
      a_.ult(word_ok[half], word[half], C(kQmmConstOutputWords));
    }
    const Operand row = a_.Scalar(), address = a_.Scalar();
    for (uint32_t i = 0; i < Spec::kMicroM; ++i) {
      RowOf(row, i);
      a_.IfUnsignedLess(row, C(kQmmConstRows));
      for (uint32_t half = 0; half < 2; ++half) {
        a_.if_nz(word_ok[half]);
        a_.imad(address, split_, C(kQmmConstRows), row);
        a_.imad(address, address, C(kQmmConstOutputWords), word[half]);
        a_.ishl(address, address, A::l(4));
        a_.store_raw(A::u(0).xyzw(), address, acc_[2 * i + half]);
        a_.endif();
      }
      a_.endif();
    }
  }

  KernelAssembler& a_;
  const Spec& spec_;
  Operand slice_, split_, first_quad_, end_quad_, m0_, n0_, a_row0_, b_slice_;
  Operand a_zp_, b_zp_, a_row_base_, a_word_, a_last_word_, b_address_, b_step_, store_base_;
  Operand a_words_, b_words_, values_;
  Operand a_mask_[kStagedWords];
  Operand acc_[2 * Spec::kMicroM];
};

}  // namespace

absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulKernel(
    const QuantizedMatMulKernelSpec& spec) {
  KernelAssembler a;
  GemmBuilder(a, spec).Build();
  return FinishKernel(a, spec.Key());
}

}  // namespace dmlserve::d3d12

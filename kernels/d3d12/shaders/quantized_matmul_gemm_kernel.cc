#include <cstdint>
#include <string>
#include <vector>

#include "kernels/d3d12/shaders/kernel_assembler.h"
#include "kernels/d3d12/shaders/quantized_matmul_epilogue.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

// qmm.gemm (quantized_matmul_kernels.h has the layouts and the blocking).
//
// Groupshared memory is structured (g0): per buffer (two, double-buffered)
// 16 structures for A, one per thread row ty, then 16 for B, one per thread
// column tx. Structure s of A holds, for the step's 8 k, the 8 centred values
// of rows ty*4+{0..3} and 64+ty*4+{0..3}: value (k, slot) at byte k*32 +
// slot*4. So a thread reads its 8 values of k with two ld_structured whose
// offsets are immediates (k*32, k*32+16): the K loop spends no instruction on
// groupshared addresses. Structures are 272 bytes (16 of padding), so the 8
// threads of a quarter-warp reading 8 B structures hit 8 disjoint bank
// groups; A reads are broadcasts (a warp spans two thread rows).

namespace dmlserve::d3d12 {
namespace {

using dxbc::Operand;
using Spec = QuantizedMatMulKernelSpec;

constexpr uint32_t kGroupThreads = Spec::kThreadsX * Spec::kThreadsY;
constexpr uint32_t kStructBytes = Spec::kStepValues * Spec::kMicroM * 4 + 16;
constexpr uint32_t kStructsPerMatrix = 16;
constexpr uint32_t kStructsPerBuffer = 2 * kStructsPerMatrix;
constexpr uint32_t kStructs = 2 * kStructsPerBuffer;
// fp32 accumulators are flushed into the int32 ones every this many steps:
// 256 products of centred values (|a - a_zp|, |b - b_zp| <= 255) sum to at
// most 256 * 65025 < 2^24, so every partial sum is an exact float.
constexpr uint32_t kStepsPerFlush = 256 / Spec::kStepValues;
static_assert(Spec::tile_m() == Spec::tile_n(), "A and B share the staging layout");
static_assert(Spec::tile_m() == kGroupThreads / 2, "two threads stage each row and column");
static_assert(Spec::kStepWords == 2, "a thread stages one word of A and one of B a step");
static_assert(Spec::kMicroM == 8 && Spec::kMicroN == 8, "two vec4 runs per micro-tile side");
static_assert(kStructBytes * kStructs <= 32768, "D3D12 allows 32 KiB of groupshared memory");

Operand C(int i) { return KernelAssembler::Constant(i); }
std::string Component(uint32_t i) { return std::string(1, "xyzw"[i]); }

class GemmBuilder {
 public:
  GemmBuilder(KernelAssembler& a, const Spec& spec) : a_(a), spec_(spec) {}

  void Build() {
    using A = KernelAssembler;
    a_.DeclareBindings(/*srvs=*/4, /*uavs=*/1);
    a_.dcl_input(A::vThreadGroupID().xy());
    a_.dcl_input(A::vThreadIDInGroup().xy());
    a_.dcl_input(A::vThreadIDInGroupFlattened());
    a_.dcl_tgsm_structured(0, kStructBytes, kStructs);
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
  bool fp32() const { return spec_.accumulate == QmmAccumulate::kFloat32; }

  // Which slice (or split) and 128 x 128 block this group computes, and
  // where its rows of A and columns of B start.
  void LocateTile(const Operand& group) {
    using A = KernelAssembler;
    const Operand outer = a_.Scalar(), rest = a_.Scalar();
    const Operand tile_m = a_.Scalar(), tile_n = a_.Scalar();
    a_.udiv(outer, rest, group, C(kQmmConstTilesPerSlice));
    a_.udiv(tile_m, tile_n, rest, C(kQmmConstTilesN));
    slice_ = a_.Scalar();
    first_step_ = a_.Scalar();
    end_step_ = a_.Scalar();
    const Operand a_slice = a_.Scalar(), b_slice = a_.Scalar();
    if (partial()) {
      // One slice; the outer index is the split.
      a_.mov(slice_, A::l(0));
      a_.mov(a_slice, A::l(0));
      a_.mov(b_slice, A::l(0));
      split_ = outer;
      a_.imul(first_step_, split_, C(kQmmConstSplitOcts));
      a_.iadd(end_step_, first_step_, C(kQmmConstSplitOcts));
      a_.umin(end_step_, end_step_, C(kQmmConstDepthOcts));
    } else {
      a_.mov(slice_, outer);
      const Operand batch = a_.Scalar(), channel = a_.Scalar(), t = a_.Scalar();
      a_.udiv(batch, channel, slice_, C(kQmmConstChannels));
      a_.imul(t, channel, C(kQmmConstAChannelStride));
      a_.imad(a_slice, batch, C(kQmmConstABatchStride), t);
      a_.imul(t, channel, C(kQmmConstBChannelStride));
      a_.imad(b_slice, batch, C(kQmmConstBBatchStride), t);
      a_.mov(first_step_, A::l(0));
      a_.mov(end_step_, C(kQmmConstDepthOcts));
    }
    m0_ = a_.Scalar();
    n0_ = a_.Scalar();
    a_.imul(m0_, tile_m, A::l(Spec::tile_m()));
    a_.imul(n0_, tile_n, A::l(Spec::tile_n()));
    a_row0_ = a_.Scalar();
    b_slice_ = b_slice;
    a_.imad(a_row0_, a_slice, C(kQmmConstRows), m0_);
  }

  // Each thread stages, every step (8 k), word h of A row r and of B column
  // r (r = flat % 128, h = flat / 128). Rows and columns past the matrix are
  // clamped to its last one: their loads stay inside the buffer (root
  // descriptors are not bounds-checked) and their values only reach outputs
  // that are never stored.
  void PrepareStaging() {
    using A = KernelAssembler;
    const Operand f = A::vThreadIDInGroupFlattened().x();
    const Operand r = a_.Scalar(), h = a_.Scalar(), last = a_.Scalar();
    a_.and_(r, f, A::l(Spec::tile_m() - 1));
    a_.ushr(h, f, A::l(7));
    static_assert(Spec::tile_m() == 128, "h = flat >> 7");
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
    const Operand address = a_.Scalar(), params = A::r(a_.NewTemp());
    a_.imad(address, slice_, C(kQmmConstRows), m0_);
    a_.iadd(address, address, a_r);
    a_.imul(address, address, C(kQmmConstRowParamBytes));
    a_.iadd(address, address, A::l(8));
    a_.ld_raw(params.x(), address, A::t(2));
    a_.mov(a_zp_, params.x());
    a_.iadd(address, n0_, b_r);
    a_.imad(address, address, C(kQmmConstColumnParamBytes), A::l(4));
    a_.ld_raw(params.x(), address, A::t(3));
    a_.mov(b_zp_, params.x());

    // A rows are K4 = ceil(K/4) words (A is uploaded as it is when K % 4 is
    // 0). Unmasked kernels (K % 8 == 0) never step past a row; masked ones
    // clamp the word index to the row's last word and mask values past K.
    //   A: row base (a_row0 + a_r) * K4 * 4, word index step * 2 + h
    //   B (octs, [KO][N][8 bytes]): ((b_slice * KO + step) * N + n0 + b_r) * 8 + h * 4
    a_row_base_ = a_.Scalar();
    a_word_ = a_.Scalar();
    a_last_word_ = a_.Scalar();
    a_.iadd(a_last_word_, C(kQmmConstDepth), A::l(3));
    a_.ushr(a_last_word_, a_last_word_, A::l(2));
    a_.iadd(a_row_base_, a_row0_, a_r);
    a_.imul(a_row_base_, a_row_base_, a_last_word_);
    a_.ishl(a_row_base_, a_row_base_, A::l(2));
    a_.iadd(a_last_word_, a_last_word_, A::l(-1));
    a_.ishl(a_word_, first_step_, A::l(1));
    a_.iadd(a_word_, a_word_, h);
    b_address_ = a_.Scalar();
    b_step_ = a_.Scalar();
    a_.imad(b_address_, b_slice_, C(kQmmConstDepthOcts), first_step_);
    a_.imul(b_address_, b_address_, C(kQmmConstColumns));
    a_.iadd(b_address_, b_address_, n0_);
    a_.iadd(b_address_, b_address_, b_r);
    a_.ishl(b_address_, b_address_, A::l(3));
    a_.imad(b_address_, h, A::l(4), b_address_);
    a_.ishl(b_step_, C(kQmmConstColumns), A::l(3));

    // Where this thread's staged values go in buffer 0: the structure of
    // row r (A) / column r (B), slot (r / 64) * 4 + r % 4, k = h * 4 + byte.
    a_store_struct_ = a_.Scalar();
    b_store_struct_ = a_.Scalar();
    store_offset_ = a_.Scalar();
    const Operand slot = a_.Scalar(), t = a_.Scalar();
    a_.ushr(a_store_struct_, r, A::l(2));
    a_.and_(a_store_struct_, a_store_struct_, A::l(kStructsPerMatrix - 1));
    a_.iadd(b_store_struct_, a_store_struct_, A::l(kStructsPerMatrix));
    a_.ushr(slot, r, A::l(6));
    a_.and_(t, r, A::l(3));
    a_.imad(slot, slot, A::l(4), t);
    a_.ishl(slot, slot, A::l(2));
    a_.imad(store_offset_, h, A::l(4 * Spec::kMicroM * 4), slot);
  }

  // Loads this step's word of A and of B (and, when masked, which of the
  // 4 A values lie before K), and advances.
  void LoadStep() {
    using A = KernelAssembler;
    const Operand address = a_.Scalar();
    if (spec_.masked) {
      const Operand word = a_.Scalar();
      a_.umin(word, a_word_, a_last_word_);
      a_.imad(address, word, A::l(4), a_row_base_);
      a_.ishl(a_mask_.x(), a_word_, A::l(2));
      a_.iadd(a_mask_, a_mask_.sel("xxxx"), A::l(0, 1, 2, 3));
      a_.ult(a_mask_, a_mask_, C(kQmmConstDepth));
    } else {
      a_.imad(address, a_word_, A::l(4), a_row_base_);
    }
    a_.ld_raw(a_word_loaded_.x(), address, A::t(0));
    a_.ld_raw(b_word_loaded_.x(), b_address_, A::t(1));
    a_.iadd(a_word_, a_word_, A::l(Spec::kStepWords));
    a_.iadd(b_address_, b_address_, b_step_);
  }

  // Extracts the 4 values of `word`, centres them on `zp` (masking them when
  // `mask`), converts them for fp32 accumulation and stores them in
  // structure `index` at store_offset_ + byte * 32.
  void StoreCentred(const Operand& word, bool is_signed, const Operand& zp, bool mask,
                    const Operand& index) {
    using A = KernelAssembler;
    if (is_signed) {
      a_.ibfe(values_, A::l(8, 8, 8, 8), A::l(0, 8, 16, 24), word.sel("xxxx"));
    } else {
      a_.ubfe(values_, A::l(8, 8, 8, 8), A::l(0, 8, 16, 24), word.sel("xxxx"));
    }
    a_.iadd(values_, values_, -zp.sel("xxxx"));
    if (mask) a_.and_(values_, values_, a_mask_);
    if (fp32()) a_.itof(values_, values_);
    const Operand offset = a_.Scalar();
    for (uint32_t byte = 0; byte < 4; ++byte) {
      if (byte == 0) {
        a_.store_structured(A::g(0).x(), index, store_offset_, values_.x());
        continue;
      }
      a_.iadd(offset, store_offset_, A::l(byte * Spec::kMicroM * 4));
      a_.store_structured(A::g(0).x(), index, offset, values_.sel(Component(byte)));
    }
  }

  // Stages the loaded words into the buffer whose first structure is
  // `buffer_struct`.
  void StoreStep(const Operand& buffer_struct) {
    const Operand a_index = a_.Scalar(), b_index = a_.Scalar();
    a_.iadd(a_index, a_store_struct_, buffer_struct);
    a_.iadd(b_index, b_store_struct_, buffer_struct);
    StoreCentred(a_word_loaded_, spec_.a_signed, a_zp_, spec_.masked, a_index);
    // B's padding holds its zero point (the planner packs it): no mask.
    StoreCentred(b_word_loaded_, spec_.b_signed, b_zp_, false, b_index);
  }

  void Accumulate() {
    using A = KernelAssembler;
    for (Operand& acc : acc_) {
      acc = A::r(a_.NewTemp());
      a_.mov(acc, A::l(0, 0, 0, 0));
    }
    if (fp32()) {
      for (Operand& acc : facc_) {
        acc = A::r(a_.NewTemp());
        a_.mov(acc, A::lf(0.0f, 0.0f, 0.0f, 0.0f));
      }
    }
    a_word_loaded_ = A::r(a_.NewTemp());
    b_word_loaded_ = A::r(a_.NewTemp());
    values_ = A::r(a_.NewTemp());
    a_mask_ = A::r(a_.NewTemp());
    const Operand a_values[2] = {A::r(a_.NewTemp()), A::r(a_.NewTemp())};
    const Operand b_values[2] = {A::r(a_.NewTemp()), A::r(a_.NewTemp())};
    const Operand buffer = a_.Scalar(), next = a_.Scalar(), step = a_.Scalar();
    const Operand a_read = a_.Scalar(), b_read = a_.Scalar(), more = a_.Scalar();
    const Operand block_end = a_.Scalar();

    // Prologue: the first step into buffer 0 (a split-K group may have no
    // step: K octs past the end of K are not loaded).
    a_.mov(buffer, A::l(0));
    a_.IfUnsignedLess(first_step_, end_step_);
    LoadStep();
    StoreStep(buffer);
    a_.endif();
    a_.sync_g_t();

    a_.mov(step, first_step_);
    // Blocks of kStepsPerFlush steps, so that fp32 sums stay exact; the
    // int32 kernel runs the same loops without the flush.
    a_.LoopWhileUnsignedLess(step, end_step_);
    a_.iadd(block_end, step, A::l(kStepsPerFlush));
    a_.umin(block_end, block_end, end_step_);
    a_.LoopWhileUnsignedLess(step, block_end);
    // The next step's loads go out before this step's multiply-adds, so
    // their latency hides behind them; they land in the other buffer after.
    a_.iadd(step, step, A::l(1));
    a_.ult(more, step, end_step_);
    a_.if_nz(more);
    LoadStep();
    a_.endif();
    a_.iadd(a_read, A::vThreadIDInGroup().y(), buffer);
    a_.iadd(b_read, A::vThreadIDInGroup().x(), buffer);
    a_.iadd(b_read, b_read, A::l(kStructsPerMatrix));
    for (uint32_t k = 0; k < Spec::kStepValues; ++k) {
      for (uint32_t half = 0; half < 2; ++half) {
        const uint32_t offset = k * Spec::kMicroM * 4 + half * 16;
        a_.ld_structured(a_values[half], a_read, A::l(offset), A::g(0));
        a_.ld_structured(b_values[half], b_read, A::l(offset), A::g(0));
      }
      for (uint32_t i = 0; i < Spec::kMicroM; ++i) {
        const Operand a_value = a_values[i / 4].sel(Component(i % 4));
        for (uint32_t half = 0; half < 2; ++half) {
          if (fp32()) {
            Operand& acc = facc_[2 * i + half];
            a_.mad(acc, a_value, b_values[half], acc);
          } else {
            Operand& acc = acc_[2 * i + half];
            a_.imad(acc, a_value, b_values[half], acc);
          }
        }
      }
    }
    a_.xor_(next, buffer, A::l(kStructsPerBuffer));
    a_.if_nz(more);
    StoreStep(next);
    a_.endif();
    a_.mov(buffer, next);
    // One barrier per step: it orders this step's reads of `buffer` before
    // the next step's stores into it, and the stores into `next` before the
    // next step's reads of it.
    a_.sync_g_t();
    a_.endloop();
    if (fp32()) {
      const Operand whole = A::r(a_.NewTemp());
      for (uint32_t i = 0; i < 2 * Spec::kMicroM; ++i) {
        a_.ftoi(whole, facc_[i]);
        a_.iadd(acc_[i], acc_[i], whole);
        a_.mov(facc_[i], A::lf(0.0f, 0.0f, 0.0f, 0.0f));
      }
    }
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
  Operand slice_, split_, first_step_, end_step_, m0_, n0_, a_row0_, b_slice_;
  Operand a_zp_, b_zp_, a_row_base_, a_word_, a_last_word_, b_address_, b_step_;
  Operand a_store_struct_, b_store_struct_, store_offset_;
  Operand a_word_loaded_, b_word_loaded_, values_, a_mask_;
  Operand acc_[2 * Spec::kMicroM];
  Operand facc_[2 * Spec::kMicroM];
};

}  // namespace

absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulKernel(
    const QuantizedMatMulKernelSpec& spec) {
  KernelAssembler a;
  GemmBuilder(a, spec).Build();
  return FinishKernel(a, spec.Key());
}

}  // namespace dmlserve::d3d12

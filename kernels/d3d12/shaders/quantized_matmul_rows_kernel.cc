#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/d3d12/shaders/kernel_assembler.h"
#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

// qmm.rows (quantized_matmul_kernels.h has the blocking; the layouts are
// qmm.gemm's).
//
// Constants: kQmmConstRows is M (every row of the one product),
// kQmmConstTilesN = ceil(N / 512), kQmmConstTilesPerSlice = ceil(M / R) *
// TilesN, kQmmConstSplitOcts the K octs per split; group g computes split
// g / TilesPerSlice. Partials: int32 at ((split * M + row) * N4 * 4 + column) * 4.

namespace dmlserve::d3d12 {
namespace {

using dxbc::Operand;
using Spec = QuantizedMatMulRowsSpec;

Operand C(int i) { return KernelAssembler::Constant(i); }
std::string Component(uint32_t i) { return std::string(1, "xyzw"[i]); }

class RowsBuilder {
 public:
  RowsBuilder(KernelAssembler& a, const Spec& spec)
      : a_(a), spec_(spec), row_stride_bytes_(spec.max_split_octs() * 32) {}

  void Build() {
    using A = KernelAssembler;
    a_.DeclareBindings(/*srvs=*/4, /*uavs=*/1);
    a_.dcl_input(A::vThreadGroupID().xy());
    a_.dcl_input(A::vThreadIDInGroupFlattened());
    a_.dcl_tgsm_raw(0, Spec::kSharedBytes);
    a_.dcl_thread_group(Spec::kThreads, 1, 1);

    const Operand group = a_.Scalar();
    a_.LinearGroupIndex(group);
    a_.IfUnsignedLess(group, C(kConstGroupCount));
    Locate(group);
    StageA();
    a_.sync_g_t();
    Accumulate();
    StorePartials();
    a_.endif();
    a_.ret();
  }

 private:
  void Locate(const Operand& group) {
    using A = KernelAssembler;
    const Operand rest = a_.Scalar(), tile_m = a_.Scalar(), tile_n = a_.Scalar();
    split_ = a_.Scalar();
    a_.udiv(split_, rest, group, C(kQmmConstTilesPerSlice));
    a_.udiv(tile_m, tile_n, rest, C(kQmmConstTilesN));
    m0_ = a_.Scalar();
    n0_ = a_.Scalar();
    a_.imul(m0_, tile_m, A::l(spec_.rows));
    a_.imul(n0_, tile_n, A::l(Spec::tile_n()));
    first_oct_ = a_.Scalar();
    octs_ = a_.Scalar();
    a_.imul(first_oct_, split_, C(kQmmConstSplitOcts));
    a_.iadd(octs_, first_oct_, C(kQmmConstSplitOcts));
    a_.umin(octs_, octs_, C(kQmmConstDepthOcts));
    a_.iadd(octs_, octs_, -first_oct_);
    last_row_ = a_.Scalar();
    a_.iadd(last_row_, C(kQmmConstRows), A::l(-1));
  }

  // Stages rows m0..m0+R-1 (clamped to the last row: the extra rows' sums
  // are never stored) of A over the split's K range, centred on each row's
  // zero point, values past K masked to 0, as [row][k] int32 at
  // row * row_stride_bytes_ + (k - first_k) * 4. Thread f stages words
  // f, f + 256, ... of the R * SplitOcts * 2.
  void StageA() {
    using A = KernelAssembler;
    const Operand f = A::vThreadIDInGroupFlattened().x();
    const Operand words = a_.Scalar(), split_words = a_.Scalar(), k4 = a_.Scalar();
    const Operand last_word = a_.Scalar(), first_word = a_.Scalar();
    a_.ishl(split_words, C(kQmmConstSplitOcts), A::l(1));
    a_.imul(words, split_words, A::l(spec_.rows));
    a_.iadd(k4, C(kQmmConstDepth), A::l(3));
    a_.ushr(k4, k4, A::l(2));
    a_.iadd(last_word, k4, A::l(-1));
    a_.ishl(first_word, first_oct_, A::l(1));

    const Operand i = a_.Scalar(), r = a_.Scalar(), w = a_.Scalar(), row = a_.Scalar();
    const Operand address = a_.Scalar(), zp = a_.Scalar(), word = a_.Scalar();
    const Operand values = A::r(a_.NewTemp()), mask = A::r(a_.NewTemp());
    a_.mov(i, f);
    a_.LoopWhileUnsignedLess(i, words);
    a_.udiv(r, w, i, split_words);
    a_.iadd(row, m0_, r);
    a_.umin(row, row, last_row_);
    a_.imul(address, row, C(kQmmConstRowParamBytes));
    a_.iadd(address, address, A::l(8));
    a_.ld_raw(zp, address, A::t(2));  // the row's a_zp
    a_.iadd(w, w, first_word);        // K word index
    a_.ishl(mask.x(), w, A::l(2));
    a_.iadd(mask, mask.sel("xxxx"), A::l(0, 1, 2, 3));
    a_.ult(mask, mask, C(kQmmConstDepth));
    a_.umin(word, w, last_word);
    a_.imad(address, row, k4, word);
    a_.ishl(address, address, A::l(2));
    a_.ld_raw(word, address, A::t(0));
    if (spec_.a_signed) {
      a_.ibfe(values, A::l(8, 8, 8, 8), A::l(0, 8, 16, 24), word.sel("xxxx"));
    } else {
      a_.ubfe(values, A::l(8, 8, 8, 8), A::l(0, 8, 16, 24), word.sel("xxxx"));
    }
    a_.iadd(values, values, -zp.sel("xxxx"));
    a_.and_(values, values, mask);
    // Groupshared: r * row_stride + (w - first_word) * 16.
    a_.iadd(w, w, -first_word);
    a_.ishl(w, w, A::l(4));
    a_.imad(address, r, A::l(row_stride_bytes_), w);
    a_.store_raw(A::g(0).xyzw(), address, values);
    a_.iadd(i, i, A::l(Spec::kThreads));
    a_.endloop();
  }

  void Accumulate() {
    using A = KernelAssembler;
    const Operand f = A::vThreadIDInGroupFlattened().x();
    // This thread's columns n0 + 2f and n0 + 2f + 1, clamped to the last
    // column for loads (their sums are not stored past N4 * 4).
    column0_ = a_.Scalar();
    a_.imad(column0_, f, A::l(Spec::kColumnsPerThread), n0_);
    const Operand last_column = a_.Scalar(), column = a_.Scalar(), address = a_.Scalar();
    a_.iadd(last_column, C(kQmmConstColumns), A::l(-1));
    Operand b_address[Spec::kColumnsPerThread], b_zp[Spec::kColumnsPerThread];
    const Operand b_step = a_.Scalar();
    a_.ishl(b_step, C(kQmmConstColumns), A::l(3));
    for (uint32_t c = 0; c < Spec::kColumnsPerThread; ++c) {
      b_address[c] = a_.Scalar();
      b_zp[c] = a_.Scalar();
      a_.iadd(column, column0_, A::l(c));
      a_.umin(column, column, last_column);
      a_.imad(address, column, C(kQmmConstColumnParamBytes), A::l(4));
      a_.ld_raw(b_zp[c], address, A::t(3));
      // ((first_oct * N) + column) * 8
      a_.imad(b_address[c], first_oct_, C(kQmmConstColumns), column);
      a_.ishl(b_address[c], b_address[c], A::l(3));
    }

    for (uint32_t r = 0; r < spec_.rows; ++r) {
      acc_.push_back(A::r(a_.NewTemp()));
      a_.mov(acc_.back(), A::l(0, 0, 0, 0));
    }
    // B is streamed once (each byte feeds R rows at most): what bounds a
    // GEMV is how many bytes each thread has in flight. The K loop loads
    // octs_in_flight() octs of both columns before it uses any; fewer left
    // than that are taken in blocks of half, a quarter, ... as many.
    const uint32_t in_flight = spec_.octs_in_flight();
    std::vector<std::array<Operand, Spec::kColumnsPerThread>> b_words(in_flight);
    for (auto& octs : b_words) {
      for (Operand& w : octs) w = A::r(a_.NewTemp());
    }
    Operand b_values[Spec::kColumnsPerThread][2];
    for (auto& column : b_values) {
      for (Operand& v : column) v = A::r(a_.NewTemp());
    }
    Operand a_values[2];
    for (Operand& v : a_values) v = A::r(a_.NewTemp());
    const Operand oct = a_.Scalar(), a_read = a_.Scalar(), next = a_.Scalar();
    a_.mov(oct, A::l(0));
    a_.mov(a_read, A::l(0));
    auto block = [&](uint32_t octs_in_block) {
      for (uint32_t q = 0; q < octs_in_block; ++q) {
        for (uint32_t c = 0; c < Spec::kColumnsPerThread; ++c) {
          a_.ld_raw(b_words[q][c].xy(), b_address[c], A::t(1));
          a_.iadd(b_address[c], b_address[c], b_step);
        }
      }
      for (uint32_t q = 0; q < octs_in_block; ++q) {
        for (uint32_t c = 0; c < Spec::kColumnsPerThread; ++c) {
          for (uint32_t j = 0; j < 2; ++j) {
            const Operand word = b_words[q][c].sel(std::string(4, "xyzw"[j]));
            if (spec_.b_signed) {
              a_.ibfe(b_values[c][j], A::l(8, 8, 8, 8), A::l(0, 8, 16, 24), word);
            } else {
              a_.ubfe(b_values[c][j], A::l(8, 8, 8, 8), A::l(0, 8, 16, 24), word);
            }
            a_.iadd(b_values[c][j], b_values[c][j], -b_zp[c].sel("xxxx"));
          }
        }
        for (uint32_t r = 0; r < spec_.rows; ++r) {
          for (uint32_t j = 0; j < 2; ++j) {
            a_.iadd(address, a_read, A::l(r * row_stride_bytes_ + q * 32 + j * 16));
            a_.ld_raw(a_values[j], address, A::g(0));
          }
          for (uint32_t c = 0; c < Spec::kColumnsPerThread; ++c) {
            const Operand sum = acc_[r].sel(Component(c));
            for (uint32_t j = 0; j < 2; ++j) {
              for (uint32_t v = 0; v < 4; ++v) {
                a_.imad(sum, a_values[j].sel(Component(v)), b_values[c][j].sel(Component(v)), sum);
              }
            }
          }
        }
      }
      a_.iadd(a_read, a_read, A::l(32 * octs_in_block));
      a_.iadd(oct, oct, A::l(octs_in_block));
    };
    if (in_flight == 1) {
      a_.LoopWhileUnsignedLess(oct, octs_);
      block(1);
      a_.endloop();
      return;
    }
    a_.loop();
    a_.iadd(next, oct, A::l(in_flight));
    a_.ult(next, octs_, next);
    a_.breakc_nz(next);
    block(in_flight);
    a_.endloop();
    // The remainder (fewer than in_flight octs) in blocks of in_flight / 2,
    // / 4, ..., 1: one wait per set bit instead of one per oct, which for a
    // short split would be most of its time.
    const Operand rest = a_.Scalar();
    a_.iadd(rest, octs_, -oct);
    for (uint32_t octs_in_block = in_flight / 2; octs_in_block >= 1; octs_in_block /= 2) {
      a_.and_(next, rest, A::l(octs_in_block));
      a_.if_nz(next);
      block(octs_in_block);
      a_.endif();
    }
  }

  void StorePartials() {
    using A = KernelAssembler;
    const Operand columns = a_.Scalar(), ok = a_.Scalar(), row = a_.Scalar();
    const Operand address = a_.Scalar();
    a_.ishl(columns, C(kQmmConstOutputWords), A::l(2));
    a_.ult(ok, column0_, columns);
    a_.if_nz(ok);
    for (uint32_t r = 0; r < spec_.rows; ++r) {
      a_.iadd(row, m0_, A::l(r));
      a_.IfUnsignedLess(row, C(kQmmConstRows));
      a_.imad(address, split_, C(kQmmConstRows), row);
      a_.imad(address, address, columns, column0_);
      a_.ishl(address, address, A::l(2));
      a_.store_raw(A::u(0).xy(), address, acc_[r].xy());
      a_.endif();
    }
    a_.endif();
  }

  KernelAssembler& a_;
  const Spec& spec_;
  const uint32_t row_stride_bytes_;
  Operand split_, m0_, n0_, first_oct_, octs_, last_row_, column0_;
  std::vector<Operand> acc_;
};

}  // namespace

absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulRowsKernel(
    const QuantizedMatMulRowsSpec& spec) {
  KernelAssembler a;
  RowsBuilder(a, spec).Build();
  return FinishKernel(a, spec.Key());
}

}  // namespace dmlserve::d3d12

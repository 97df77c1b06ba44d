#include "kernels/d3d12/shaders/quantized_matmul_kernels.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "kernels/d3d12/shaders/kernel_assembler.h"

namespace dmlserve::d3d12 {
namespace {

using dxbc::Operand;
using Spec = QuantizedMatMulKernelSpec;

constexpr const char* kShapeName = "t16x16m4n4k8";
constexpr uint32_t kGroupThreads = Spec::kThreadsX * Spec::kThreadsY;
// Groupshared layout: A words at (kw * tile_m + row) * 4, then B words at
// kBOffset + (kw * tile_n + column) * 4; a thread's 4 rows (columns) are 4
// consecutive words, read with one ld_raw.
constexpr uint32_t kBOffset = Spec::kStepWords * Spec::tile_m() * 4;
constexpr uint32_t kSharedBytes = kBOffset + Spec::kStepWords * Spec::tile_n() * 4;
static_assert(Spec::kMicroM == 4 && Spec::kMicroN == 4, "one vec4 per micro-tile row");
static_assert(Spec::tile_m() * Spec::kStepWords % kGroupThreads == 0, "whole staging rounds");
static_assert(Spec::tile_m() == Spec::tile_n(), "A and B staged in the same rounds");

const char* SignName(bool is_signed) { return is_signed ? "s8" : "u8"; }

class QuantizedMatMulBuilder {
 public:
  QuantizedMatMulBuilder(KernelAssembler& a, const Spec& spec) : a_(a), spec_(spec) {}

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
    a_.IfUnsignedLess(group, A::Constant(kConstGroupCount));
    LocateTile(group);
    Accumulate();
    Requantize();
    a_.endif();
    a_.ret();
  }

 private:
  Operand C(int i) const { return KernelAssembler::Constant(i); }
  Operand Vec() { return KernelAssembler::r(a_.NewTemp()); }
  void Extract(const Operand& d, uint32_t byte, const Operand& words, bool is_signed) {
    using A = KernelAssembler;
    const int32_t offset = static_cast<int32_t>(8 * byte);
    if (is_signed) {
      a_.ibfe(d, A::l(8, 8, 8, 8), A::l(offset, offset, offset, offset), words);
    } else {
      a_.ubfe(d, A::l(8, 8, 8, 8), A::l(offset, offset, offset, offset), words);
    }
  }

  // Which slice and (tile_m, tile_n) block this group computes, and where its
  // rows of A and columns of B start.
  void LocateTile(const Operand& group) {
    using A = KernelAssembler;
    slice_ = a_.Scalar();
    const Operand rest = a_.Scalar(), tile_m = a_.Scalar(), tile_n = a_.Scalar();
    a_.udiv(slice_, rest, group, C(kQmmConstTilesPerSlice));
    a_.udiv(tile_m, tile_n, rest, C(kQmmConstTilesN));
    const Operand batch = a_.Scalar(), channel = a_.Scalar();
    a_.udiv(batch, channel, slice_, C(kQmmConstChannels));
    const Operand a_slice = a_.Scalar(), b_slice = a_.Scalar(), t = a_.Scalar();
    a_.imul(t, channel, C(kQmmConstAChannelStride));
    a_.imad(a_slice, batch, C(kQmmConstABatchStride), t);
    a_.imul(t, channel, C(kQmmConstBChannelStride));
    a_.imad(b_slice, batch, C(kQmmConstBBatchStride), t);
    m0_ = a_.Scalar();
    n0_ = a_.Scalar();
    a_.imul(m0_, tile_m, A::l(Spec::tile_m()));
    a_.imul(n0_, tile_n, A::l(Spec::tile_n()));
    a_row0_ = a_.Scalar();
    b_column0_ = a_.Scalar();
    a_.imad(a_row0_, a_slice, C(kQmmConstRows), m0_);
    a_.imad(b_column0_, b_slice, C(kQmmConstColumns), n0_);
    rows_left_ = a_.Scalar();
    columns_left_ = a_.Scalar();
    a_.ineg(t, m0_);
    a_.iadd(rows_left_, C(kQmmConstRows), t);
    a_.ineg(t, n0_);
    a_.iadd(columns_left_, C(kQmmConstColumns), t);
  }

  // Stages one matrix's words for this K step: thread f loads words
  // f + 256 * s, as (row = index / 8, kw = index % 8).
  void Stage(const Operand& kw0, const Operand& first_row, const Operand& rows_left,
             const Operand& source, uint32_t shared_base) {
    using A = KernelAssembler;
    const Operand f = A::vThreadIDInGroupFlattened().x();
    const uint32_t rounds = Spec::tile_m() * Spec::kStepWords / kGroupThreads;
    for (uint32_t s = 0; s < rounds; ++s) {
      const Operand index = a_.Scalar(), row = a_.Scalar(), kw = a_.Scalar();
      a_.iadd(index, f, A::l(s * kGroupThreads));
      a_.ushr(row, index, A::l(3));
      a_.and_(kw, index, A::l(Spec::kStepWords - 1));
      const Operand shared = a_.Scalar();
      a_.imad(shared, kw, A::l(Spec::tile_m()), row);
      a_.imad(shared, shared, A::l(4), A::l(shared_base));
      a_.iadd(kw, kw, kw0);
      const Operand in_rows = a_.Scalar(), in_depth = a_.Scalar(), word = a_.Scalar();
      a_.ult(in_rows, row, rows_left);
      a_.ult(in_depth, kw, C(kQmmConstDepthWords));
      a_.and_(in_rows, in_rows, in_depth);
      a_.mov(word, A::l(0));
      // Root descriptors are not bounds-checked: only load inside the matrix.
      a_.if_nz(in_rows);
      const Operand address = a_.Scalar();
      a_.iadd(address, first_row, row);
      a_.imad(address, address, C(kQmmConstDepthWords), kw);
      a_.ishl(address, address, A::l(2));
      a_.ld_raw(word, address, source);
      a_.endif();
      a_.store_raw(A::g(0).x(), shared, word);
    }
  }

  void Accumulate() {
    using A = KernelAssembler;
    for (Operand& acc : acc_) {
      acc = Vec();
      a_.mov(acc, A::l(0, 0, 0, 0));
    }
    row_sums_ = Vec();
    column_sums_ = Vec();
    a_.mov(row_sums_, A::l(0, 0, 0, 0));
    a_.mov(column_sums_, A::l(0, 0, 0, 0));
    const Operand a_words = Vec(), b_words = Vec(), a_values = Vec(), b_values = Vec();
    const Operand a_shared = a_.Scalar(), b_shared = a_.Scalar(), address = a_.Scalar();
    // This thread's 4 rows start at word ty * 4, its 4 columns at tx * 4.
    a_.ishl(a_shared, A::vThreadIDInGroup().y(), A::l(4));
    a_.imad(b_shared, A::vThreadIDInGroup().x(), A::l(16), A::l(kBOffset));

    const Operand kw0 = a_.Scalar();
    a_.mov(kw0, A::l(0));
    a_.LoopWhileUnsignedLess(kw0, C(kQmmConstDepthWords));
    Stage(kw0, a_row0_, rows_left_, A::t(0), 0);
    Stage(kw0, b_column0_, columns_left_, A::t(1), kBOffset);
    a_.sync_g_t();
    for (uint32_t kw = 0; kw < Spec::kStepWords; ++kw) {
      a_.iadd(address, a_shared, A::l(kw * Spec::tile_m() * 4));
      a_.ld_raw(a_words, address, A::g(0));
      a_.iadd(address, b_shared, A::l(kw * Spec::tile_n() * 4));
      a_.ld_raw(b_words, address, A::g(0));
      for (uint32_t byte = 0; byte < 4; ++byte) {
        Extract(a_values, byte, a_words, spec_.a_signed);
        Extract(b_values, byte, b_words, spec_.b_signed);
        for (uint32_t i = 0; i < Spec::kMicroM; ++i) {
          a_.imad(acc_[i], a_values.sel(std::string(1, "xyzw"[i])), b_values, acc_[i]);
        }
        a_.iadd(row_sums_, row_sums_, a_values);
        a_.iadd(column_sums_, column_sums_, b_values);
      }
    }
    a_.sync_g_t();  // before the next step overwrites the staged words
    a_.iadd(kw0, kw0, A::l(Spec::kStepWords));
    a_.endloop();
  }

  void Requantize() {
    using A = KernelAssembler;
    const Operand tx = A::vThreadIDInGroup().x(), ty = A::vThreadIDInGroup().y();
    // Column parameters of this thread's 4 columns (zero past N).
    const Operand b_scale = Vec(), b_zero = Vec(), params = Vec();
    a_.mov(b_scale, A::l(0, 0, 0, 0));
    a_.mov(b_zero, A::l(0, 0, 0, 0));
    const Operand column = a_.Scalar(), address = a_.Scalar();
    for (uint32_t j = 0; j < Spec::kMicroN; ++j) {
      const std::string c(1, "xyzw"[j]);
      a_.imad(column, tx, A::l(Spec::kMicroN), n0_);
      a_.iadd(column, column, A::l(j));
      a_.IfUnsignedLess(column, C(kQmmConstColumns));
      a_.ishl(address, column, A::l(3));
      a_.ld_raw(params.xy(), address, A::t(3));
      a_.mov(b_scale.sel(c), params.x());
      a_.mov(b_zero.sel(c), params.y());
      a_.endif();
    }
    const Operand word = a_.Scalar(), word_ok = a_.Scalar();
    a_.ushr(word, n0_, A::l(2));
    a_.iadd(word, word, tx);
    a_.ult(word_ok, word, C(kQmmConstOutputWords));

    const Operand row = a_.Scalar(), out_row = a_.Scalar(), ok = a_.Scalar();
    const Operand t = Vec(), value = Vec(), scale = Vec(), kz = a_.Scalar();
    const Operand down = Vec(), up = Vec(), factor = Vec(), unscale = Vec();
    const Operand low = A::l(spec_.output_signed ? -128 : 0);
    const Operand high = A::l(spec_.output_signed ? 127 : 255);
    for (uint32_t i = 0; i < Spec::kMicroM; ++i) {
      const std::string c(1, "xyzw"[i]);
      a_.imad(row, ty, A::l(Spec::kMicroM), m0_);
      a_.iadd(row, row, A::l(i));
      a_.ult(ok, row, C(kQmmConstRows));
      a_.and_(ok, ok, word_ok);
      a_.if_nz(ok);
      a_.imad(out_row, slice_, C(kQmmConstRows), row);
      a_.imul(address, out_row, C(kQmmConstRowParamBytes));
      a_.ld_raw(params, address, A::t(2));  // a_scale, output_scale, a_zp, output_zp
      // acc - zb * sum(a) - za * sum(b) + K * za * zb (wrapping int32).
      a_.imul(t, b_zero, row_sums_.sel(c));
      a_.ineg(t, t);
      a_.iadd(acc_[i], acc_[i], t);
      a_.imul(t, params.z(), column_sums_);
      a_.ineg(t, t);
      a_.iadd(acc_[i], acc_[i], t);
      a_.imul(kz, C(kQmmConstDepth), params.z());
      a_.imad(acc_[i], kz, b_zero, acc_[i]);
      // round_ne(float(acc) * (a_scale * b_scale / output_scale)). Scales
      // are any finite floats, so a_scale * b_scale may leave float32's
      // range while the ratio does not: then a_scale is pre-scaled by 2^-64
      // (or 2^64) and the ratio scaled back, which is exact and leaves the
      // in-range arithmetic unchanged.
      a_.mul(scale, params.x(), b_scale);
      a_.ge(down, scale.abs(), A::lf(0x1p100f));
      a_.lt(up, scale.abs(), A::lf(0x1p-100f));
      a_.lt(t.x(), params.x().abs(), A::lf(0x1p64f));
      a_.and_(up, up, t.sel("xxxx"));  // else b_scale is 0 (2^64 * a_scale could be inf)
      a_.movc(factor, down, A::lf(0x1p-64f), A::lf(1.0f));
      a_.movc(factor, up, A::lf(0x1p64f), factor);
      a_.movc(unscale, down, A::lf(0x1p64f), A::lf(1.0f));
      a_.movc(unscale, up, A::lf(0x1p-64f), unscale);
      a_.mul(scale, params.x(), factor);
      a_.mul(scale, scale, b_scale);
      // GPUs divide as x * rcp(y), and rcp(y) of an output scale of 2^126 or
      // more is subnormal, which they flush to zero (an H100 through vkd3d
      // answered 0 for 3 * 4 * 1e38 / 1e38). Both sides are scaled by 2^-64
      // when the output scale is that large: exact, and a numerator made
      // subnormal by it only means a ratio below 2^-126, whose product with
      // any int32 accumulator rounds to 0 anyway.
      a_.ge(t, params.y().abs(), A::lf(0x1p64f));
      a_.movc(t, t, A::lf(0x1p-64f), A::lf(1.0f));
      a_.mul(scale, scale, t);
      a_.mul(t, params.y(), t);
      a_.div(scale, scale, t);
      a_.mul(scale, scale, unscale);
      a_.itof(value, acc_[i]);
      a_.mul(value, value, scale);
      // 0 * inf (a ratio beyond float32) is NaN; the result is 0.
      a_.movc(value, acc_[i], value, A::l(0, 0, 0, 0));
      a_.round_ne(value, value);
      // ftoi of out-of-range values is undefined in SPIR-V: clamp first.
      a_.max(value, value, A::lf(-1073741824.0f));
      a_.min(value, value, A::lf(1073741824.0f));
      a_.ftoi(value, value);
      a_.iadd(value, value, params.w());
      a_.imax(value, value, low);
      a_.imin(value, value, high);
      a_.and_(value, value, A::l(255, 255, 255, 255));
      a_.ishl(value, value, A::l(0, 8, 16, 24));
      a_.or_(value.xy(), value.xy(), value.zw());
      a_.or_(value.x(), value.x(), value.y());
      a_.imad(address, out_row, C(kQmmConstOutputWords), word);
      a_.ishl(address, address, A::l(2));
      a_.store_raw(A::u(0).x(), address, value.x());
      a_.endif();
    }
  }

  KernelAssembler& a_;
  const Spec& spec_;
  Operand slice_, m0_, n0_, a_row0_, b_column0_, rows_left_, columns_left_;
  Operand acc_[Spec::kMicroM];
  Operand row_sums_, column_sums_;
};

}  // namespace

std::string QuantizedMatMulKernelSpec::Key() const {
  return absl::StrCat("qmm.gemm/", SignName(a_signed), "/", SignName(b_signed), "/",
                      SignName(output_signed), "/", kShapeName);
}

absl::StatusOr<QuantizedMatMulKernelSpec> QuantizedMatMulKernelSpec::Parse(absl::string_view key) {
  const std::vector<absl::string_view> parts = absl::StrSplit(key, '/');
  const absl::Status bad =
      absl::InvalidArgumentError(absl::StrCat("bad quantized matmul kernel key: ", key));
  if (parts.size() != 5 || parts[0] != "qmm.gemm" || parts[4] != kShapeName) return bad;
  QuantizedMatMulKernelSpec spec;
  bool* fields[] = {&spec.a_signed, &spec.b_signed, &spec.output_signed};
  for (int i = 0; i < 3; ++i) {
    if (parts[i + 1] != "s8" && parts[i + 1] != "u8") return bad;
    *fields[i] = parts[i + 1] == "s8";
  }
  return spec;
}

absl::StatusOr<std::vector<uint8_t>> BuildQuantizedMatMulKernel(
    const QuantizedMatMulKernelSpec& spec) {
  KernelAssembler a;
  QuantizedMatMulBuilder(a, spec).Build();
  absl::StatusOr<std::vector<uint8_t>> blob = a.Finish();
  if (!blob.ok()) {
    return absl::InternalError(absl::StrCat(spec.Key(), ": ", blob.status().message()));
  }
  return blob;
}

std::vector<QuantizedMatMulKernelSpec> AllQuantizedMatMulKernelSpecs() {
  std::vector<QuantizedMatMulKernelSpec> specs;
  for (bool a : {true, false}) {
    for (bool b : {true, false}) {
      for (bool y : {true, false}) {
        QuantizedMatMulKernelSpec spec;
        spec.a_signed = a;
        spec.b_signed = b;
        spec.output_signed = y;
        specs.push_back(spec);
      }
    }
  }
  return specs;
}

}  // namespace dmlserve::d3d12

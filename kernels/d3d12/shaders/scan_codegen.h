#ifndef DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_CODEGEN_H_
#define DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_CODEGEN_H_

// What the scan kernels' builders (scan_kernels.cc: the serial pass;
// scan_lookback_kernel.cc: the tiled line and look-back passes) share: the
// per-format arithmetic of a scan and where a line's elements are.

#include <cstdint>

#include "kernels/d3d12/shaders/kernel_assembler.h"
#include "kernels/d3d12/shaders/scan_kernels.h"

namespace dmlserve::d3d12 {

// Emits the per-format arithmetic of a scan. A value lives in one temp:
// .x (32-bit formats, floats for FLOAT16) or .xy = (lo, hi) for 64-bit.
class ScanCodegen {
 public:
  using Operand = dxbc::Operand;

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
  dxbc::Operand origin;
  dxbc::Operand step;
};

LineGeometry EmitLineGeometry(KernelAssembler& a, const dxbc::Operand& line, bool reverse);

// The tiled passes, `line` and `lookback` (see scan_kernels.h), into `a`
// (scan_lookback_kernel.cc).
void BuildTiledScan(KernelAssembler& a, const ScanKernelSpec& spec);

}  // namespace dmlserve::d3d12

#endif  // DMLSERVE_KERNELS_D3D12_SHADERS_SCAN_CODEGEN_H_

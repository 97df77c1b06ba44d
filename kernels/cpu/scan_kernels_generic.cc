// The portable scan loops: one lane, plain C++ (the compiler may still
// vectorize the row loops for its baseline target).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/float16.h"
#include "kernels/cpu/scan_simd.h"

namespace dmlserve::scan_internal {
namespace generic {
namespace {

template <typename A>
struct Lanes {
  using V = A;
  static constexpr int kLanes = 1;
  using Idx = int;
  using Mask = bool;
  static Idx MakeIdx(const int* idx) { return *idx; }
  static Mask MakeMask(uint32_t bits) { return (bits & 1u) != 0; }
  static V Select(V v, Idx, Mask m, V fill) { return m ? v : fill; }
  static V Set1(A a) { return a; }
  static V LoadAcc(const A* p) { return *p; }
  static void StoreAcc(A* p, V v) { *p = v; }
  template <typename Op>
  static V Apply(Op, V x, V y) {
    return Op::Apply(x, y);
  }
  template <int s>
  static V ShiftUp(V, V fill) {
    return fill;
  }
  static V Reverse(V v) { return v; }
  static V BroadcastLast(V v) { return v; }
  static A Last(V v) { return v; }
  template <typename Op>
  static A Reduce(Op, V v) {
    return v;
  }
};

// Integers accumulate in unsigned types of at least their width, so overflow
// wraps modulo 2^bits; narrower results are truncated.
template <typename S, typename A>
struct Mem {
  static constexpr size_t kStoreBytes = sizeof(S);
  static A Load(const S* p) { return static_cast<A>(*p); }
  static void Store(S* p, A v) { *p = static_cast<S>(v); }
  static void StoreNt(S* p, A v) { *p = static_cast<S>(v); }
  static A LoadScalar(S x) { return static_cast<A>(x); }
  static S StoreScalar(A a) { return static_cast<S>(a); }
};

template <>
struct Mem<uint16_t, float> {
  static constexpr size_t kStoreBytes = sizeof(uint16_t);
  static float Load(const uint16_t* p) { return HalfToFloat(*p); }
  static void Store(uint16_t* p, float v) { *p = FloatToHalf(v); }
  static void StoreNt(uint16_t* p, float v) { *p = FloatToHalf(v); }
  static float LoadScalar(uint16_t x) { return HalfToFloat(x); }
  static uint16_t StoreScalar(float a) { return FloatToHalf(a); }
};

void Fence() {}

#include "kernels/cpu/scan_simd-inl.h"

}  // namespace
}  // namespace generic

const ScanTable& GenericScanTable() {
  static const ScanTable table = generic::MakeScanTable();
  return table;
}

}  // namespace dmlserve::scan_internal

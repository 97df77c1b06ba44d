// The AVX2 scan loops: 8 float/32-bit or 4 64-bit lanes per vector. Only
// this file's functions carry the AVX2 target; ComputeScan calls them only
// through the avx2 and avxvnni levels' tables (cpu_kernels.h).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/scan_simd.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx2,fma,f16c")

namespace dmlserve::scan_internal {
namespace avx2 {
namespace {

// Lane j of the result is lane j - s of v (32-bit lanes), or fill's for j < s.
template <int s>
__m256i ShiftUp32(__m256i v, __m256i fill) {
  const __m256i index = _mm256_setr_epi32(0 - s, 1 - s, 2 - s, 3 - s, 4 - s, 5 - s, 6 - s, 7 - s);
  return _mm256_blend_epi32(_mm256_permutevar8x32_epi32(v, index), fill, (1 << s) - 1);
}

// The lanes of a 32-bit lane mask whose bit j is set in `bits`, all ones.
__m256i Mask32(uint32_t bits) {
  const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(static_cast<int>(bits)), bit), bit);
}

template <typename A>
struct Lanes;

template <>
struct Lanes<float> {
  using V = __m256;
  static constexpr int kLanes = 8;
  // Lane j: v[idx[j]] where lane j of m is all ones, else fill[j].
  using Idx = __m256i;
  using Mask = __m256i;
  static Idx MakeIdx(const int* idx) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx));
  }
  static Mask MakeMask(uint32_t bits) { return Mask32(bits); }
  static V Select(V v, Idx idx, Mask m, V fill) {
    return _mm256_blendv_ps(fill, _mm256_permutevar8x32_ps(v, idx), _mm256_castsi256_ps(m));
  }
  static V Set1(float a) { return _mm256_set1_ps(a); }
  static V LoadAcc(const float* p) { return _mm256_loadu_ps(p); }
  static void StoreAcc(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V Apply(Add, V x, V y) { return _mm256_add_ps(x, y); }
  static V Apply(Multiply, V x, V y) { return _mm256_mul_ps(x, y); }
  template <int s>
  static V ShiftUp(V v, V fill) {
    return _mm256_castsi256_ps(ShiftUp32<s>(_mm256_castps_si256(v), _mm256_castps_si256(fill)));
  }
  static V Reverse(V v) {
    return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
  }
  static V BroadcastLast(V v) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(7)); }
  static float Last(V v) { return _mm256_cvtss_f32(BroadcastLast(v)); }
  static float Reduce(Add, V v) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    float total = 0.0f;
    for (float x : lanes) total += x;
    return total;
  }
  static float Reduce(Multiply, V v) {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    float total = 1.0f;
    for (float x : lanes) total *= x;
    return total;
  }
};

template <>
struct Lanes<uint32_t> {
  using V = __m256i;
  static constexpr int kLanes = 8;
  using Idx = __m256i;
  using Mask = __m256i;
  static Idx MakeIdx(const int* idx) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx));
  }
  static Mask MakeMask(uint32_t bits) { return Mask32(bits); }
  static V Select(V v, Idx idx, Mask m, V fill) {
    return _mm256_blendv_epi8(fill, _mm256_permutevar8x32_epi32(v, idx), m);
  }
  static V Set1(uint32_t a) { return _mm256_set1_epi32(static_cast<int>(a)); }
  static V LoadAcc(const uint32_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static void StoreAcc(uint32_t* p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static V Apply(Add, V x, V y) { return _mm256_add_epi32(x, y); }
  static V Apply(Multiply, V x, V y) { return _mm256_mullo_epi32(x, y); }
  template <int s>
  static V ShiftUp(V v, V fill) {
    return ShiftUp32<s>(v, fill);
  }
  static V Reverse(V v) {
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0));
  }
  static V BroadcastLast(V v) { return _mm256_permutevar8x32_epi32(v, _mm256_set1_epi32(7)); }
  static uint32_t Last(V v) { return static_cast<uint32_t>(_mm256_extract_epi32(v, 7)); }
  template <typename Op>
  static uint32_t Reduce(Op, V v) {
    alignas(32) uint32_t lanes[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
    uint32_t total = Op::template Identity<uint32_t>();
    for (uint32_t x : lanes) total = Op::Apply(total, x);
    return total;
  }
};

template <>
struct Lanes<uint64_t> {
  using V = __m256i;
  static constexpr int kLanes = 4;
  // 64-bit lanes move as pairs of 32-bit lanes (AVX2 has no variable
  // 64-bit permutation).
  using Idx = __m256i;
  using Mask = __m256i;
  static Idx MakeIdx(const int* idx) {
    return _mm256_setr_epi32(2 * idx[0], 2 * idx[0] + 1, 2 * idx[1], 2 * idx[1] + 1, 2 * idx[2],
                             2 * idx[2] + 1, 2 * idx[3], 2 * idx[3] + 1);
  }
  static Mask MakeMask(uint32_t bits) {
    uint32_t pairs = 0;
    for (int j = 0; j < 4; ++j) pairs |= ((bits >> j) & 1u) * (3u << (2 * j));
    return Mask32(pairs);
  }
  static V Select(V v, Idx idx, Mask m, V fill) {
    return _mm256_blendv_epi8(fill, _mm256_permutevar8x32_epi32(v, idx), m);
  }
  static V Set1(uint64_t a) { return _mm256_set1_epi64x(static_cast<long long>(a)); }
  static V LoadAcc(const uint64_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static void StoreAcc(uint64_t* p, V v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static V Apply(Add, V x, V y) { return _mm256_add_epi64(x, y); }
  template <int s>
  static V ShiftUp(V v, V fill) {
    if constexpr (s == 1) {
      return _mm256_blend_epi32(_mm256_permute4x64_epi64(v, _MM_SHUFFLE(2, 1, 0, 0)), fill, 0x03);
    } else {
      static_assert(s == 2);
      return _mm256_blend_epi32(_mm256_permute4x64_epi64(v, _MM_SHUFFLE(1, 0, 0, 0)), fill, 0x0f);
    }
  }
  static V Reverse(V v) { return _mm256_permute4x64_epi64(v, _MM_SHUFFLE(0, 1, 2, 3)); }
  static V BroadcastLast(V v) { return _mm256_permute4x64_epi64(v, _MM_SHUFFLE(3, 3, 3, 3)); }
  static uint64_t Last(V v) { return static_cast<uint64_t>(_mm256_extract_epi64(v, 3)); }
  static uint64_t Reduce(Add, V v) {
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
  }
};

template <typename S, typename A>
struct Mem;

template <>
struct Mem<float, float> {
  static constexpr size_t kStoreBytes = 32;
  static __m256 Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
  static void StoreNt(float* p, __m256 v) { _mm256_stream_ps(p, v); }
  static float LoadScalar(float x) { return x; }
  static float StoreScalar(float a) { return a; }
};

// FLOAT16: the F16C conversions round to nearest even, like FloatToHalf.
template <>
struct Mem<uint16_t, float> {
  static constexpr size_t kStoreBytes = 16;
  static __m256 Load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m128i Half(__m256 v) {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static void Store(uint16_t* p, __m256 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), Half(v));
  }
  static void StoreNt(uint16_t* p, __m256 v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), Half(v));
  }
  static float LoadScalar(uint16_t x) { return _cvtsh_ss(x); }
  static uint16_t StoreScalar(float a) {
    return static_cast<uint16_t>(_cvtss_sh(a, _MM_FROUND_TO_NEAREST_INT));
  }
};

template <typename S, typename A>
struct SameWidthMem {
  static_assert(sizeof(S) == sizeof(A));
  static constexpr size_t kStoreBytes = 32;
  static __m256i Load(const S* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }
  static void Store(S* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
  static void StoreNt(S* p, __m256i v) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), v); }
  static A LoadScalar(S x) { return static_cast<A>(x); }
  static S StoreScalar(A a) { return static_cast<S>(a); }
};
template <>
struct Mem<uint32_t, uint32_t> : SameWidthMem<uint32_t, uint32_t> {};
template <>
struct Mem<uint64_t, uint64_t> : SameWidthMem<uint64_t, uint64_t> {};

// UINT16 products in 32-bit lanes, truncated on store.
template <>
struct Mem<uint16_t, uint32_t> {
  static constexpr size_t kStoreBytes = 16;
  static __m256i Load(const uint16_t* p) {
    return _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // The low 16 bits of each lane, packed: masked values are in [0, 65535],
  // so the saturating pack is exact.
  static __m128i Narrow(__m256i v) {
    const __m256i low = _mm256_and_si256(v, _mm256_set1_epi32(0xffff));
    const __m256i packed = _mm256_packus_epi32(low, low);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0)));
  }
  static void Store(uint16_t* p, __m256i v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), Narrow(v));
  }
  static void StoreNt(uint16_t* p, __m256i v) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(p), Narrow(v));
  }
  static uint32_t LoadScalar(uint16_t x) { return x; }
  static uint16_t StoreScalar(uint32_t a) { return static_cast<uint16_t>(a); }
};

void Fence() { _mm_sfence(); }

#include "kernels/cpu/scan_simd-inl.h"

}  // namespace
}  // namespace avx2

const ScanTable& Avx2ScanTable() {
  static const ScanTable table = avx2::MakeScanTable();
  return table;
}

}  // namespace dmlserve::scan_internal

DMLSERVE_ISA_END
#endif  // DMLSERVE_X86

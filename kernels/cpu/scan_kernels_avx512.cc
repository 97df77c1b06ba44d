// The AVX-512 scan loops: 16 float/32-bit or 8 64-bit lanes per vector.
// Only this file's functions carry the AVX-512 target; ComputeScan calls them
// only through the avx512vnni level's table (cpu_kernels.h).

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/cpu/isa_portability.h"
#include "kernels/cpu/scan_simd.h"

#if DMLSERVE_X86
#include <immintrin.h>

DMLSERVE_ISA_BEGIN("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")
DMLSERVE_IGNORE_UNINITIALIZED_BEGIN

namespace dmlserve::scan_internal {
namespace avx512 {
namespace {

template <typename A>
struct Lanes;

// All lanes of an integer vector combined, as unsigned T: the wrapping the
// integer scans need. (GCC's _mm512_reduce_*_epi32/64 do signed arithmetic,
// whose overflow is undefined; UBSan reports it.)
template <typename T, typename Op>
T ReduceLanes(Op, __m512i v) {
  alignas(64) T lanes[64 / sizeof(T)];
  _mm512_store_si512(lanes, v);
  T total = Op::template Identity<T>();
  for (T lane : lanes) total = Op::Apply(total, lane);
  return total;
}

template <>
struct Lanes<float> {
  using V = __m512;
  static constexpr int kLanes = 16;
  // Lane j: v[idx[j]] where bit j of m is set, else fill[j].
  using Idx = __m512i;
  using Mask = __mmask16;
  static Idx MakeIdx(const int* idx) { return _mm512_loadu_si512(idx); }
  static Mask MakeMask(uint32_t bits) { return static_cast<Mask>(bits); }
  static V Select(V v, Idx idx, Mask m, V fill) {
    return _mm512_mask_permutexvar_ps(fill, m, idx, v);
  }
  static V Set1(float a) { return _mm512_set1_ps(a); }
  static V LoadAcc(const float* p) { return _mm512_loadu_ps(p); }
  static void StoreAcc(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V Apply(Add, V x, V y) { return _mm512_add_ps(x, y); }
  static V Apply(Multiply, V x, V y) { return _mm512_mul_ps(x, y); }
  template <int s>
  static V ShiftUp(V v, V fill) {
    return _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(v), _mm512_castps_si512(fill), 16 - s));
  }
  static V Reverse(V v) {
    return _mm512_permutexvar_ps(
        _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), v);
  }
  static V BroadcastLast(V v) { return _mm512_permutexvar_ps(_mm512_set1_epi32(15), v); }
  static float Last(V v) { return _mm_cvtss_f32(_mm512_extractf32x4_ps(BroadcastLast(v), 0)); }
  static float Reduce(Add, V v) { return _mm512_reduce_add_ps(v); }
  static float Reduce(Multiply, V v) { return _mm512_reduce_mul_ps(v); }
};

template <>
struct Lanes<uint32_t> {
  using V = __m512i;
  static constexpr int kLanes = 16;
  using Idx = __m512i;
  using Mask = __mmask16;
  static Idx MakeIdx(const int* idx) { return _mm512_loadu_si512(idx); }
  static Mask MakeMask(uint32_t bits) { return static_cast<Mask>(bits); }
  static V Select(V v, Idx idx, Mask m, V fill) {
    return _mm512_mask_permutexvar_epi32(fill, m, idx, v);
  }
  static V Set1(uint32_t a) { return _mm512_set1_epi32(static_cast<int>(a)); }
  static V LoadAcc(const uint32_t* p) { return _mm512_loadu_si512(p); }
  static void StoreAcc(uint32_t* p, V v) { _mm512_storeu_si512(p, v); }
  static V Apply(Add, V x, V y) { return _mm512_add_epi32(x, y); }
  static V Apply(Multiply, V x, V y) { return _mm512_mullo_epi32(x, y); }
  template <int s>
  static V ShiftUp(V v, V fill) {
    return _mm512_alignr_epi32(v, fill, 16 - s);
  }
  static V Reverse(V v) {
    return _mm512_permutexvar_epi32(
        _mm512_set_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), v);
  }
  static V BroadcastLast(V v) { return _mm512_permutexvar_epi32(_mm512_set1_epi32(15), v); }
  static uint32_t Last(V v) {
    return static_cast<uint32_t>(_mm_cvtsi128_si32(_mm512_castsi512_si128(BroadcastLast(v))));
  }
  template <typename Op>
  static uint32_t Reduce(Op op, V v) {
    return ReduceLanes<uint32_t>(op, v);
  }
};

template <>
struct Lanes<uint64_t> {
  using V = __m512i;
  static constexpr int kLanes = 8;
  using Idx = __m512i;
  using Mask = __mmask8;
  static Idx MakeIdx(const int* idx) {
    return _mm512_cvtepi32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(idx)));
  }
  static Mask MakeMask(uint32_t bits) { return static_cast<Mask>(bits); }
  static V Select(V v, Idx idx, Mask m, V fill) {
    return _mm512_mask_permutexvar_epi64(fill, m, idx, v);
  }
  static V Set1(uint64_t a) { return _mm512_set1_epi64(static_cast<long long>(a)); }
  static V LoadAcc(const uint64_t* p) { return _mm512_loadu_si512(p); }
  static void StoreAcc(uint64_t* p, V v) { _mm512_storeu_si512(p, v); }
  static V Apply(Add, V x, V y) { return _mm512_add_epi64(x, y); }
  template <int s>
  static V ShiftUp(V v, V fill) {
    return _mm512_alignr_epi64(v, fill, 8 - s);
  }
  static V Reverse(V v) {
    return _mm512_permutexvar_epi64(_mm512_set_epi64(0, 1, 2, 3, 4, 5, 6, 7), v);
  }
  static V BroadcastLast(V v) { return _mm512_permutexvar_epi64(_mm512_set1_epi64(7), v); }
  static uint64_t Last(V v) {
    return static_cast<uint64_t>(_mm_cvtsi128_si64(_mm512_castsi512_si128(BroadcastLast(v))));
  }
  static uint64_t Reduce(Add op, V v) { return ReduceLanes<uint64_t>(op, v); }
};

template <typename S, typename A>
struct Mem;

template <>
struct Mem<float, float> {
  static constexpr size_t kStoreBytes = 64;
  static __m512 Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
  static void StoreNt(float* p, __m512 v) { _mm512_stream_ps(p, v); }
  static float LoadScalar(float x) { return x; }
  static float StoreScalar(float a) { return a; }
};

// FLOAT16: the conversion instructions round to nearest even, like
// FloatToHalf.
template <>
struct Mem<uint16_t, float> {
  static constexpr size_t kStoreBytes = 32;
  static __m512 Load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m256i Half(__m512 v) {
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static void Store(uint16_t* p, __m512 v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), Half(v));
  }
  static void StoreNt(uint16_t* p, __m512 v) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), Half(v));
  }
  static float LoadScalar(uint16_t x) { return _cvtsh_ss(x); }
  static uint16_t StoreScalar(float a) {
    return static_cast<uint16_t>(_cvtss_sh(a, _MM_FROUND_TO_NEAREST_INT));
  }
};

template <typename S, typename A>
struct SameWidthMem {
  static_assert(sizeof(S) == sizeof(A));
  static constexpr size_t kStoreBytes = 64;
  static __m512i Load(const S* p) { return _mm512_loadu_si512(p); }
  static void Store(S* p, __m512i v) { _mm512_storeu_si512(p, v); }
  static void StoreNt(S* p, __m512i v) { _mm512_stream_si512(reinterpret_cast<__m512i*>(p), v); }
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
  static constexpr size_t kStoreBytes = 32;
  static __m512i Load(const uint16_t* p) {
    return _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void Store(uint16_t* p, __m512i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v));
  }
  static void StoreNt(uint16_t* p, __m512i v) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v));
  }
  static uint32_t LoadScalar(uint16_t x) { return x; }
  static uint16_t StoreScalar(uint32_t a) { return static_cast<uint16_t>(a); }
};

void Fence() { _mm_sfence(); }

#include "kernels/cpu/scan_simd-inl.h"

}  // namespace
}  // namespace avx512

const ScanTable& Avx512ScanTable() {
  static const ScanTable table = avx512::MakeScanTable();
  return table;
}

}  // namespace dmlserve::scan_internal

DMLSERVE_IGNORE_UNINITIALIZED_END
DMLSERVE_ISA_END
#endif  // DMLSERVE_X86

// The scan loops of scan_simd.h, written once over a vector abstraction and
// compiled once per instruction set: each ISA's .cc file defines, in its own
// namespace and under its own target options,
//
//   template <typename A> struct Lanes;  // vectors of accumulators
//     using V; static constexpr int kLanes;
//     V Set1(A); V LoadAcc(const A*); void StoreAcc(A*, V);  // unaligned
//     V Apply(Add|Multiply, V, V);
//     template <int s> V ShiftUp(V v, V fill);  // lane j: v[j-s], or fill[j] for j < s
//     V Reverse(V); V BroadcastLast(V); A Last(V);
//     A Reduce(Op, V)                            // all lanes combined
//   template <typename S, typename A> struct Mem;  // storage <-> accumulators
//     static constexpr size_t kStoreBytes;       // one vector's storage
//     V Load(const S*); void Store(S*, V);       // unaligned
//     void StoreNt(S*, V);                       // aligned to kStoreBytes
//     A LoadScalar(S); S StoreScalar(A);
//   void Fence();                                 // orders non-temporal stores
//
// and then includes this file. No include guard: included once per ISA.

template <typename S, typename A, typename Op, bool kExclusive>
struct ScanLoops {
  using L = Lanes<A>;
  using M = Mem<S, A>;
  using V = typename L::V;
  static constexpr int kN = L::kLanes;

  static V VIdentity() { return L::Set1(Op::template Identity<A>()); }

  // One element, sequentially.
  static void Step(const S* x, S* y, A& acc) {
    if constexpr (kExclusive) {
      *y = M::StoreScalar(acc);
      acc = Op::Apply(acc, M::LoadScalar(*x));
    } else {
      acc = Op::Apply(acc, M::LoadScalar(*x));
      *y = M::StoreScalar(acc);
    }
  }

  // Inclusive prefix of the lanes of v (log2(kN) shift-and-combine steps).
  static V Prefix(V v) {
    const V id = VIdentity();
    if constexpr (kN >= 2) v = L::Apply(Op(), v, L::template ShiftUp<1>(v, id));
    if constexpr (kN >= 4) v = L::Apply(Op(), v, L::template ShiftUp<2>(v, id));
    if constexpr (kN >= 8) v = L::Apply(Op(), v, L::template ShiftUp<4>(v, id));
    if constexpr (kN >= 16) v = L::Apply(Op(), v, L::template ShiftUp<8>(v, id));
    return v;
  }

  // kN elements at in/out, in scan order reversed in memory when kReverse.
  // `carry` holds the running value in every lane.
  template <bool kReverse, bool kNt>
  static void Block(const S* in, S* out, V& carry) {
    V x = M::Load(in);
    if constexpr (kReverse) x = L::Reverse(x);
    const V prefix = Prefix(x);
    const V inclusive = L::Apply(Op(), carry, prefix);
    V y = inclusive;
    if constexpr (kExclusive) y = L::template ShiftUp<1>(inclusive, carry);
    // carry + total: the same value as inclusive's last lane, but only one
    // operation on the loop-carried chain.
    carry = L::Apply(Op(), carry, L::BroadcastLast(prefix));
    if constexpr (kReverse) y = L::Reverse(y);
    if constexpr (kNt) {
      M::StoreNt(out, y);
    } else {
      M::Store(out, y);
    }
  }

  template <bool kReverse, bool kNt>
  static int64_t Blocks(const S* in, S* out, int64_t n, A& acc) {
    V carry = L::Set1(acc);
    int64_t done = 0;
    if constexpr (kReverse) {
      for (; done + kN <= n; done += kN) {
        Block<true, kNt>(in + n - done - kN, out + n - done - kN, carry);
      }
    } else {
      for (; done + kN <= n; done += kN) Block<false, kNt>(in + done, out + done, carry);
    }
    acc = L::Last(carry);
    return done;
  }

  static bool Aligned(const S* p) { return reinterpret_cast<uintptr_t>(p) % M::kStoreBytes == 0; }

  static void Line(const void* in_v, void* out_v, int64_t n, bool reverse, void* carry_v, bool nt) {
    const S* in = static_cast<const S*>(in_v);
    S* out = static_cast<S*>(out_v);
    A acc = *static_cast<A*>(carry_v);
    if (!reverse) {
      int64_t i = 0;
      if (nt) {
        // Scalar head up to the first aligned vector of the output.
        for (; i < n && !Aligned(out + i); ++i) Step(in + i, out + i, acc);
        i += Blocks<false, true>(in + i, out + i, n - i, acc);
      } else {
        i += Blocks<false, false>(in + i, out + i, n - i, acc);
      }
      for (; i < n; ++i) Step(in + i, out + i, acc);
    } else {
      int64_t i = n;  // elements [0, i) are left
      if (nt) {
        while (i > 0 && !Aligned(out + i)) {
          --i;
          Step(in + i, out + i, acc);
        }
        i -= Blocks<true, true>(in, out, i, acc);
      } else {
        i -= Blocks<true, false>(in, out, i, acc);
      }
      while (i > 0) {
        --i;
        Step(in + i, out + i, acc);
      }
    }
    *static_cast<A*>(carry_v) = acc;
  }

  template <bool kNt>
  static void Row(const S* x, S* y, int64_t lanes, A* acc) {
    int64_t l = 0;
    if constexpr (kNt) {
      for (; l < lanes && !Aligned(y + l); ++l) Step(x + l, y + l, acc[l]);
    }
    for (; l + kN <= lanes; l += kN) {
      V a = L::LoadAcc(acc + l);
      const V v = M::Load(x + l);
      if constexpr (kExclusive) {
        if constexpr (kNt) {
          M::StoreNt(y + l, a);
        } else {
          M::Store(y + l, a);
        }
        a = L::Apply(Op(), a, v);
      } else {
        a = L::Apply(Op(), a, v);
        if constexpr (kNt) {
          M::StoreNt(y + l, a);
        } else {
          M::Store(y + l, a);
        }
      }
      L::StoreAcc(acc + l, a);
    }
    for (; l < lanes; ++l) Step(x + l, y + l, acc[l]);
  }

  static void Rows(const void* in_v, void* out_v, ptrdiff_t stride, int64_t rows, int64_t lanes,
                   void* acc_v, bool nt) {
    const S* in = static_cast<const S*>(in_v);
    S* out = static_cast<S*>(out_v);
    A* acc = static_cast<A*>(acc_v);
    if (lanes == 1) {
      // One strided line (inner dimension of 1 within a lane chunk).
      A a = acc[0];
      for (int64_t r = 0; r < rows; ++r) Step(in + r * stride, out + r * stride, a);
      acc[0] = a;
      return;
    }
    if (nt) {
      for (int64_t r = 0; r < rows; ++r) Row<true>(in + r * stride, out + r * stride, lanes, acc);
    } else {
      for (int64_t r = 0; r < rows; ++r) Row<false>(in + r * stride, out + r * stride, lanes, acc);
    }
  }

  static void ReduceLine(const void* in_v, int64_t n, void* total_v) {
    const S* in = static_cast<const S*>(in_v);
    // Four independent vector chains keep the pipeline full.
    V partial[4] = {VIdentity(), VIdentity(), VIdentity(), VIdentity()};
    int64_t i = 0;
    for (; i + 4 * kN <= n; i += 4 * kN) {
      for (int j = 0; j < 4; ++j) {
        partial[j] = L::Apply(Op(), partial[j], M::Load(in + i + j * kN));
      }
    }
    for (; i + kN <= n; i += kN) partial[0] = L::Apply(Op(), partial[0], M::Load(in + i));
    const V all = L::Apply(Op(), L::Apply(Op(), partial[0], partial[1]),
                           L::Apply(Op(), partial[2], partial[3]));
    A total = Op::Apply(*static_cast<A*>(total_v), L::Reduce(Op(), all));
    for (; i < n; ++i) total = Op::Apply(total, M::LoadScalar(in[i]));
    *static_cast<A*>(total_v) = total;
  }

  static void ReduceRows(const void* in_v, ptrdiff_t stride, int64_t rows, int64_t lanes,
                         void* acc_v) {
    const S* in = static_cast<const S*>(in_v);
    A* acc = static_cast<A*>(acc_v);
    for (int64_t r = 0; r < rows; ++r) {
      const S* x = in + r * stride;
      int64_t l = 0;
      for (; l + kN <= lanes; l += kN) {
        L::StoreAcc(acc + l, L::Apply(Op(), L::LoadAcc(acc + l), M::Load(x + l)));
      }
      for (; l < lanes; ++l) acc[l] = Op::Apply(acc[l], M::LoadScalar(x[l]));
    }
  }

  static ScanFns Fns() { return ScanFns{&Line, &Rows, &ReduceLine, &ReduceRows, &Fence}; }
};

template <typename S, typename A, typename Op>
std::array<ScanFns, 2> KindFns() {
  return {ScanLoops<S, A, Op, false>::Fns(), ScanLoops<S, A, Op, true>::Fns()};
}

inline ScanTable MakeScanTable() {
  ScanTable table;
  table[kF32Sum] = KindFns<float, float, Add>();
  table[kF16Sum] = KindFns<uint16_t, float, Add>();
  table[kB32Sum] = KindFns<uint32_t, uint32_t, Add>();
  table[kB64Sum] = KindFns<uint64_t, uint64_t, Add>();
  table[kF32Product] = KindFns<float, float, Multiply>();
  table[kF16Product] = KindFns<uint16_t, float, Multiply>();
  table[kU32Product] = KindFns<uint32_t, uint32_t, Multiply>();
  table[kU16Product] = KindFns<uint16_t, uint32_t, Multiply>();
  return table;
}

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
//     using Idx, Mask; Idx MakeIdx(const int*); Mask MakeMask(uint32_t bits);
//     V Select(V v, Idx idx, Mask m, V fill)     // lane j: v[idx[j]] if bit j
//                                                // of m, else fill[j]
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

  // One element, sequentially. The input is read before the output is
  // written, so that x == y (in place) works.
  static void Step(const S* x, S* y, A& acc) {
    if constexpr (kExclusive) {
      const A value = M::LoadScalar(*x);
      *y = M::StoreScalar(acc);
      acc = Op::Apply(acc, value);
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

  // Stream (scan_simd.h): interleaved lines of `stride` elements, restarting
  // every `segment` elements. A vector holds kN consecutive elements of the
  // stream, so element j of a vector follows element j - stride: an
  // in-register prefix with shifts of stride, 2 * stride, 4 * stride, ...
  // (masked so that nothing crosses a segment start), then each lane is
  // combined with the running value of its line, which is lane
  // kN - stride + j % stride of the previous vector's result whatever the
  // vector's position. Only the masks depend on the position (in-segment
  // offsets repeat every segment / gcd(segment, kN) vectors), so they are
  // tabulated per phase; with no segment there is a single phase. The
  // phases are stored in the order the vectors meet them and stepped
  // through with a counter, not a next-phase index read from the table (a
  // load in a chain through every vector). What bounds the loop is the
  // running value, whose permute and combine wait for the previous step's
  // (about 8 cycles on Zen 3): hence two vectors a step (StreamVectors).
  static constexpr int kLog = kN >= 16 ? 4 : kN >= 8 ? 3 : kN >= 4 ? 2 : kN >= 2 ? 1 : 0;
  static constexpr int64_t kMaxSegment = 4 * kN;
  // A stream shorter than this many vectors runs element by element: its
  // tables (a few hundred instructions a phase) and the running values'
  // set-up cost more than the vectors save (BM_CpuScanShortRows).
  static constexpr int64_t kMinStreamVectors = 16;
  using Idx = typename L::Idx;
  using Mask = typename L::Mask;

  struct Phase {
    Mask shift[kLog > 0 ? kLog : 1];
    Mask carry, exclusive;
    // As the second vector of a pair (StreamVectors): the lanes whose line
    // runs on from before the first vector, through it, into this one.
    Mask carry_through;
  };

  struct StreamTables {
    int shifts = 0;
    Idx shift[kLog > 0 ? kLog : 1];
    Idx carry, exclusive;
    // Lane j of a pair's second vector: the lane of the running value that
    // its line's carry through the first vector comes from.
    Idx carry_through;
    int cycle = 0;              // phases met before they repeat
    Phase phases[kMaxSegment];  // in the order the vectors meet them
  };

  // Tables for vectors starting at stream offset `first`: phases[0] is the
  // first vector's.
  static void BuildTables(int64_t w, int64_t segment, int64_t first, StreamTables& t) {
    int idx[kN];
    for (int64_t s = w; s < kN; s *= 2) {
      for (int j = 0; j < kN; ++j) idx[j] = j >= s ? static_cast<int>(j - s) : 0;
      t.shift[t.shifts++] = L::MakeIdx(idx);
    }
    // Lane j carries from the previous vector when its line began before
    // this vector, that is when its offset in its segment reaches past the
    // lanes of its line within the vector: w * (j / w + 1).
    int64_t carry_from[kN];
    int carry_lane[kN];  // lane of the previous vector lane j carries from
    for (int j = 0; j < kN; ++j) {
      carry_lane[j] = static_cast<int>(kN - w + j % w);
      carry_from[j] = w * (j / w + 1);
    }
    t.carry = L::MakeIdx(carry_lane);
    for (int j = 0; j < kN; ++j) idx[j] = carry_lane[carry_lane[j]];
    t.carry_through = L::MakeIdx(idx);
    uint32_t carry_bits[kMaxSegment];
    for (int j = 0; j < kN; ++j) idx[j] = j >= w ? static_cast<int>(j - w) : 0;
    t.exclusive = L::MakeIdx(idx);
    const int64_t start = segment ? first % segment : 0;
    for (int64_t phase = start;;) {
      // Offset of lane j within its segment (no segment: unbounded), counted
      // up and wrapped rather than divided: a division per lane and phase
      // made these tables cost as much as scanning a few thousand elements
      // (a line of 31 has 31 phases).
      int64_t pos[kN];
      for (int64_t j = 0, offset = phase; j < kN; ++j) {
        pos[j] = segment ? offset : INT64_MAX;
        if (++offset == segment) offset = 0;
      }
      Phase& p = t.phases[t.cycle++];
      int k = 0;
      for (int64_t s = w; s < kN; s *= 2, ++k) {
        uint32_t bits = 0;
        for (int64_t j = s; j < kN; ++j) bits |= uint32_t{pos[j] >= s} << j;
        p.shift[k] = L::MakeMask(bits);
      }
      uint32_t carry = 0, exclusive = 0;
      for (int64_t j = 0; j < kN; ++j) {
        carry |= uint32_t{pos[j] >= carry_from[j]} << j;
        exclusive |= uint32_t{j >= w && pos[j] >= w} << j;
      }
      p.carry = L::MakeMask(carry);
      p.exclusive = L::MakeMask(exclusive);
      carry_bits[t.cycle - 1] = carry;
      const int64_t next = segment ? (phase + kN) % segment : 0;
      if (next == start) break;
      phase = next;
    }
    for (int i = 0; i < t.cycle; ++i) {
      const uint32_t before = carry_bits[(i + t.cycle - 1) % t.cycle];
      uint32_t through = 0;
      for (int j = 0; j < kN; ++j) {
        through |= ((carry_bits[i] >> j) & (before >> carry_lane[j]) & 1u) << j;
      }
      t.phases[i].carry_through = L::MakeMask(through);
    }
  }

  // Vectors at stream offsets [q, q + vectors * kN); `prev` is the previous
  // vector's inclusive result.
  //
  // Two vectors a step: the second's prefix takes the first's (without the
  // running value) first, and then the running value through both
  // (carry_through), so each step waits for one permute and one combine of
  // the running value where a vector a step waited for one each: the chain,
  // not the arithmetic, bounds this loop.
  template <bool kStore, bool kReverse, bool kNt>
  static void StreamVectors(const S* in, S* out, int64_t n, int64_t q, int64_t vectors,
                            const StreamTables& t, V& prev) {
    const V id = VIdentity();
    auto load = [&](int64_t at, const Phase& p) {
      V x = M::Load(in + (kReverse ? n - at - kN : at));
      if constexpr (kReverse) x = L::Reverse(x);
      for (int k = 0; k < kLog && k < t.shifts; ++k) {
        x = L::Apply(Op(), x, L::Select(x, t.shift[k], p.shift[k], id));
      }
      return x;
    };
    // `result` is the inclusive scan of the vector at `at`, `carry` what came
    // into it from before.
    auto store = [&](int64_t at, const Phase& p, V result, V carry) {
      if constexpr (kStore) {
        V y = result;
        if constexpr (kExclusive) y = L::Select(result, t.exclusive, p.exclusive, carry);
        if constexpr (kReverse) y = L::Reverse(y);
        S* to = out + (kReverse ? n - at - kN : at);
        if constexpr (kNt) {
          M::StoreNt(to, y);
        } else {
          M::Store(to, y);
        }
      } else {
        (void)at, (void)p, (void)result, (void)carry;
      }
    };
    V last = prev;
    int phase = 0;  // index into t.phases
    auto next_phase = [&] {
      const Phase& p = t.phases[phase];
      if (++phase == t.cycle) phase = 0;
      return &p;
    };
    int64_t v = 0;
    for (; v + 2 <= vectors; v += 2, q += 2 * kN) {
      const Phase& p0 = *next_phase();
      const Phase& p1 = *next_phase();
      const V x0 = load(q, p0);
      const V x1 = L::Apply(Op(), L::Select(x0, t.carry, p1.carry, id), load(q + kN, p1));
      const V carry0 = L::Select(last, t.carry, p0.carry, id);
      const V last0 = L::Apply(Op(), carry0, x0);
      last = L::Apply(Op(), L::Select(last, t.carry_through, p1.carry_through, id), x1);
      store(q, p0, last0, carry0);
      if constexpr (kStore && kExclusive) {
        store(q + kN, p1, last, L::Select(last0, t.carry, p1.carry, id));
      } else {
        store(q + kN, p1, last, id);
      }
    }
    if (v < vectors) {
      const Phase& p = *next_phase();
      const V carry = L::Select(last, t.carry, p.carry, id);
      last = L::Apply(Op(), carry, load(q, p));
      store(q, p, last, carry);
    }
    prev = last;
  }

  static void Stream(const void* in_v, void* out_v, int64_t n, int64_t w, int64_t segment,
                     bool reverse, void* acc_v, bool nt) {
    const S* in = static_cast<const S*>(in_v);
    S* out = static_cast<S*>(out_v);
    A* acc = static_cast<A*>(acc_v);
    if (segment > kMaxSegment) {
      // Longer segments have too many phases to tabulate: one at a time.
      for (int64_t first = 0; first < n; first += segment) {
        std::fill(acc, acc + w, Op::template Identity<A>());
        Stream(in + first, out ? out + first : nullptr, segment, w, 0, reverse, acc, nt);
      }
      return;
    }
    // Memory index of stream offset q.
    auto mem = [&](int64_t q) { return reverse ? n - 1 - q : q; };
    if (n < kMinStreamVectors * kN) {
      StreamScalar(in, out, n, w, segment, reverse, acc, 0, n);
      return;
    }
    int64_t q = 0;
    if (out == nullptr) nt = false;
    if (nt) {
      // Scalar head up to the first output vector aligned for streaming.
      auto aligned = [&](int64_t q) { return Aligned(reverse ? out + (n - q) : out + q); };
      int64_t head = 0;
      while (head < n && head < kN && !aligned(head)) ++head;
      StreamScalar(in, out, n, w, segment, reverse, acc, 0, head);
      q = head;
      nt = aligned(q);
    }
    const int64_t vectors = (n - q) / kN;
    if (vectors > 0) {
      StreamTables t;
      BuildTables(w, segment, q, t);
      // The running value of each line as the "previous vector": lane
      // kN - w + j holds stream offset q - w + j.
      A lanes[kN];
      for (int64_t j = 0; j < kN; ++j) lanes[j] = Op::template Identity<A>();
      for (int64_t j = 0; j < w; ++j) {
        const int64_t m = mem(q - w + j);
        lanes[kN - w + j] = acc[((m % w) + w) % w];
      }
      V prev = L::LoadAcc(lanes);
      if (out == nullptr) {
        if (reverse) {
          StreamVectors<false, true, false>(in, out, n, q, vectors, t, prev);
        } else {
          StreamVectors<false, false, false>(in, out, n, q, vectors, t, prev);
        }
      } else if (reverse) {
        if (nt) {
          StreamVectors<true, true, true>(in, out, n, q, vectors, t, prev);
        } else {
          StreamVectors<true, true, false>(in, out, n, q, vectors, t, prev);
        }
      } else if (nt) {
        StreamVectors<true, false, true>(in, out, n, q, vectors, t, prev);
      } else {
        StreamVectors<true, false, false>(in, out, n, q, vectors, t, prev);
      }
      q += vectors * kN;
      L::StoreAcc(lanes, prev);
      for (int64_t j = 0; j < w; ++j) acc[mem(q - w + j) % w] = lanes[kN - w + j];
    }
    StreamScalar(in, out, n, w, segment, reverse, acc, q, n);
  }

  // Stream offsets [q, end) of Stream's arguments one element at a time
  // (a head or tail around the vectors, or a stream too short for them),
  // each element's line and segment offset counted along, not divided.
  static void StreamScalar(const S* in, S* out, int64_t n, int64_t w, int64_t segment, bool reverse,
                           A* acc, int64_t q, int64_t end) {
    if (q >= end) return;
    int64_t m = reverse ? n - 1 - q : q;  // memory index
    int64_t line = m % w;
    int64_t offset = segment != 0 ? q % segment : 0;
    for (; q < end; ++q) {
      A& a = acc[line];
      if (segment != 0 && offset < w) a = Op::template Identity<A>();
      if (out != nullptr) {
        Step(in + m, out + m, a);
      } else {
        a = Op::Apply(a, M::LoadScalar(in[m]));
      }
      if (reverse) {
        --m;
        line = line == 0 ? w - 1 : line - 1;
      } else {
        ++m;
        if (++line == w) line = 0;
      }
      if (segment != 0 && ++offset == segment) offset = 0;
    }
  }

  static ScanFns Fns() {
    return ScanFns{&Line, &Rows, &ReduceLine, &ReduceRows, &Stream, &Fence, kN};
  }
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

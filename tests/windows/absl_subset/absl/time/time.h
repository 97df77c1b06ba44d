// Windows cross-build stand-in for Abseil (see ../../README.md).
//
// Duration is a signed count of nanoseconds (Abseil keeps quarter nanoseconds
// over a far wider range; +-292 years is plenty here), checked with GCC's
// overflow builtins (the stand-in is only for mingw-w64 GCC). The two extreme values
// stand for +-InfiniteDuration(), and arithmetic saturates at them as
// Abseil's does: an infinite operand stays infinite (the left one wins when
// both are), a finite result that overflows becomes infinite. Code relies on
// that, e.g. InfiniteFuture() + timeout stays InfiniteFuture(). Time is a
// Duration since the Unix epoch, so InfiniteFuture() compares greater than any
// finite Time and InfinitePast() less.
#ifndef DMLSERVE_ABSL_SUBSET_TIME_TIME_H_
#define DMLSERVE_ABSL_SUBSET_TIME_TIME_H_

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>

namespace absl {

class Duration {
 public:
  constexpr Duration() = default;

  Duration& operator+=(Duration d) { return *this = Add(*this, d); }
  Duration& operator-=(Duration d) { return *this = Add(*this, -d); }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  Duration& operator*=(T n) {
    return *this = Mul(*this, static_cast<int64_t>(n));
  }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  Duration& operator/=(T n) {
    return *this = Div(*this, static_cast<int64_t>(n));
  }

  constexpr Duration operator-() const {
    // -(+inf) is -inf; every finite value negates exactly (the range is symmetric).
    return Duration(ns_ == kPosInf ? kNegInf : ns_ == kNegInf ? kPosInf : -ns_);
  }

  friend constexpr bool operator==(Duration a, Duration b) { return a.ns_ == b.ns_; }
  friend constexpr bool operator!=(Duration a, Duration b) { return a.ns_ != b.ns_; }
  friend constexpr bool operator<(Duration a, Duration b) { return a.ns_ < b.ns_; }
  friend constexpr bool operator<=(Duration a, Duration b) { return a.ns_ <= b.ns_; }
  friend constexpr bool operator>(Duration a, Duration b) { return a.ns_ > b.ns_; }
  friend constexpr bool operator>=(Duration a, Duration b) { return a.ns_ >= b.ns_; }

  friend Duration operator+(Duration a, Duration b) { return a += b; }
  friend Duration operator-(Duration a, Duration b) { return a -= b; }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  friend Duration operator*(Duration d, T n) {
    return d *= n;
  }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  friend Duration operator*(T n, Duration d) {
    return d *= n;
  }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  friend Duration operator/(Duration d, T n) {
    return d /= n;
  }
  // How many whole `b` fit in `a`, truncated; saturates like Abseil's IDivDuration.
  friend int64_t operator/(Duration a, Duration b) {
    if (b.ns_ == 0 || a.infinite() || b.infinite()) {
      if (!a.infinite() && b.infinite()) return 0;
      return (a.ns_ < 0) != (b.ns_ < 0) ? kNegInf : kPosInf;
    }
    return a.ns_ / b.ns_;
  }

  // Internal: the representation, for the functions below.
  static constexpr Duration FromNanos(int64_t ns) { return Duration(ns); }
  constexpr int64_t nanos() const { return ns_; }
  constexpr bool infinite() const { return ns_ == kPosInf || ns_ == kNegInf; }

  static constexpr int64_t kPosInf = std::numeric_limits<int64_t>::max();
  static constexpr int64_t kNegInf = std::numeric_limits<int64_t>::min();

 private:
  explicit constexpr Duration(int64_t ns) : ns_(ns) {}

  static Duration Add(Duration a, Duration b) {
    if (a.infinite()) return a;
    if (b.infinite()) return b;
    int64_t sum;
    if (__builtin_add_overflow(a.ns_, b.ns_, &sum) || sum == kPosInf || sum == kNegInf) {
      return Duration(b.ns_ > 0 ? kPosInf : kNegInf);
    }
    return Duration(sum);
  }
  static Duration Mul(Duration d, int64_t n) {
    const bool negative = (d.ns_ < 0) != (n < 0);
    if (d.infinite()) return Duration(negative ? kNegInf : kPosInf);
    int64_t product;
    if (__builtin_mul_overflow(d.ns_, n, &product) || product == kPosInf || product == kNegInf) {
      return Duration(negative ? kNegInf : kPosInf);
    }
    return Duration(product);
  }
  static Duration Div(Duration d, int64_t n) {
    const bool negative = (d.ns_ < 0) != (n < 0);
    if (d.infinite() || n == 0) return Duration(negative ? kNegInf : kPosInf);
    return Duration(d.ns_ / n);  // finite ns_ is never INT64_MIN, so no overflow
  }

  int64_t ns_ = 0;
};

constexpr Duration ZeroDuration() { return Duration(); }
constexpr Duration InfiniteDuration() { return Duration::FromNanos(Duration::kPosInf); }
inline Duration AbsDuration(Duration d) { return d < ZeroDuration() ? -d : d; }

namespace subset_internal {

// `n` units of `unit_ns` nanoseconds, saturating at +-infinity.
template <typename T>
Duration FromUnits(T n, int64_t unit_ns) {
  if constexpr (std::is_floating_point_v<T>) {
    const double ns = static_cast<double>(n) * static_cast<double>(unit_ns);
    if (std::isnan(ns) || ns >= 9.2e18) return InfiniteDuration();  // NaN: as Abseil
    if (ns <= -9.2e18) return -InfiniteDuration();
    return Duration::FromNanos(static_cast<int64_t>(ns));
  } else {
    static_assert(std::is_integral_v<T>, "Duration units take an integer or a floating count");
    int64_t ns;
    if (__builtin_mul_overflow(n, unit_ns, &ns) || ns == Duration::kPosInf ||
        ns == Duration::kNegInf) {
      return n > 0 ? InfiniteDuration() : -InfiniteDuration();
    }
    return Duration::FromNanos(ns);
  }
}

// Whole `unit_ns` in `d`, truncated toward zero; infinite saturates.
inline int64_t ToUnits(Duration d, int64_t unit_ns) {
  if (d.infinite()) return d.nanos();
  return d.nanos() / unit_ns;
}
inline double ToDoubleUnits(Duration d, double unit_ns) {
  if (d.infinite()) return d > ZeroDuration() ? HUGE_VAL : -HUGE_VAL;
  return static_cast<double>(d.nanos()) / unit_ns;
}

}  // namespace subset_internal

template <typename T>
Duration Nanoseconds(T n) {
  return subset_internal::FromUnits(n, 1);
}
template <typename T>
Duration Microseconds(T n) {
  return subset_internal::FromUnits(n, 1000);
}
template <typename T>
Duration Milliseconds(T n) {
  return subset_internal::FromUnits(n, 1000 * 1000);
}
template <typename T>
Duration Seconds(T n) {
  return subset_internal::FromUnits(n, 1000 * 1000 * 1000);
}
template <typename T>
Duration Minutes(T n) {
  return subset_internal::FromUnits(n, int64_t{60} * 1000 * 1000 * 1000);
}
template <typename T>
Duration Hours(T n) {
  return subset_internal::FromUnits(n, int64_t{3600} * 1000 * 1000 * 1000);
}

inline int64_t ToInt64Nanoseconds(Duration d) { return subset_internal::ToUnits(d, 1); }
inline int64_t ToInt64Microseconds(Duration d) { return subset_internal::ToUnits(d, 1000); }
inline int64_t ToInt64Milliseconds(Duration d) { return subset_internal::ToUnits(d, 1000000); }
inline int64_t ToInt64Seconds(Duration d) { return subset_internal::ToUnits(d, 1000000000); }
inline double ToDoubleNanoseconds(Duration d) { return subset_internal::ToDoubleUnits(d, 1); }
inline double ToDoubleMicroseconds(Duration d) { return subset_internal::ToDoubleUnits(d, 1e3); }
inline double ToDoubleMilliseconds(Duration d) { return subset_internal::ToDoubleUnits(d, 1e6); }
inline double ToDoubleSeconds(Duration d) { return subset_internal::ToDoubleUnits(d, 1e9); }

// As Abseil: "inf", "0", "1h2m3.5s", and below a second the largest of
// ms/us/ns that is at least 1 ("1.5ms", "250ns").
inline std::string FormatDuration(Duration d) {
  if (d == InfiniteDuration()) return "inf";
  if (d == -InfiniteDuration()) return "-inf";
  if (d == ZeroDuration()) return "0";
  std::string out = d < ZeroDuration() ? "-" : "";
  uint64_t ns =
      d < ZeroDuration() ? 0 - static_cast<uint64_t>(d.nanos()) : static_cast<uint64_t>(d.nanos());
  // `whole` units and `fraction` of a unit of `unit_ns`, trailing zeros dropped.
  auto append = [&out](uint64_t whole, uint64_t fraction, uint64_t unit_ns, const char* unit) {
    out += std::to_string(whole);
    if (fraction != 0) {
      int digits = 0;
      for (uint64_t u = unit_ns; u > 1; u /= 10) ++digits;
      char buf[24];
      std::snprintf(buf, sizeof(buf), "%0*llu", digits, static_cast<unsigned long long>(fraction));
      std::string text = buf;
      text.erase(text.find_last_not_of('0') + 1);
      out += "." + text;
    }
    out += unit;
  };
  constexpr uint64_t kSecond = 1000000000, kHour = 3600 * kSecond, kMinute = 60 * kSecond;
  if (ns >= kSecond) {
    if (ns >= kHour) {
      out += std::to_string(ns / kHour) + "h";
      ns %= kHour;
    }
    if (ns >= kMinute) {
      out += std::to_string(ns / kMinute) + "m";
      ns %= kMinute;
    }
    if (ns != 0) append(ns / kSecond, ns % kSecond, kSecond, "s");
  } else if (ns >= 1000000) {
    append(ns / 1000000, ns % 1000000, 1000000, "ms");
  } else if (ns >= 1000) {
    append(ns / 1000, ns % 1000, 1000, "us");
  } else {
    append(ns, 0, 1, "ns");
  }
  return out;
}
inline std::ostream& operator<<(std::ostream& os, Duration d) { return os << FormatDuration(d); }

class Time {
 public:
  constexpr Time() = default;  // the Unix epoch, as Abseil's

  Time& operator+=(Duration d) { return *this = Time(since_epoch_ + d); }
  Time& operator-=(Duration d) { return *this = Time(since_epoch_ - d); }

  friend constexpr bool operator==(Time a, Time b) { return a.since_epoch_ == b.since_epoch_; }
  friend constexpr bool operator!=(Time a, Time b) { return a.since_epoch_ != b.since_epoch_; }
  friend constexpr bool operator<(Time a, Time b) { return a.since_epoch_ < b.since_epoch_; }
  friend constexpr bool operator<=(Time a, Time b) { return a.since_epoch_ <= b.since_epoch_; }
  friend constexpr bool operator>(Time a, Time b) { return a.since_epoch_ > b.since_epoch_; }
  friend constexpr bool operator>=(Time a, Time b) { return a.since_epoch_ >= b.since_epoch_; }

  friend Time operator+(Time t, Duration d) { return t += d; }
  friend Time operator+(Duration d, Time t) { return t += d; }
  friend Time operator-(Time t, Duration d) { return t -= d; }
  // InfiniteFuture() - t is InfiniteDuration() for any finite t.
  friend Duration operator-(Time a, Time b) { return a.since_epoch_ - b.since_epoch_; }

  // Internal: the representation, for the functions below.
  static constexpr Time SinceEpoch(Duration d) { return Time(d); }
  constexpr Duration since_epoch() const { return since_epoch_; }

 private:
  explicit constexpr Time(Duration since_epoch) : since_epoch_(since_epoch) {}

  Duration since_epoch_;
};

constexpr Time UnixEpoch() { return Time(); }
constexpr Time InfiniteFuture() { return Time::SinceEpoch(InfiniteDuration()); }
constexpr Time InfinitePast() { return Time::SinceEpoch(-InfiniteDuration()); }
inline Time FromUnixNanos(int64_t ns) { return Time::SinceEpoch(Nanoseconds(ns)); }
inline int64_t ToUnixNanos(Time t) { return ToInt64Nanoseconds(t.since_epoch()); }
inline int64_t ToUnixMicros(Time t) { return ToInt64Microseconds(t.since_epoch()); }
inline int64_t ToUnixMillis(Time t) { return ToInt64Milliseconds(t.since_epoch()); }
inline int64_t ToUnixSeconds(Time t) { return ToInt64Seconds(t.since_epoch()); }

}  // namespace absl

#endif  // DMLSERVE_ABSL_SUBSET_TIME_TIME_H_

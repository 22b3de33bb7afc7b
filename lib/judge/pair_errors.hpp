// The observed errors of one (candidate, reference) pair, as the accuracy judge defines them
// (ws1/judge.hpp). Two forms of the same definitions:
//  - the general ones (abs_error, rel_error, ulp_error, error_ratio) take any pair without NaN;
//  - finite_errors() takes a pair of finite floats only, the overwhelmingly common case, and
//    is written so that it inlines into the judge's element loop: no calls into other
//    translation units for bf16 and f32, and the tolerance decision shares |c - r| and the
//    bound with the statistics. Every value it returns equals, bit for bit, what the general
//    form returns for the same pair (the comments say why, line by line).
// Included only by accuracy.cpp, which is built with -ffp-contract=off like within_tolerance.cpp:
// the doubles below must be rounded exactly as written, with no compiler-made FMA.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "ws1/accuracy_parts.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"

namespace ws1::judge_detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Candidate and reference hold the same finite value with the same bits: abs, rel and ulp
// errors are all exactly 0 and the element passes any row (atol, rtol >= 0).
inline bool same_finite(float c, float r) {
  return std::isfinite(c) && std::bit_cast<std::uint32_t>(c) == std::bit_cast<std::uint32_t>(r);
}

// ---- the general form (any pair without NaN) --------------------------------------------------

inline double abs_error(float c, float r) {
  if (c == r) return 0;  // also equal infinities, and +0 against -0
  if (std::isinf(c) || std::isinf(r)) return kInf;
  return std::fabs(static_cast<double>(c) - static_cast<double>(r));
}

inline double rel_error(float c, float r) {
  const double a = abs_error(c, r);
  if (a == 0 || std::isinf(a)) return a;
  return a / std::max(std::fabs(static_cast<double>(r)), kRelErrorDenominatorFloor);
}

// ulp_distance() rounds the reference to the candidate dtype (nearest even) before counting.
inline double ulp_error(float c, float r, DType candidate) {
  return static_cast<double>(ulp_distance(c, r, candidate));
}

// |c - r| / allowed of a pair without NaN, with `ok` the exact decision. 0 / 0 is 0 (an exact
// answer where nothing is allowed) and x / 0 is inf; a failing infinite pairing has an
// infinite error, so inf. The quotient is rounded in double, so it is clamped onto the side of
// 1 the exact decision is on: <= 1 for a pass, >= 1 for a violation (exactly 1 can be either;
// WorstElement::violates tells).
inline double error_ratio(double abs_err, double allowed, bool ok) {
  double ratio = 0;
  if (abs_err == 0)
    ratio = 0;
  else if (allowed == 0 || std::isinf(abs_err))
    ratio = kInf;
  else
    ratio = abs_err / allowed;
  return ok ? std::min(ratio, 1.0) : std::max(ratio, 1.0);
}

// ---- the finite form --------------------------------------------------------------------------

// Signed-magnitude bits (sign bit `sign_bit`) mapped to a signed integer that orders like the
// values, with +0 and -0 both at 0: the ulp distance of two such encodings is the difference of
// their keys. This is ulp_distance()'s rule (a sum of magnitudes across zero, a difference on
// one side) written without a branch.
inline std::int64_t ulp_key(std::uint32_t bits, std::uint32_t sign_bit) {
  const auto mag = static_cast<std::int64_t>(bits & (sign_bit - 1));
  return (bits & sign_bit) != 0 ? -mag : mag;
}

// to_bf16(f).bits for a float that is not NaN: round the low 16 bits away, to nearest, ties to
// even. Adding 0x7fff plus the kept part's lowest bit carries into the kept bits exactly when
// the dropped half is above 0x8000, or equal to it with an odd kept part: numeric.cpp's
// shift_right_rne(bits, 16). The carry cannot leave bit 31 (the largest non-NaN pattern is
// -inf, 0xff800000), and from the largest finite value it reaches infinity, as there.
inline std::uint32_t bf16_bits_rne(std::uint32_t f32_bits) {
  return (f32_bits + 0x7fffu + ((f32_bits >> 16) & 1u)) >> 16;
}

// The signed ulp distance of finite c (already a value of ct) and finite r: the candidate
// dtype's steps from r rounded to it (nearest even) to c, positive where c lies above, clamped
// (accuracy_parts.hpp). Its magnitude is ulp_distance(c, r, ct), before the clamp.
template <DType CT>
inline std::int64_t finite_signed_ulp(float c, float r) {
  const std::uint32_t cb = std::bit_cast<std::uint32_t>(c), rb = std::bit_cast<std::uint32_t>(r);
  if constexpr (CT == DType::kBF16) {
    // c is a widened bf16: its low 16 bits are 0, so to_bf16(c) is its top half.
    return ulp_key(cb >> 16, 0x8000u) - ulp_key(bf16_bits_rne(rb), 0x8000u);
  } else if constexpr (CT == DType::kF32) {
    return clamp_signed_ulp(ulp_key(cb, 0x8000'0000u) - ulp_key(rb, 0x8000'0000u));
  } else {
    // f16: the library's rounding (not a hot path here); c == r only when the distance is 0.
    const auto d = static_cast<std::int64_t>(ulp_distance(c, r, CT));
    return c < r ? -d : d;
  }
}

// Finite r rounded to the candidate dtype CT (nearest even), as a float: the value a correctly
// rounded candidate holds, from which finite_signed_ulp() counts.
template <DType CT>
inline float rounded_to(float r) {
  if constexpr (CT == DType::kBF16)
    return std::bit_cast<float>(bf16_bits_rne(std::bit_cast<std::uint32_t>(r)) << 16);
  else if constexpr (CT == DType::kF32)
    return r;
  else
    return round_fp16(r);
}

// ulp_distance(c, r, ct) for finite c (already a value of ct) and finite r.
template <DType CT>
inline double finite_ulp(float c, float r) {
  if constexpr (CT == DType::kF32) {
    const std::uint32_t cb = std::bit_cast<std::uint32_t>(c), rb = std::bit_cast<std::uint32_t>(r);
    const std::int64_t d = ulp_key(cb, 0x8000'0000u) - ulp_key(rb, 0x8000'0000u);
    return static_cast<double>(d < 0 ? -d : d);  // unclamped
  } else if constexpr (CT == DType::kBF16) {
    const std::int64_t d = finite_signed_ulp<CT>(c, r);
    return static_cast<double>(d < 0 ? -d : d);
  } else {
    return ulp_error(c, r, CT);
  }
}

// The three statistics of a pair of finite floats, equal to the general form's:
//  - abs: abs_error() returns 0 for c == r, and |c - r| in double otherwise; for finite floats
//    the double difference is exact, and it is +-0 exactly when c == r, which fabs makes +0.
//  - rel: rel_error() returns a for a == 0, where a / max(...) is +0 as well (the denominator
//    is >= 1e-12 > 0); a is never infinite here.
//  - ulp: finite_ulp() above.
//  - sulp: finite_signed_ulp() above (the bias's term).
struct FiniteStats {
  double abs, rel, ulp;
  std::int64_t sulp;
};

template <DType CT>
inline FiniteStats finite_stats(float c, float r) {
  const double cd = c, rd = r;
  const double abs = std::fabs(cd - rd);
  const double rel = abs / std::max(std::fabs(rd), kRelErrorDenominatorFloor);
  if constexpr (CT == DType::kF32) {
    return {abs, rel, finite_ulp<CT>(c, r), finite_signed_ulp<CT>(c, r)};
  } else {
    const std::int64_t d = finite_signed_ulp<CT>(c, r);
    return {abs, rel, CT == DType::kBF16 ? static_cast<double>(d < 0 ? -d : d) : finite_ulp<CT>(c, r), d};
  }
}

// allowed = atol + rtol * |r| for a finite r: the same expression as judge_accuracy()'s and
// within_tolerance()'s bound.
inline double finite_allowed(float r, const Tolerance& tol) {
  return tol.atol + tol.rtol * std::fabs(static_cast<double>(r));
}

// within_tolerance()'s own fast path, on the same |c - r| (abs_err) and bound (allowed) as it
// computes for finite c, r: the exact decision, or nothing in the narrow band around the bound
// where the rounded comparison cannot decide (there within_tolerance() itself must be asked).
// The tolerance must be finite and non-negative, as judge_accuracy() checks before any
// element is visited.
inline std::optional<bool> fast_decision(double abs_err, double allowed) {
  const double band = allowed * 0x1p-49;
  if (abs_err < allowed - band) return true;
  if (abs_err > allowed + band) return false;
  return std::nullopt;
}

// The statistics, the allowance and the exact decision of a pair of finite floats (the ratio
// is error_ratio(stats.abs, allowed, ok), as for any pair).
struct FiniteErrors {
  FiniteStats stats;
  double allowed;
  bool ok;
};

template <DType CT>
inline FiniteErrors finite_errors(float c, float r, const Tolerance& tol) {
  FiniteErrors e{};
  e.stats = finite_stats<CT>(c, r);
  e.allowed = finite_allowed(r, tol);
  const std::optional<bool> fast = fast_decision(e.stats.abs, e.allowed);
  e.ok = fast ? *fast : within_tolerance(c, r, tol);
  return e;
}

}  // namespace ws1::judge_detail

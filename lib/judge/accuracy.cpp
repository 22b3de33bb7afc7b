// The accuracy comparator of spec §4.1 and its error statistics (definitions in ws1/judge.hpp).
//
// One pass decides every element and gathers counts, sums, maxima and the worst element; the
// percentiles need the values themselves, so each statistic is then collected into one float
// buffer (reused) and ranked with nth_element. The buffer is 4 bytes per element, whatever the
// number of statistics; the tensors are walked in place, so a non-contiguous view is not copied.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

#include "elements.hpp"
#include "percentile.hpp"
#include "ws1/judge.hpp"

namespace ws1 {
namespace {

using judge_detail::for_each_pair;
using judge_detail::load_float;

constexpr double kInf = std::numeric_limits<double>::infinity();

bool candidate_dtype_ok(DType t) {
  return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32;
}

// Why the pair cannot be compared element by element, or nothing.
std::optional<std::string> incomparable(const Tensor& c, const Tensor& r, const Tolerance& tol) {
  if (!candidate_dtype_ok(c.dtype()))
    return fmt::format("candidate dtype {} is not bfloat16, float16 or float32",
                       dtype_contract_name(c.dtype()));
  if (r.dtype() != DType::kF32)
    return fmt::format(
        "reference dtype {} is not float32 (spec §3.1: the reference is computed and kept in "
        "FP32)",
        dtype_contract_name(r.dtype()));
  if (c.shape() != r.shape())
    return fmt::format("candidate shape {} differs from the reference shape {}",
                       shape_string(c.shape()), shape_string(r.shape()));
  if (!(tol.atol >= 0 && tol.rtol >= 0) || std::isinf(tol.atol) || std::isinf(tol.rtol))
    return fmt::format("tolerance atol {} rtol {} is not finite and non-negative", tol.atol,
                       tol.rtol);
  return std::nullopt;
}

// Candidate and reference hold the same finite value with the same bits: abs, rel and ulp
// errors are all exactly 0 and the element passes any row (atol, rtol >= 0).
inline bool same_finite(float c, float r) {
  return std::isfinite(c) && std::bit_cast<std::uint32_t>(c) == std::bit_cast<std::uint32_t>(r);
}

// The three observed errors of a pair without NaN.
double abs_error(float c, float r) {
  if (c == r) return 0;  // also equal infinities, and +0 against -0
  if (std::isinf(c) || std::isinf(r)) return kInf;
  return std::fabs(static_cast<double>(c) - static_cast<double>(r));
}

double rel_error(float c, float r) {
  const double a = abs_error(c, r);
  if (a == 0 || std::isinf(a)) return a;
  return a / std::max(std::fabs(static_cast<double>(r)), kRelErrorDenominatorFloor);
}

// ulp_distance() rounds the reference to the candidate dtype (nearest even) before counting.
double ulp_error(float c, float r, DType candidate) {
  return static_cast<double>(ulp_distance(c, r, candidate));
}

// |c - r| / allowed of a pair without NaN, with `ok` the exact decision. 0 / 0 is 0 (an exact
// answer where nothing is allowed) and x / 0 is inf; a failing infinite pairing has an
// infinite error, so inf. The quotient is rounded in double, so it is clamped onto the side of
// 1 the exact decision is on: <= 1 for a pass, >= 1 for a violation (exactly 1 can be either;
// WorstElement::violates tells).
double error_ratio(double abs_err, double allowed, bool ok) {
  double ratio = 0;
  if (abs_err == 0)
    ratio = 0;
  else if (allowed == 0 || std::isinf(abs_err))
    ratio = kInf;
  else
    ratio = abs_err / allowed;
  return ok ? std::min(ratio, 1.0) : std::max(ratio, 1.0);
}

ErrorStats nan_stats() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {nan, nan, nan, nan};
}

}  // namespace

AccuracyTensor judge_accuracy(std::string name, const Tensor& candidate, const Tensor& reference,
                              const Tolerance& tol) {
  judge_detail::require_defined(candidate, "judge_accuracy", "candidate");
  judge_detail::require_defined(reference, "judge_accuracy", "reference");
  AccuracyTensor t;
  t.name = std::move(name);
  t.shape = candidate.shape();
  t.dtype = candidate.dtype();
  t.numel = candidate.numel();
  if (auto why = incomparable(candidate, reference, tol)) {
    t.comparable = false;
    t.notes.push_back(std::move(*why));
    return t;
  }
  const DType ct = candidate.dtype();
  const DType rt = reference.dtype();

  // Pass 1: decisions, counts, sums, maxima, worst element.
  std::int64_t candidate_nans = 0, reference_nans = 0, infinite = 0;
  double abs_sum = 0, rel_sum = 0, ulp_sum = 0;
  double abs_max = 0, rel_max = 0, ulp_max = 0;
  std::int64_t worst_flat = -1;
  WorstElement worst;
  // P99 / P99.9 of each error, selected exactly over two passes (percentile.hpp).
  judge_detail::RankSelector abs_rank, rel_rank, ulp_rank;
  for_each_pair(
      candidate, reference, [&](std::int64_t flat, const std::byte* pc, const std::byte* pr) {
        const float c = load_float(pc, ct), r = load_float(pr, rt);
        if (same_finite(c, r)) {  // every error is 0: only a first worst element to record
          abs_rank.count_zeros(1);
          rel_rank.count_zeros(1);
          ulp_rank.count_zeros(1);
          if (worst_flat < 0) {
            worst_flat = flat;
            worst = WorstElement{{}, c, r, tol.atol + tol.rtol * std::fabs(static_cast<double>(r)), 0.0, false};
          }
          return;
        }
        double allowed = 0, ratio = 0;
        bool violates = true;
        const bool nan = std::isnan(c) || std::isnan(r);
        if (nan) {
          ++t.nan_elements;
          ++t.violations;
          candidate_nans += std::isnan(c);
          reference_nans += std::isnan(r);
          allowed = std::isnan(r) ? r : std::isinf(r) ? kInf : tol.atol + tol.rtol * std::fabs(r);
          ratio = kInf;
        } else {
          const bool ok = within_tolerance(c, r, tol);
          violates = !ok;
          const double a = abs_error(c, r), rel = rel_error(c, r), u = ulp_error(c, r, ct);
          abs_sum += a;
          rel_sum += rel;
          ulp_sum += u;
          abs_rank.count(static_cast<float>(a));
          rel_rank.count(static_cast<float>(rel));
          ulp_rank.count(static_cast<float>(u));
          abs_max = std::max(abs_max, a);
          rel_max = std::max(rel_max, rel);
          ulp_max = std::max(ulp_max, u);
          if (std::isinf(c) || std::isinf(r)) {
            ++infinite;
            allowed = std::isinf(r) ? kInf : tol.atol + tol.rtol * std::fabs(r);
          } else {
            allowed = tol.atol + tol.rtol * std::fabs(static_cast<double>(r));
          }
          ratio = error_ratio(a, allowed, ok);
          if (!ok) ++t.violations;
        }
        // Largest ratio; at an equal ratio a violation outranks a pass (both can read 1.0);
        // otherwise the first in row-major order stays.
        if (worst_flat < 0 || ratio > worst.margin ||
            (ratio == worst.margin && violates && !worst.violates)) {
          worst_flat = flat;
          worst.candidate = c;
          worst.reference = r;
          worst.allowed = allowed;
          worst.margin = ratio;
          worst.violates = violates;
        }
      });
  if (worst_flat >= 0) {
    worst.index = judge_detail::unravel(worst_flat, t.shape);
    t.worst = std::move(worst);
  }

  const std::int64_t measured = t.numel - t.nan_elements;  // elements in the statistics
  if (measured == 0) {
    if (t.numel > 0) t.abs_error = t.rel_error = t.ulp_distance = nan_stats();
  } else {
    const auto n = static_cast<double>(measured);
    t.abs_error.max = abs_max;
    t.rel_error.max = rel_max;
    t.ulp_distance.max = ulp_max;
    t.abs_error.mean = abs_sum / n;
    t.rel_error.mean = rel_sum / n;
    t.ulp_distance.mean = ulp_sum / n;
    // Pass 2: the values in the buckets that hold the ranks.
    for (judge_detail::RankSelector* sel : {&abs_rank, &rel_rank, &ulp_rank}) sel->plan();
    for_each_pair(candidate, reference, [&](std::int64_t, const std::byte* pc, const std::byte* pr) {
      const float c = load_float(pc, ct), r = load_float(pr, rt);
      if (same_finite(c, r) || std::isnan(c) || std::isnan(r)) return;
      abs_rank.keep(static_cast<float>(abs_error(c, r)));
      rel_rank.keep(static_cast<float>(rel_error(c, r)));
      ulp_rank.keep(static_cast<float>(ulp_error(c, r, ct)));
    });
    const auto ranked = [](judge_detail::RankSelector& sel, ErrorStats& s) {
      const judge_detail::Percentiles p = sel.result();
      // A float rounding can land just above the double max: cap it there.
      s.p99 = std::min(static_cast<double>(p.p99), s.max);
      s.p999 = std::min(static_cast<double>(p.p999), s.max);
    };
    ranked(abs_rank, t.abs_error);
    ranked(rel_rank, t.rel_error);
    ranked(ulp_rank, t.ulp_distance);
  }

  if (t.nan_elements > 0)
    t.notes.push_back(fmt::format(
        "{} element(s) hold NaN (candidate {}, reference {}): a NaN never passes; each counts "
        "as a violation and none enters the error statistics",
        t.nan_elements, candidate_nans, reference_nans));
  if (infinite > 0)
    t.notes.push_back(fmt::format(
        "{} element(s) hold an infinity: the same infinity on both sides passes, any other "
        "pairing is a violation",
        infinite));
  return t;
}

Result<AccuracyTensor> judge_accuracy(const Contract& contract, std::string_view op,
                                      std::string name, const Tensor& candidate,
                                      const Tensor& reference, const Tolerance& tol) {
  judge_detail::require_defined(reference, "judge_accuracy", "reference");
  if (Status st = check_reference_dtype(contract, reference, op, name); !st) return st.error();
  return judge_accuracy(std::move(name), candidate, reference, tol);
}

Status check_reference_dtype(const Contract& contract, const Tensor& reference, std::string_view op,
                             std::string_view tensor) {
  const std::optional<DType> want = to_dtype(contract.policy.reference_dtype);
  if (want && reference.defined() && reference.dtype() == *want) return {};
  const std::string have =
      reference.defined() ? std::string(dtype_contract_name(reference.dtype())) : "none";
  return bad_input(contract.file, "policy.reference_dtype",
                   fmt::format("op {} reference '{}' has dtype {}, not the contract's "
                               "reference_dtype {} (spec §3.1 gold-dtype provenance, §9.3)",
                               op, tensor, have, contract_name(contract.policy.reference_dtype)));
}

}  // namespace ws1

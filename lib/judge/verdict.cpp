// Cell verdicts and their reasons from the judges' records, and the contract row as the
// evidence records it.
#include <fmt/format.h>

#include "ws1/judge.hpp"

namespace ws1 {
namespace {

constexpr std::string_view kNothingCompared = "no tensor was compared";

std::string hex(std::uint64_t bits, DType t) {
  return fmt::format("0x{:0{}x}", bits, static_cast<int>(dtype_size(t) * 2));
}

std::string accuracy_problem(const AccuracyTensor& t) {
  if (!t.comparable)
    return fmt::format("{}: not compared: {}", t.name,
                       t.notes.empty() ? std::string("no reason recorded") : t.notes.front());
  std::string s = fmt::format("{}: {} of {} elements outside atol + rtol * |reference|", t.name,
                              t.violations, t.numel);
  if (t.relative && !t.relative->passed)
    s += fmt::format("; max |c - r| {:.4g} over the relative bound {:.4g} = {:g} x the naive bf16 engine's "
                     "{:.4g} + {:.4g}",
                     t.abs_error.max, t.relative->bound, t.relative->factor, t.relative->naive_max_abs,
                     t.relative->floor);
  if (t.bias && !t.bias->passed)
    s += fmt::format("; the errors lean one way: drift {:+.4f} (bound {:.4f}: {} above, {} below r rounded), growth "
                     "{:+.4f} (bound {:.4f}: {} farther from zero, {} nearer) over {} finite pairs",
                     t.bias->drift, t.bias->drift_bound, t.bias->counts.above, t.bias->counts.below, t.bias->growth,
                     t.bias->growth_bound, t.bias->counts.away, t.bias->counts.toward, t.bias->counts.finite);
  if (t.nan_elements > 0) s += fmt::format(" ({} with NaN)", t.nan_elements);
  if (t.worst)
    s += fmt::format("; worst at {}: candidate {}, reference {}, |c - r| / allowed = {:.4g}{} "
                     "(allowed {:.4g})",
                     shape_string(t.worst->index), t.worst->candidate, t.worst->reference,
                     t.worst->margin,
                     t.worst->margin == 1.0 ? (t.worst->violates ? " (over)" : " (within)") : "",
                     t.worst->allowed);
  if (t.floor_violations && *t.floor_violations > 0)
    s += fmt::format("; below the {} floor: the reference itself rounded to {} is outside the row at {} "
                     "element(s)", dtype_contract_name(t.dtype), dtype_contract_name(t.dtype), *t.floor_violations);
  return s;
}

std::string bitwise_problem(const BitwiseTensor& t) {
  if (t.lhs_shape != t.rhs_shape)
    return fmt::format("{}: shapes differ: lhs {}, rhs {}", t.name, shape_string(t.lhs_shape),
                       shape_string(t.rhs_shape));
  if (t.lhs_dtype != t.rhs_dtype)
    return fmt::format("{}: dtypes differ: lhs {}, rhs {}", t.name,
                       dtype_contract_name(t.lhs_dtype), dtype_contract_name(t.rhs_dtype));
  std::vector<std::string> parts;
  if (t.mismatches > 0) {
    std::string s = fmt::format("{} element(s) differ in their bits", t.mismatches);
    if (t.signed_zero_mismatches > 0)
      s += fmt::format(" ({} are +0 against -0)", t.signed_zero_mismatches);
    if (!t.first_mismatches.empty()) {
      const BitMismatch& m = t.first_mismatches.front();
      s += fmt::format("; first at {}: lhs {}, rhs {}", shape_string(m.index),
                       hex(m.lhs_bits, t.lhs_dtype), hex(m.rhs_bits, t.rhs_dtype));
    }
    parts.push_back(std::move(s));
  }
  if (t.nan_policy == NanPolicy::kFail && (t.lhs_nans > 0 || t.rhs_nans > 0)) {
    std::string s =
        fmt::format("NaN under nan_policy fail (lhs {}, rhs {})", t.lhs_nans, t.rhs_nans);
    if (!t.first_nans.empty()) {
      const BitMismatch& m = t.first_nans.front();
      s += fmt::format("; first at {}: lhs {}, rhs {}", shape_string(m.index),
                       hex(m.lhs_bits, t.lhs_dtype), hex(m.rhs_bits, t.rhs_dtype));
    }
    parts.push_back(std::move(s));
  }
  return fmt::format("{}: {}", t.name, fmt::join(parts, "; "));
}

template <class T, class Problem>
std::string reason(std::span<const T> tensors, Problem problem) {
  if (tensors.empty()) return std::string(kNothingCompared);
  std::vector<std::string> parts;
  for (const T& t : tensors)
    if (!passed(t)) parts.push_back(problem(t));
  return fmt::format("{}", fmt::join(parts, "; "));
}

template <class T>
Verdict verdict(std::span<const T> tensors) {
  if (tensors.empty()) return Verdict::kRed;
  for (const T& t : tensors)
    if (!passed(t)) return Verdict::kRed;
  return Verdict::kGreen;
}

}  // namespace

Verdict accuracy_verdict(std::span<const AccuracyTensor> tensors) {
  const Verdict v = verdict(tensors);
  if (v != Verdict::kGreen) return v;
  for (const AccuracyTensor& t : tensors)
    if (t.zeros_pass.value_or(false)) return Verdict::kVacuous;
  return v;
}

std::string vacuity_reason(std::span<const AccuracyTensor> tensors) {
  std::vector<std::string> parts;
  for (const AccuracyTensor& t : tensors)
    if (t.zeros_pass.value_or(false))
      parts.push_back(fmt::format("{} (max |reference| {:.4g})", t.name, t.reference_max_abs.value_or(0.0)));
  if (parts.empty()) return {};
  return fmt::format("vacuous: an all-zero candidate passes the row as well at {}; the cell cannot tell "
                     "a kernel from none (docs/decisions.md D29)",
                     fmt::join(parts, ", "));
}
Verdict bitwise_verdict(std::span<const BitwiseTensor> tensors) { return verdict(tensors); }

std::string accuracy_reason(std::span<const AccuracyTensor> tensors) {
  return reason(tensors, accuracy_problem);
}
std::string bitwise_reason(std::span<const BitwiseTensor> tensors) {
  return reason(tensors, bitwise_problem);
}

Result<CellThreshold> cell_threshold(const Threshold& threshold, std::string_view contract_file) {
  if (!threshold.tolerance)
    return bad_input(std::string(contract_file), threshold.source,
                     fmt::format("the row ({}) declares no tolerance to judge by",
                                 contract_name(threshold.status)));
  CellThreshold c;
  c.mode = threshold.tolerance->mode == CompareMode::kBitwise ? ThresholdMode::kBitwise
                                                              : ThresholdMode::kTolerance;
  c.atol = threshold.tolerance->atol;
  c.rtol = threshold.tolerance->rtol;
  c.source = threshold.source;
  return c;
}

}  // namespace ws1

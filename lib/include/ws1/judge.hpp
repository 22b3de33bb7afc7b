// The judges of spec §4: the accuracy comparator (§4.1) with its error statistics, the raw-bit
// comparator of invariance (§4.2, DESIGN §3.3), and the verdicts built from their results.
// Results are the evidence records (ws1/evidence.hpp) so they go into the artifact unchanged.
//
// Accuracy, element by element, both sides read as FP32 (a bf16/f16 candidate is widened
// exactly):
//   passes  iff  |c - r| <= atol + rtol * |r|
// decided exactly in real arithmetic on the float values c, r and the double values atol, rtol
// the contract holds: no rounding of the bound (neither to FP32 nor to double) can move an
// element across it. A NaN on either side never passes. Infinities: the same infinity on both
// sides passes; any other pairing with an infinity is a violation.
//
// Statistics (observations, not the verdict; spec §4.1), over the elements without a NaN:
//   abs error  |c - r|;
//   rel error  |c - r| / max(|r|, kRelErrorDenominatorFloor)  (0 for equal infinities, inf for
//              any other infinite pairing);
//   ulp        distance in ulps of the candidate dtype between c and r rounded to that dtype
//              (round to nearest even): how many candidate-dtype steps c lies from the
//              correctly rounded answer, 0 when c is that answer;
//   max, mean (a double sum in the fixed tree order of ws1/accuracy_parts.hpp, so that the host
//   and the device judge agree bit for bit), P99 and P99.9 by the nearest-rank method: the
//   k-th smallest value with k = ceil(p * n), 1-based (n = elements without a NaN). Ranks are
//   found on a float32 copy of the values, so a percentile is the float32 rounding of the
//   exact one (capped at the max); max and mean are computed in double.
// The worst element is the one with the largest ratio |c - r| / allowed (allowed = atol +
// rtol * |r|), reported as its margin: how much of its allowance the element uses (issue 3:
// "observed / allowed at the worst element"); > 1 is a violation. A NaN on either side, a
// violation involving an infinity, and an error where allowed is 0 give +inf; no error gives
// 0 (also where allowed is 0). Ties: a violation before a pass, then the first in row-major
// order. allowed and the ratio are rounded in double, while the verdict is the exact test
// above; the ratio is therefore clamped onto the exact decision's side of 1 (<= 1 for a pass,
// >= 1 for a violation), and WorstElement::violates carries the exact decision, so a ratio of
// exactly 1.0 reads unambiguously and the record never contradicts the verdict.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "ws1/contract.hpp"
#include "ws1/evidence.hpp"
#include "ws1/tensor.hpp"

namespace ws1 {

// Denominator floor of the reported relative error, spec §4.1: "max_rel_error uses
// abs(reference).clamp_min(1e-12) as its denominator". A definition of the statistic, not a
// tolerance.
inline constexpr double kRelErrorDenominatorFloor = 1e-12;

// Mismatches (and NaN elements) listed per bitwise tensor unless the caller asks otherwise.
inline constexpr std::size_t kDefaultMaxReported = 16;

// ---- Accuracy (spec §4.1) ---------------------------------------------------------------------

// Gold-dtype provenance (spec §3.1, §9.3; DESIGN §3.2): the reference's dtype must be the
// contract's reference_dtype. Error (one line) naming op, tensor, both dtypes and the contract.
Status check_reference_dtype(const Contract& contract, const Tensor& reference, std::string_view op,
                             std::string_view tensor);

// The exact element test: |c - r| <= atol + rtol * |r| (see above). False when either side is
// NaN; with an infinity, true only for the same infinity on both sides. A tolerance that is
// negative, infinite or NaN makes every element fail.
bool within_tolerance(float candidate, float reference, const Tolerance& tol);

// Judges `candidate` (bfloat16, float16 or float32) against `reference` (float32), any layout
// (logical elements are compared). When both tensors are held on a device and a device judge
// is installed (ws1/accuracy_parts.hpp), it computes the record there (engine "cuda"). The tolerance's mode is the caller's business: atol and rtol
// are applied as given. A pair that cannot be compared (shapes differ, a candidate dtype not
// listed, a reference that is not float32, a negative, infinite or NaN tolerance) gives a record
// with comparable = false and the reason in notes: a failing tensor, never an exception. An
// undefined Tensor is a programming error (std::logic_error, as for Tensor's own misuse).
AccuracyTensor judge_accuracy(std::string name, const Tensor& candidate, const Tensor& reference,
                              const Tolerance& tol);

// judge_accuracy(...).abs_error.max alone, for a pair judge_accuracy can compare: the largest
// |c - r| over the elements where neither side is NaN (infinity where one side is infinite and
// the other differs; NaN when every element has a NaN; 0 for an empty pair), on the host, with
// none of the other statistics: what v3's relative criterion needs of the naive engine's error.
// An incomparable pair (see above) is a programming error here (std::logic_error).
double max_abs_error(const Tensor& candidate, const Tensor& reference);

// ws1-c1-v3's bias rule (ws1/contract.hpp BiasRule) on a tensor's sign counts: drift and growth
// (the means of the two signs), their bounds max(max_mean, z * sqrt(count(s != 0)) / n), and
// whether both means are within them. No finite pair: nothing leans, passed.
BiasCheck judge_bias(const SignCounts& counts, double max_mean, double z);

// The same on the path that has a contract: check_reference_dtype() first, so a reference of
// the wrong dtype is an error (exit 2), not a red tensor. No option skips the check.
Result<AccuracyTensor> judge_accuracy(const Contract& contract, std::string_view op,
                                      std::string name, const Tensor& candidate,
                                      const Tensor& reference, const Tolerance& tol);

// ---- Invariance (spec §4.2, DESIGN §3.3) ------------------------------------------------------

// Raw-bit comparison of `lhs` and `rhs` (any dtype, any layout: logical elements in row-major
// order). Shapes and dtypes must be equal (otherwise no element is compared, equal_bits is
// false and notes say why); then every bit pattern must be equal: +0 and -0 differ (counted in
// signed_zero_mismatches). NaNs (float dtypes) are counted per side and the first ones listed
// in first_nans with both bit patterns; under NanPolicy::kFail any NaN fails the tensor, also
// where both sides hold the same NaN bits; under kCompareBits a NaN is compared like any other
// bit pattern. first_mismatches lists up to `max_reported` mismatches in index order.
// passed(const BitwiseTensor&) (evidence.hpp) gives the outcome. An undefined Tensor is a
// programming error (std::logic_error).
BitwiseTensor judge_bitwise(std::string name, const Tensor& lhs, const Tensor& rhs,
                            NanPolicy policy, std::size_t max_reported = kDefaultMaxReported);

// ---- Verdicts -----------------------------------------------------------------------------------

// Green when every tensor passed; red when one failed or when there is no tensor at all (a
// judged cell that measured nothing is not green, and N/A is reserved for rows the contract
// declares out of scope). accuracy_verdict() gives vacuous instead of green when an all-zero
// candidate would pass a tensor as well (AccuracyTensor::zeros_pass).
Verdict accuracy_verdict(std::span<const AccuracyTensor> tensors);
Verdict bitwise_verdict(std::span<const BitwiseTensor> tensors);
// The reason to record with a red verdict: one line naming each failing tensor and its first
// problem (worst element, first mismatch, first NaN, or why it was not compared). Empty when
// the verdict is green.
std::string accuracy_reason(std::span<const AccuracyTensor> tensors);
std::string bitwise_reason(std::span<const BitwiseTensor> tensors);
// The reason to record with a vacuous verdict: the tensors an all-zero candidate passes. Empty
// when there is none.
std::string vacuity_reason(std::span<const AccuracyTensor> tensors);

// The evidence's record of the contract row a cell was judged by: mode, atol, rtol and the row's
// json path. Error (naming `contract_file` and the row) when the row declares no tolerance.
Result<CellThreshold> cell_threshold(const Threshold& threshold, std::string_view contract_file);

}  // namespace ws1

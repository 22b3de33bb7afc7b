// The pieces of the accuracy judge (ws1/judge.hpp) that an accelerator's implementation of it
// shares with the host one, so that both produce the same record bit for bit:
//  - the order in which a statistic is summed (a fixed tree, below) and the rank of a
//    percentile;
//  - the general judgement of one pair (NaN, infinities, the rounding band of the bound);
//  - the assembly of the record from totals (means, capped percentiles, the worst element's
//    index, the notes);
//  - the hook through which judge_accuracy() hands a pair held in device memory to the device
//    judge (cuda/judge), which returns nothing where it does not apply.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ws1/contract.hpp"
#include "ws1/evidence.hpp"
#include "ws1/tensor.hpp"

namespace ws1 {

// ---- summation order ----------------------------------------------------------------------
//
// The sum of a statistic over the n elements of a tensor (for its mean) is a fixed tree, so it
// does not depend on how many threads or which device computes it:
//  - leaves: blocks of kSumBlock = 4096 consecutive elements (row-major), the last one padded
//    with +0 (a NaN element, kept out of the statistics, also counts as +0);
//  - a leaf's sum: 256 lane sums, lane t adding v[t], v[t + 256], ..., v[t + 3840] left to
//    right, then the stride-halving tree over the 256 lane sums: for m = 128, 64, ..., 1:
//    s[j] += s[j + m] for j < m; the sum is s[0]. (One GPU thread per lane, a SIMD loop on
//    the host.)
//  - the leaf sums, padded with +0 to a power of two, by the same stride-halving tree.
// Every value is >= +0, so the padding changes no bit.
inline constexpr std::int64_t kSumBlock = 4096;
inline constexpr std::int64_t kSumLanes = 256;

// The stride-halving tree over v (its size a power of two, >= 1), in place; returns v[0].
double halving_sum(std::span<double> v);
// A leaf's sum, as above, over v[0 .. kSumBlock) (clobbers v).
double leaf_sum(std::span<double> v);
// The top of the tree: the leaf sums in row-major order (consumed).
double sum_of_blocks(std::vector<double> block_sums);

// 0-based index of the nearest-rank percentile num/den among n >= 1 sorted values:
// k = ceil(n * num / den) (1-based), in integer arithmetic (n up to 2^53 / den).
inline std::int64_t nearest_rank_index(std::int64_t n, std::int64_t num, std::int64_t den) {
  const std::int64_t k = (n * num + den - 1) / den;
  return k < 1 ? 0 : k - 1;
}

// ---- one pair -----------------------------------------------------------------------------

// Everything the judge records of one (candidate, reference) pair, by the general definitions
// of ws1/judge.hpp: any pair (NaN, infinities, a pair within the rounding band of its bound).
struct PairJudgement {
  bool nan = false;  // a NaN on either side: a violation, kept out of the statistics
  bool candidate_nan = false, reference_nan = false;
  bool infinite = false;  // no NaN, an infinity on a side
  double abs = 0, rel = 0, ulp = 0;  // 0 for a NaN pair (not part of the statistics)
  double allowed = 0, ratio = 0;
  bool violates = false;
  // The signed ulp distance (ws1/evidence.hpp's bias_ulp) of a finite pair; 0 otherwise.
  std::int64_t signed_ulp = 0;
};
// `candidate` is bf16, f16 or f32 (c holds a value of that dtype); the tolerance finite and
// non-negative.
PairJudgement judge_pair(float c, float r, const Tolerance& tol, DType candidate);

// ---- the record ---------------------------------------------------------------------------

// What an implementation of the judge measured over a comparable pair of tensors.
struct AccuracyTotals {
  std::int64_t nan_elements = 0, candidate_nans = 0, reference_nans = 0, infinite = 0;
  std::int64_t violations = 0;
  double abs_sum = 0, rel_sum = 0, ulp_sum = 0;  // sum_of_blocks() of each statistic
  double abs_max = 0, rel_max = 0, ulp_max = 0;
  // The nearest-rank P99 / P99.9 of each statistic's float32 values (NaN pairs left out).
  float abs_p99 = 0, abs_p999 = 0, rel_p99 = 0, rel_p999 = 0, ulp_p99 = 0, ulp_p999 = 0;
  std::int64_t worst_flat = -1;  // the worst element (judge.hpp's rule); -1 for an empty tensor
  WorstElement worst;            // its index is filled in by accuracy_record()
  // The null candidates' inputs (ws1/evidence.hpp): the exact sum of the finite pairs' signed
  // ulp distances (each clamped to +-kSignedUlpClamp), and the largest |reference| without NaN.
  std::int64_t signed_ulp_sum = 0;
  float reference_max_abs = 0;
  SignCounts signs;  // the finite pairs' signs (ws1/evidence.hpp)
};

// Adds one finite pair to `s`: c the candidate, q the reference rounded to the candidate's dtype.
inline void count_signs(SignCounts& s, float c, float q) {
  ++s.finite;
  s.above += c > q ? 1 : 0;
  s.below += c < q ? 1 : 0;
  const float ac = c < 0 ? -c : c, aq = q < 0 ? -q : q;
  s.away += ac > aq ? 1 : 0;
  s.toward += ac < aq ? 1 : 0;
  s.positive += q > 0 ? 1 : 0;
  s.negative += q < 0 ? 1 : 0;
}

// Each pair's signed ulp distance is clamped to this before the sum (only an f32 candidate can
// reach it), so the exact int64 sum cannot overflow below 2^32 elements.
inline constexpr std::int64_t kSignedUlpClamp = std::int64_t{1} << 31;
inline std::int64_t clamp_signed_ulp(std::int64_t d) {
  return d > kSignedUlpClamp ? kSignedUlpClamp : d < -kSignedUlpClamp ? -kSignedUlpClamp : d;
}

// Why the pair cannot be compared element by element, or nothing (judge.hpp lists the cases).
std::optional<std::string> accuracy_incomparable(const Tensor& candidate, const Tensor& reference,
                                                 const Tolerance& tol);

// The record of a comparable pair: means from the sums, percentiles capped at the max, NaN
// statistics when no element is measured, the notes on NaNs and infinities, the null
// candidates' results under `tol`. `engine` names where the statistics were computed ("host",
// "cuda").
AccuracyTensor accuracy_record(std::string name, const Tensor& candidate, AccuracyTotals totals,
                               std::string engine, const Tolerance& tol);

// ---- the device judge ---------------------------------------------------------------------

// judge_accuracy() of a comparable pair whose two tensors are both held on a device
// (Tensor::device_data() non-null): the same record as the host judge's, bit for bit (engine
// aside), or nothing where the device judge does not apply (the host judge then runs).
using DeviceAccuracyJudge = std::optional<AccuracyTensor> (*)(const std::string& name,
                                                              const Tensor& candidate,
                                                              const Tensor& reference,
                                                              const Tolerance& tol);
// Installed by the CUDA layer when a device is in use; nullptr uninstalls it.
void set_device_accuracy_judge(DeviceAccuracyJudge judge);

}  // namespace ws1

// The chain aggregates over d = lhs - rhs (spec §8; contract chain_logprob_aggregates, whose
// compute_dtype is float32): per token d, exp(d) and exp(d) - 1 - d in float32 as upstream's
// compute_logprob_aggregates does; the sums over tokens in double (index order), so a mean does
// not depend on how many tokens share a float32 accumulator. Percentiles are nearest-rank
// (ws1/judge.hpp: the k-th smallest, k = ceil(p * n)).
#include <algorithm>
#include <cmath>

#include "percentile.hpp"
#include "ws1/parity.hpp"

namespace ws1 {

DlogpStats dlogp_stats(std::span<const float> lhs, std::span<const float> rhs,
                       std::pair<double, double> clip) {
  DlogpStats s;
  s.count = static_cast<std::int64_t>(std::min(lhs.size(), rhs.size()));
  if (s.count == 0) return s;
  const auto lo = static_cast<float>(clip.first), hi = static_cast<float>(clip.second);
  std::vector<float> abs_d;
  abs_d.reserve(static_cast<std::size_t>(s.count));
  double sum_abs = 0, sum_kl = 0, clipped = 0;
  for (std::int64_t i = 0; i < s.count; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const float d = lhs[k] - rhs[k];
    const float ratio = std::exp(d);
    if (!std::isfinite(d) || !std::isfinite(ratio)) {
      if (s.nonfinite++ == 0) s.first_nonfinite = i;
      continue;
    }
    const float a = std::fabs(d);
    abs_d.push_back(a);
    if (d == 0.0f) ++s.exact_zero;
    s.max_abs = std::max(s.max_abs, static_cast<double>(a));
    sum_abs += a;
    sum_kl += (ratio - 1.0f) - d;
    if (ratio < lo || ratio > hi) clipped += 1;
  }
  if (s.nonfinite > 0) {  // a hard failure: the aggregates are undefined
    s.max_abs = s.mean_abs = s.approx_kl0 = s.clipfrac0 = s.p99_abs = s.p999_abs = std::nan("");
    return s;
  }
  const auto n = static_cast<double>(s.count);
  s.mean_abs = sum_abs / n;
  s.approx_kl0 = sum_kl / n;
  s.clipfrac0 = clipped / n;
  std::sort(abs_d.begin(), abs_d.end());
  using ws1::nearest_rank_index;
  s.p99_abs = abs_d[static_cast<std::size_t>(nearest_rank_index(s.count, 99, 100))];
  s.p999_abs = abs_d[static_cast<std::size_t>(nearest_rank_index(s.count, 999, 1000))];
  return s;
}

}  // namespace ws1

// Nearest-rank percentiles (the rank definition the judges document in ws1/judge.hpp).
#pragma once

#include <cstdint>
#include <vector>

namespace ws1::judge_detail {

// 0-based index of the nearest-rank percentile num/den of n >= 1 sorted values:
// k = ceil(n * num / den) (1-based), in integer arithmetic (n up to 2^53 / den).
inline std::int64_t nearest_rank_index(std::int64_t n, std::int64_t num, std::int64_t den) {
  const std::int64_t k = (n * num + den - 1) / den;
  return k < 1 ? 0 : k - 1;
}

// P99 and P99.9 of `values` plus `zeros` more values equal to 0 (values are errors, never
// negative, so the zeros rank first); `values` is reordered in place; the total must not be 0.
// Elements whose candidate equals the reference bit for bit are counted, not stored: the
// sparse gradients (embedding's dtable, V x H) are mostly such zeros.
struct Percentiles {
  float p99 = 0, p999 = 0;
};
Percentiles percentiles_99_999(std::vector<float>& values, std::int64_t zeros = 0);

}  // namespace ws1::judge_detail

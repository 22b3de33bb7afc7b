#include "percentile.hpp"

#include <algorithm>

namespace ws1::judge_detail {

Percentiles percentiles_99_999(std::vector<float>& values) {
  const auto n = static_cast<std::int64_t>(values.size());
  const std::int64_t i999 = nearest_rank_index(n, 999, 1000);
  const std::int64_t i99 = nearest_rank_index(n, 99, 100);  // <= i999
  // nth_element puts the i999-th smallest in place and every smaller value before it, so the
  // second selection only needs the prefix.
  std::nth_element(values.begin(), values.begin() + i999, values.end());
  Percentiles p;
  p.p999 = values[static_cast<std::size_t>(i999)];
  std::nth_element(values.begin(), values.begin() + i99, values.begin() + i999 + 1);
  p.p99 = values[static_cast<std::size_t>(i99)];
  return p;
}

}  // namespace ws1::judge_detail

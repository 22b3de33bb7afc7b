#include "percentile.hpp"

#include <algorithm>

namespace ws1::judge_detail {

Percentiles percentiles_99_999(std::vector<float>& values, std::int64_t zeros) {
  const auto n = static_cast<std::int64_t>(values.size()) + zeros;
  const std::int64_t r999 = nearest_rank_index(n, 999, 1000);
  const std::int64_t r99 = nearest_rank_index(n, 99, 100);  // <= r999
  Percentiles p;
  if (r999 < zeros) return p;  // both ranks fall among the zeros
  const std::int64_t i999 = r999 - zeros;
  // nth_element puts the i999-th smallest in place and every smaller value before it, so the
  // second selection only needs the prefix.
  std::nth_element(values.begin(), values.begin() + i999, values.end());
  p.p999 = values[static_cast<std::size_t>(i999)];
  if (r99 < zeros) return p;
  const std::int64_t i99 = r99 - zeros;
  std::nth_element(values.begin(), values.begin() + i99, values.begin() + i999 + 1);
  p.p99 = values[static_cast<std::size_t>(i99)];
  return p;
}

}  // namespace ws1::judge_detail

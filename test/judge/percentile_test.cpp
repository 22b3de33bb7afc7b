// The two-pass bucket selection of P99 / P99.9 against a full sort (nearest rank).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "percentile.hpp"

using ws1::nearest_rank_index;
using ws1::judge_detail::RankSelector;

namespace {

// Streams `values` (and `zeros` counted zeros) through a selector.
ws1::judge_detail::Percentiles select(const std::vector<float>& values, std::int64_t zeros) {
  RankSelector sel;
  for (float v : values) sel.count(v);
  sel.count_zeros(zeros);
  sel.plan();
  for (float v : values) sel.keep(v);
  return sel.result();
}

}  // namespace

TEST_CASE("rank selector equals a full sort for many shapes of data", "[judge]") {
  std::mt19937_64 rng(20261130);
  std::uniform_real_distribution<double> exponent(-40.0, 10.0);
  for (std::int64_t n : {1, 2, 3, 99, 100, 101, 999, 1000, 1001, 4096, 100000}) {
    for (int zeros_kind = 0; zeros_kind < 3; ++zeros_kind) {
      std::vector<float> values;
      for (std::int64_t i = 0; i < n; ++i) {
        // Magnitudes over 50 binades, some exact repeats, some infinities.
        float v = static_cast<float>(std::exp2(exponent(rng)));
        if (i % 7 == 0) v = 0.5f;
        if (i % 97 == 5) v = INFINITY;
        values.push_back(v);
      }
      const std::int64_t zeros = zeros_kind == 0 ? 0 : zeros_kind == 1 ? n / 3 : 100 * n;
      std::vector<float> all = values;
      all.insert(all.end(), static_cast<std::size_t>(zeros), 0.0f);
      std::sort(all.begin(), all.end());
      const auto total = static_cast<std::int64_t>(all.size());
      const auto p = select(values, zeros);
      INFO("n=" << n << " zeros=" << zeros);
      CHECK(p.p99 == all[static_cast<std::size_t>(nearest_rank_index(total, 99, 100))]);
      CHECK(p.p999 == all[static_cast<std::size_t>(nearest_rank_index(total, 999, 1000))]);
    }
  }
}

TEST_CASE("rank selector: only counted zeros, and both ranks in one bucket", "[judge]") {
  const auto z = select({}, 10);
  CHECK(z.p99 == 0.0f);
  CHECK(z.p999 == 0.0f);
  // 1000 values in one bucket (same top 16 bits): both ranks are selected inside it.
  std::vector<float> v;
  for (int i = 0; i < 1000; ++i) v.push_back(1.0f + static_cast<float>(999 - i) * 0x1p-20f);
  const auto p = select(v, 0);
  CHECK(p.p99 == 1.0f + 989 * 0x1p-20f);
  CHECK(p.p999 == 1.0f + 998 * 0x1p-20f);
}

TEST_CASE("rank selector: repeated values (ulp errors) and subnormals beside counted zeros", "[judge]") {
  // Most elements 1 ulp off, a few 2 or 3: both ranks sit in the buckets of repeated values.
  std::vector<float> v(100000, 1.0f);
  for (int i = 0; i < 900; ++i) v[static_cast<std::size_t>(i * 97)] = 2.0f;
  for (int i = 0; i < 60; ++i) v[static_cast<std::size_t>(i * 1013 + 5)] = 3.0f;
  std::vector<float> all = v;
  std::sort(all.begin(), all.end());
  const auto p = select(v, 0);
  CHECK(p.p99 == all[static_cast<std::size_t>(nearest_rank_index(100000, 99, 100))]);
  CHECK(p.p999 == all[static_cast<std::size_t>(nearest_rank_index(100000, 999, 1000))]);
  // Subnormals share bucket 0 with the counted zeros, which rank below them.
  std::vector<float> s;
  for (int i = 1; i <= 300; ++i) s.push_back(static_cast<float>(i) * 0x1p-149f);
  const auto q = select(s, 700);
  std::vector<float> sorted = s;
  sorted.insert(sorted.begin(), 700, 0.0f);
  CHECK(q.p99 == sorted[static_cast<std::size_t>(nearest_rank_index(1000, 99, 100))]);
  CHECK(q.p999 == sorted[static_cast<std::size_t>(nearest_rank_index(1000, 999, 1000))]);
}

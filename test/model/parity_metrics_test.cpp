// The chain aggregates on hand-computed values: sign, float32 arithmetic, the asymmetric clip
// interval, nearest-rank percentiles, NaN/Inf.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "ws1/parity.hpp"

using namespace ws1;

TEST_CASE("dlogp_stats: d = lhs - rhs, float32 terms, clip interval", "[parity][metrics]") {
  const std::vector<float> lhs = {-1.0f, -2.0f, -3.0f, -0.5f};
  const std::vector<float> rhs = {-1.0f, -2.25f, -2.75f, -0.5f};
  const DlogpStats s = dlogp_stats(lhs, rhs, {0.8, 1.2});
  CHECK(s.count == 4);
  CHECK(s.exact_zero == 2);
  CHECK(s.max_abs == 0.25);
  CHECK(s.mean_abs == 0.125);
  // d = +0.25 (exp 1.284: outside [0.8, 1.2]) and -0.25 (exp 0.7788: outside too).
  CHECK(s.clipfrac0 == 0.5);
  const float kl_pos = (std::exp(0.25f) - 1.0f) - 0.25f;
  const float kl_neg = (std::exp(-0.25f) - 1.0f) + 0.25f;
  CHECK(s.approx_kl0 == (static_cast<double>(kl_pos) + static_cast<double>(kl_neg)) / 4.0);
  CHECK(s.nonfinite == 0);
}

TEST_CASE("dlogp_stats: the sign matters for clipfrac0 (the interval is asymmetric in log space)", "[parity][metrics]") {
  // d = +0.19: exp = 1.209 > 1.2, clipped; d = -0.19: exp = 0.827, inside.
  const std::vector<float> a = {-1.0f}, b = {-1.19f};
  CHECK(dlogp_stats(a, b, {0.8, 1.2}).clipfrac0 == 1.0);
  CHECK(dlogp_stats(b, a, {0.8, 1.2}).clipfrac0 == 0.0);
}

TEST_CASE("dlogp_stats: nearest-rank P99 and P99.9 of |d|", "[parity][metrics]") {
  std::vector<float> lhs(1000, 0.0f), rhs(1000);
  for (int i = 0; i < 1000; ++i) rhs[static_cast<std::size_t>(i)] = -static_cast<float>(i + 1) / 1024.0f;
  const DlogpStats s = dlogp_stats(lhs, rhs, {0.8, 1.2});
  CHECK(s.p99_abs == 990.0 / 1024.0);    // k = ceil(0.99 * 1000) = 990
  CHECK(s.p999_abs == 999.0 / 1024.0);   // k = 999
  CHECK(s.max_abs == 1000.0 / 1024.0);
}

TEST_CASE("dlogp_stats: NaN or Inf makes the aggregates undefined and counts the tokens", "[parity][metrics]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> lhs = {-1.0f, nan, -1.0f, 100.0f};
  const std::vector<float> rhs = {-1.0f, -1.0f, -inf, -1.0f};  // d: 0, NaN, +inf, 101 (exp overflows)
  const DlogpStats s = dlogp_stats(lhs, rhs, {0.8, 1.2});
  CHECK(s.nonfinite == 3);
  CHECK(s.first_nonfinite == 1);
  CHECK(std::isnan(s.max_abs));
  CHECK(std::isnan(s.approx_kl0));
  CHECK(dlogp_stats({}, {}, {0.8, 1.2}).count == 0);
}

// Error statistics of the accuracy judge on hand-made tensors with known answers: mean,
// max, nearest-rank P99 / P99.9, relative error with the §4.1 denominator floor, ULPs of the
// candidate dtype, the worst element.
#include <cmath>
#include <limits>
#include <numeric>

#include "judge_test_support.hpp"
#include "ws1/numeric.hpp"

using judge_test::bf16;
using judge_test::f32;
using judge_test::tolerance;
using ws1::ContractDType;
using ws1::Judgment;
using ws1::OpClass;

TEST_CASE("stats: a permutation of j/1024 against zero", "[judge]") {
  // 200 elements, candidate j/1024 (j = 0..199, each once, placed at i with 37*i = j mod 200),
  // reference 0: |c - r| = j/1024, exact in bf16, float and double.
  const ws1::Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kBFloat16);
  constexpr int n = 200;
  std::vector<float> cand(n);
  std::int64_t worst_i = -1;
  for (int i = 0; i < n; ++i) {
    const int j = (37 * i) % n;
    cand[static_cast<std::size_t>(i)] = static_cast<float>(j) / 1024.0f;
    if (j == n - 1) worst_i = i;
  }
  const auto a = ws1::judge_accuracy("y", bf16({2, 100}, cand),
                                     f32({2, 100}, std::vector<float>(n, 0.0f)), tol);
  REQUIRE(a.comparable);
  CHECK(a.numel == n);
  CHECK(a.shape == ws1::Dims{2, 100});
  CHECK(a.dtype == ws1::DType::kBF16);

  // r = 0: the bound is atol exactly, and j/1024 is exact: count the violations directly.
  std::int64_t expected_violations = 0;
  for (int j = 0; j < n; ++j) expected_violations += static_cast<double>(j) / 1024.0 > tol.atol;
  CHECK(a.violations == expected_violations);
  CHECK(a.nan_elements == 0);

  // Sorted abs errors are j/1024: the k-th smallest (1-based) is (k-1)/1024. Nearest rank:
  // P99 is k = ceil(200 * 0.99) = 198, P99.9 is k = ceil(199.8) = 200.
  CHECK(a.abs_error.max == 199.0 / 1024.0);
  CHECK(a.abs_error.mean == 99.5 / 1024.0);  // (0 + ... + 199) / 200
  CHECK(a.abs_error.p99 == 197.0 / 1024.0);
  CHECK(a.abs_error.p999 == 199.0 / 1024.0);

  // Relative error: denominator max(|r|, floor) = the §4.1 floor for r = 0.
  const double floor = ws1::kRelErrorDenominatorFloor;
  CHECK(a.rel_error.max == (199.0 / 1024.0) / floor);
  // Percentiles are ranked in float32 (capped at the double max).
  CHECK(
      a.rel_error.p99 ==
      std::min(static_cast<double>(static_cast<float>((197.0 / 1024.0) / floor)), a.rel_error.max));
  // P99.9 is the max element, ranked through its float32 rounding.
  CHECK(a.rel_error.p999 ==
        std::min(static_cast<double>(static_cast<float>(a.rel_error.max)), a.rel_error.max));

  // ULPs against 0 in bf16: the number of bf16 values in (0, c], i.e. c's magnitude bits.
  double ulp_sum = 0, ulp_max = 0;
  std::vector<double> ulps;
  for (int j = 0; j < n; ++j) {
    const double u = ws1::to_bf16(static_cast<float>(j) / 1024.0f).bits;
    ulps.push_back(u);
    ulp_sum += u;
    ulp_max = std::max(ulp_max, u);
  }
  std::sort(ulps.begin(), ulps.end());
  CHECK(a.ulp_distance.max == ulp_max);
  CHECK(a.ulp_distance.mean == ulp_sum / n);
  CHECK(a.ulp_distance.p99 == ulps[197]);
  CHECK(a.ulp_distance.p999 == ulps[199]);

  // Worst: the largest error (all references equal), at its 2-D index.
  REQUIRE(a.worst);
  CHECK(a.worst->index == ws1::Dims{worst_i / 100, worst_i % 100});
  CHECK(a.worst->candidate == 199.0 / 1024.0);
  CHECK(a.worst->reference == 0.0);
  CHECK(a.worst->allowed == tol.atol);
  CHECK(a.worst->margin == (199.0 / 1024.0) / tol.atol);
  CHECK(a.worst->violates == (a.violations > 0));
}

TEST_CASE("stats: nearest-rank percentiles for several sizes", "[judge]") {
  const ws1::Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kFloat32);
  struct Case {
    std::int64_t n, k99, k999;  // k = ceil(n * p), worked out by hand
  };
  for (const Case& cs :
       {Case{1, 1, 1}, Case{2, 2, 2}, Case{7, 7, 7}, Case{100, 99, 100}, Case{101, 100, 101},
        Case{1000, 990, 999}, Case{1001, 991, 1000}, Case{4096, 4056, 4092}}) {
    const std::int64_t n = cs.n, k99 = cs.k99, k999 = cs.k999;
    INFO("n=" << n);
    // candidate (n-1-i) * 2^-12 (descending, so ranking matters), reference 0
    std::vector<float> cand(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i)
      cand[static_cast<std::size_t>(i)] = static_cast<float>(n - 1 - i) / 4096.0f;
    const auto a = ws1::judge_accuracy(
        "y", f32({n}, cand), f32({n}, std::vector<float>(static_cast<std::size_t>(n), 0.0f)), tol);
    CHECK(a.abs_error.p99 == static_cast<double>(k99 - 1) / 4096.0);
    CHECK(a.abs_error.p999 == static_cast<double>(k999 - 1) / 4096.0);
    CHECK(a.abs_error.max == static_cast<double>(n - 1) / 4096.0);
    CHECK(a.abs_error.mean == static_cast<double>(n - 1) / 2.0 / 4096.0);
    REQUIRE(a.worst);
    CHECK(a.worst->index == ws1::Dims{0});  // the largest error is first
  }
}

TEST_CASE("stats: ULPs count candidate-dtype steps from the correctly rounded answer", "[judge]") {
  const ws1::Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kBFloat16);
  // r = 1 + 2^-10 rounds to 1.0 in bf16; bf16 steps are 2^-7 above 1 and 2^-8 below.
  const float r = 1.0f + 0x1p-10f;
  const std::vector<float> cand = {1.0f, 1.0f + 0x1p-7f, 1.0f + 0x1p-6f, 1.0f + 3 * 0x1p-7f,
                                   1.0f - 0x1p-8f};
  const auto a = ws1::judge_accuracy("y", bf16({5}, cand), f32({5}, std::vector<float>(5, r)), tol);
  CHECK(a.ulp_distance.max == 3);
  CHECK(a.ulp_distance.mean == 7.0 / 5.0);  // 0 + 1 + 2 + 3 + 1
  CHECK(a.ulp_distance.p99 == 3);
  // The same candidates as float32 are counted in float32 steps (2^-23 above 1).
  const auto b = ws1::judge_accuracy("y", f32({5}, cand), f32({5}, std::vector<float>(5, r)), tol);
  CHECK(b.ulp_distance.max == static_cast<double>((3 * 0x1p-7 - 0x1p-10) / 0x1p-23));
}

TEST_CASE("stats: worst element is the largest |c - r| / allowed", "[judge]") {
  // With rtol > 0 a large reference earns a large allowance. Element 0 (r = 1024) and element
  // 1 (r = 0) get errors that are powers of two derived from the contract row, so |c - r| is
  // exact and only allowed is rounded.
  const ws1::Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kBFloat16);
  REQUIRE(tol.rtol > 0);
  const float big = 1024.0f;
  const auto pow2_below = [](double x) {
    return static_cast<float>(std::ldexp(1.0, static_cast<int>(std::floor(std::log2(x)))));
  };
  const float err_small = pow2_below(tol.atol);  // ratio in (1/2, 1]
  const double allowed_big = tol.atol + tol.rtol * big;
  SECTION("the largest error is not the worst when its allowance is larger") {
    const float err_big = pow2_below(allowed_big) / 2;  // ratio in (1/4, 1/2]
    REQUIRE(err_big > err_small);
    const auto a =
        ws1::judge_accuracy("y", f32({2}, {big + err_big, err_small}), f32({2}, {big, 0.0f}), tol);
    REQUIRE(a.worst);
    REQUIRE(err_small / tol.atol > err_big / allowed_big);
    CHECK(a.worst->index == ws1::Dims{1});
    CHECK(a.worst->margin == err_small / tol.atol);
    CHECK(a.worst->allowed == tol.atol);
    CHECK(a.abs_error.max == err_big);
  }
  SECTION("the worst ratio, not the smallest allowed - |c - r| (D12)") {
    const float err_big = pow2_below(allowed_big);  // ratio in (1/2, 1]
    const auto a =
        ws1::judge_accuracy("y", f32({2}, {big + err_big, err_small}), f32({2}, {big, 0.0f}), tol);
    REQUIRE(a.worst);
    // The premise: element 0 uses more of its allowance, element 1 has less left over.
    REQUIRE(err_big / allowed_big > err_small / tol.atol);
    REQUIRE(tol.atol - err_small < allowed_big - err_big);
    CHECK(a.worst->index == ws1::Dims{0});
    CHECK(a.worst->margin == err_big / allowed_big);
    CHECK(a.worst->candidate == big + err_big);
    CHECK(a.worst->reference == big);
    CHECK(a.worst->allowed == allowed_big);
    CHECK(a.worst->violates == (a.violations > 0));
  }
  SECTION("ties: the first in row-major order") {
    const auto a = ws1::judge_accuracy("y", f32({2, 2}, {0.0f, err_small, -err_small, err_small}),
                                       f32({2, 2}, std::vector<float>(4, 0.0f)), tol);
    REQUIRE(a.worst);
    CHECK(a.worst->index == ws1::Dims{0, 1});
    CHECK(a.worst->margin == err_small / tol.atol);
  }
}

TEST_CASE("stats: a zero allowance gives ratio 0 without error, +inf with one", "[judge]") {
  // A bitwise row's tolerance (atol and rtol both zero), applied as an accuracy tolerance.
  const ws1::Tolerance zero =
      tolerance(Judgment::kForwardInvariance, OpClass::kReduction, ContractDType::kBFloat16);
  REQUIRE(zero.atol == 0);
  REQUIRE(zero.rtol == 0);
  const auto same = ws1::judge_accuracy("y", f32({3}, {0.0f, 1.5f, -2.0f}),
                                        f32({3}, {-0.0f, 1.5f, -2.0f}), zero);
  CHECK(ws1::passed(same));
  REQUIRE(same.worst);
  CHECK(same.worst->margin == 0);
  CHECK(same.worst->index == ws1::Dims{0});
  CHECK_FALSE(same.worst->violates);
  const auto off = ws1::judge_accuracy("y", f32({3}, {0.0f, 1.5f, -2.0f}),
                                       f32({3}, {0.0f, 1.5f, std::nextafter(-2.0f, 0.0f)}), zero);
  CHECK(off.violations == 1);
  REQUIRE(off.worst);
  CHECK(off.worst->index == ws1::Dims{2});
  CHECK(off.worst->margin == std::numeric_limits<double>::infinity());
  CHECK(off.worst->violates);
}

TEST_CASE("stats: a few million elements", "[judge]") {
  // 3 * 2^20 elements, candidate (i mod 256) / 256 against 0: each value 12288 times.
  const ws1::Tolerance tol =
      tolerance(Judgment::kGradientAccuracy, OpClass::kReduction, ContractDType::kBFloat16);
  constexpr std::int64_t n = 3 << 20;
  ws1::Tensor cand(ws1::DType::kBF16, {3072, 1024});
  auto* c = cand.data<ws1::bf16>();
  for (std::int64_t i = 0; i < n; ++i) c[i] = ws1::to_bf16(static_cast<float>(i % 256) / 256.0f);
  const ws1::Tensor ref(ws1::DType::kF32, {3072, 1024});
  const auto a = ws1::judge_accuracy("dW", cand, ref, tol);
  // Sorted, value v/256 occupies 1-based ranks v * 12288 + 1 .. (v + 1) * 12288. P99: rank
  // ceil(3145728 * 0.99) = 3114271, in v = 253; P99.9: rank ceil(3142582.272) = 3142583, v = 255.
  CHECK(a.abs_error.p99 == 253.0 / 256.0);
  CHECK(a.abs_error.p999 == 255.0 / 256.0);
  CHECK(a.abs_error.max == 255.0 / 256.0);
  CHECK(a.abs_error.mean == 255.0 / 512.0);
  REQUIRE(a.worst);
  CHECK(a.worst->index == ws1::Dims{0, 255});
  std::int64_t expected = 0;
  for (int v = 0; v < 256; ++v) expected += (static_cast<double>(v) / 256.0 > tol.atol) * 12288;
  CHECK(a.violations == expected);
}

TEST_CASE("stats: elements equal bit for bit rank as zero errors (sparse gradients)", "[judge]") {
  const ws1::Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kFloat32);
  // 990 elements equal on both sides, then errors 1..10 (x 2^-12), the largest last.
  const std::int64_t n = 1000;
  std::vector<float> ref(static_cast<std::size_t>(n), 1.5f), cand = ref;
  for (std::int64_t e = 1; e <= 10; ++e) cand[static_cast<std::size_t>(n - e)] = 1.5f + static_cast<float>(11 - e) / 4096.0f;
  const auto a = ws1::judge_accuracy("y", f32({n}, cand), f32({n}, ref), tol);
  // nearest rank: P99.9 is the 999th smallest = the 9th error; P99 the 990th = a zero.
  CHECK(a.abs_error.p999 == 9.0 / 4096.0);
  CHECK(a.abs_error.p99 == 0.0);
  CHECK(a.abs_error.max == 10.0 / 4096.0);
  CHECK(a.abs_error.mean == 55.0 / 4096.0 / 1000.0);
  CHECK(a.ulp_distance.p99 == 0.0);
  REQUIRE(a.worst);
  CHECK(a.worst->index == ws1::Dims{999});  // the largest error
  // All equal: every statistic 0, the first element is the worst (ratio 0).
  const auto same = ws1::judge_accuracy("y", f32({n}, ref), f32({n}, ref), tol);
  CHECK(same.abs_error.max == 0.0);
  CHECK(same.abs_error.p999 == 0.0);
  REQUIRE(same.worst);
  CHECK(same.worst->index == ws1::Dims{0});
  CHECK(same.worst->margin == 0.0);
  CHECK(same.violations == 0);
}

TEST_CASE("stats: tensors over several chunks merge like one pass", "[judge]") {
  const ws1::Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kFloat32);
  // 9 Mi elements (the judge splits at 4 Mi): two equal largest errors, in the second and the
  // third chunk; the first in row-major order is the worst.
  const std::int64_t n = std::int64_t{9} << 20;
  std::vector<float> ref(static_cast<std::size_t>(n), 0.25f), cand = ref;
  const std::int64_t first = (std::int64_t{5} << 20) + 3, second = n - 1;
  cand[static_cast<std::size_t>(first)] = 0.25f + 0x1p-10f;
  cand[static_cast<std::size_t>(second)] = 0.25f + 0x1p-10f;
  cand[7] = 0.25f + 0x1p-14f;
  const auto a = ws1::judge_accuracy("y", f32({n}, cand), f32({n}, ref), tol);
  REQUIRE(a.worst);
  CHECK(a.worst->index == ws1::Dims{first});
  CHECK(a.abs_error.max == 0x1p-10);
  CHECK(a.abs_error.mean == (2 * 0x1p-10 + 0x1p-14) / static_cast<double>(n));
  CHECK(a.abs_error.p999 == 0.0);
  const auto over = [&](float c) { return judge_test::exact_within(c, 0.25f, tol.atol, tol.rtol) ? 0 : 1; };
  CHECK(a.violations == 2 * over(0.25f + 0x1p-10f) + over(0.25f + 0x1p-14f));
}

TEST_CASE("max_abs_error is the judge's abs_error.max, NaN and infinity included, on every chunking",
          "[judge][max_abs_error]") {
  const ws1::Tolerance tol{ws1::CompareMode::kTolerance, 0.0, 0.0};
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // Across more than one of the judge's 4 Mi-element chunks, the largest error placed late.
  const std::int64_t n = (std::int64_t{1} << 22) + 1000;
  std::vector<float> c(static_cast<std::size_t>(n)), r(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    r[static_cast<std::size_t>(i)] = static_cast<float>(i % 977) / 64.0f - 7.0f;
    c[static_cast<std::size_t>(i)] = ws1::round_bf16(r[static_cast<std::size_t>(i)] * 1.001f);
  }
  c[static_cast<std::size_t>(n - 3)] = 100.0f;  // the largest error, in the second chunk
  c[5] = nan;                                   // NaN pairs are left out, as the judge does
  const auto cand = bf16({n}, c);
  const auto ref = f32({n}, r);
  const double m = ws1::max_abs_error(cand, ref);
  CHECK(m == ws1::judge_accuracy("x", cand, ref, tol).abs_error.max);
  CHECK(m == std::fabs(100.0 - static_cast<double>(r[static_cast<std::size_t>(n - 3)])));
  // float32 candidates; an infinity against a finite value; all-NaN; empty.
  const auto fc = f32({4}, {1.0f, inf, 2.0f, -3.0f}), fr = f32({4}, {1.5f, 0.0f, 2.0f, -3.25f});
  CHECK(ws1::max_abs_error(fc, fr) == ws1::judge_accuracy("x", fc, fr, tol).abs_error.max);
  CHECK(std::isinf(ws1::max_abs_error(fc, fr)));
  CHECK(std::isnan(ws1::max_abs_error(f32({2}, {nan, 1.0f}), f32({2}, {0.0f, nan}))));
  CHECK(ws1::max_abs_error(f32({0}, {}), f32({0}, {})) == 0.0);
  // A pair the judge cannot compare is the caller's mistake.
  CHECK_THROWS_AS(ws1::max_abs_error(f32({2}, {1.0f, 2.0f}), f32({3}, {1.0f, 2.0f, 3.0f})), std::logic_error);
}

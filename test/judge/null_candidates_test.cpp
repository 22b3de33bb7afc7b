// The null candidates of the accuracy judge (docs/decisions.md D29): zeros_pass, the vacuous
// verdict it leads to, and bias_ulp. Tolerances come from the contract only.
#include <cmath>
#include <limits>
#include <vector>

#include "judge_test_support.hpp"
#include "ws1/numeric.hpp"

using judge_test::bf16;
using judge_test::exact_within;
using judge_test::f32;
using judge_test::from_ord;
using judge_test::ord;
using judge_test::tolerance;
using ws1::ContractDType;
using ws1::DType;
using ws1::Judgment;
using ws1::OpClass;
using ws1::Verdict;

namespace {

ws1::Tolerance reduction_bf16() {
  return tolerance(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kBFloat16);
}

// n values spread over [lo, hi] with both signs, exact in float.
std::vector<float> spread(std::size_t n, float lo, float hi) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float t = static_cast<float>(i) / static_cast<float>(n - 1);
    v[i] = (i % 2 == 0 ? 1.0f : -1.0f) * (lo + (hi - lo) * t * 0.999f + 1e-7f * static_cast<float>(i));
  }
  return v;
}

// The bf16 values `steps` ulps from each reference value rounded to bf16.
std::vector<float> shifted(const std::vector<float>& r, int steps) {
  std::vector<float> c(r.size());
  for (std::size_t i = 0; i < r.size(); ++i)
    c[i] = from_ord(ord(ws1::round_bf16(r[i]), DType::kBF16) + steps, DType::kBF16);
  return c;
}

std::vector<float> zeros(std::size_t n) { return std::vector<float>(n, 0.0f); }

}  // namespace

TEST_CASE("null candidates: an all-zero candidate passing the row makes a passing tensor vacuous",
          "[judge][vacuity]") {
  const ws1::Tolerance tol = reduction_bf16();
  REQUIRE(tol.atol > 0);
  const std::size_t n = 1000;
  // Outputs well below atol: the row cannot tell a kernel from zeros.
  const std::vector<float> small = spread(n, 1e-4f, static_cast<float>(tol.atol) * 0.4f);
  // A planted candidate far off (the sign flipped: tens of thousands of bf16 ulps) that the row
  // passes: green before the null candidates, vacuous now.
  std::vector<float> flipped = shifted(small, 0);
  for (float& x : flipped) x = -x;
  const ws1::AccuracyTensor bad = ws1::judge_accuracy("y", bf16({1, 1000}, flipped), f32({1, 1000}, small), tol);
  CHECK(bad.violations == 0);
  CHECK(bad.ulp_distance.max > 10000);
  REQUIRE(bad.zeros_pass.has_value());
  CHECK(*bad.zeros_pass);
  CHECK(ws1::accuracy_verdict({&bad, 1}) == Verdict::kVacuous);
  CHECK_THAT(ws1::vacuity_reason({&bad, 1}), Catch::Contains("y (max |reference|"));
  // An all-zero candidate is vacuous too (it passes, as zeros_pass says).
  const ws1::AccuracyTensor z = ws1::judge_accuracy("y", bf16({1, 1000}, zeros(n)), f32({1, 1000}, small), tol);
  CHECK(z.violations == 0);
  CHECK(ws1::accuracy_verdict({&z, 1}) == Verdict::kVacuous);

  // The faithful twin: the same candidate rule on outputs of unit scale is green, the planted
  // one red.
  const std::vector<float> unit = spread(n, 0.5f, 4.0f);
  const ws1::AccuracyTensor good = ws1::judge_accuracy("y", bf16({1, 1000}, shifted(unit, 0)), f32({1, 1000}, unit), tol);
  CHECK_FALSE(*good.zeros_pass);
  CHECK(ws1::accuracy_verdict({&good, 1}) == Verdict::kGreen);
  CHECK(ws1::vacuity_reason({&good, 1}).empty());
  std::vector<float> unit_flipped = shifted(unit, 0);
  for (float& x : unit_flipped) x = -x;
  const ws1::AccuracyTensor red = ws1::judge_accuracy("y", bf16({1, 1000}, unit_flipped), f32({1, 1000}, unit), tol);
  CHECK(ws1::accuracy_verdict({&red, 1}) == Verdict::kRed);

  // One vacuous tensor makes the cell vacuous; one failing tensor makes it red.
  const std::vector<ws1::AccuracyTensor> both{good, bad};
  CHECK(ws1::accuracy_verdict(both) == Verdict::kVacuous);
  const std::vector<ws1::AccuracyTensor> with_red{red, bad};
  CHECK(ws1::accuracy_verdict(with_red) == Verdict::kRed);
}

TEST_CASE("null candidates: zeros_pass is decided exactly at the largest |reference|", "[judge][vacuity]") {
  for (const auto& [judgment, cls, dt] :
       {std::tuple{Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kBFloat16},
        std::tuple{Judgment::kGradientAccuracy, OpClass::kReduction, ContractDType::kBFloat16},
        std::tuple{Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kFloat32},
        std::tuple{Judgment::kForwardAccuracy, OpClass::kLogprob, ContractDType::kFloat32}}) {
    const ws1::Tolerance tol = tolerance(judgment, cls, dt);
    // The largest float r for which 0 is within the row, by the independent exact oracle.
    float lo = 0, hi = 1e3f;
    REQUIRE_FALSE(exact_within(0.0f, hi, tol.atol, tol.rtol));
    while (std::nextafter(lo, hi) < hi) {
      const float mid = lo + (hi - lo) / 2;
      const float m = mid == lo ? std::nextafter(lo, hi) : mid;
      (exact_within(0.0f, m, tol.atol, tol.rtol) ? lo : hi) = m;
    }
    INFO("atol " << tol.atol << " rtol " << tol.rtol << " boundary " << lo);
    const std::vector<float> at{lo / 2, -lo, 0.0f}, past{lo / 2, -hi, 0.0f};
    // The candidate is the reference rounded to the row's dtype: it passes.
    const auto judge = [&](const std::vector<float>& r) {
      return dt == ContractDType::kFloat32 ? ws1::judge_accuracy("t", f32({3}, r), f32({3}, r), tol)
                                           : ws1::judge_accuracy("t", bf16({3}, shifted(r, 0)), f32({3}, r), tol);
    };
    const ws1::AccuracyTensor a = judge(at), b = judge(past);
    CHECK(*a.reference_max_abs == static_cast<double>(lo));
    CHECK(*a.zeros_pass);
    CHECK(*b.reference_max_abs == static_cast<double>(hi));
    CHECK_FALSE(*b.zeros_pass);
  }
}

TEST_CASE("null candidates: a NaN or an infinity in the reference is not passed by zeros", "[judge][vacuity]") {
  const ws1::Tolerance tol = reduction_bf16();
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const ws1::AccuracyTensor t1 = ws1::judge_accuracy("t", bf16({3}, {0.0f, 0.0f, 0.0f}), f32({3}, {0.0f, nan, 0.0f}), tol);
  CHECK_FALSE(*t1.zeros_pass);
  CHECK(*t1.reference_max_abs == 0.0);  // NaN left out
  const ws1::AccuracyTensor t2 = ws1::judge_accuracy("t", bf16({3}, {0.0f, inf, 0.0f}), f32({3}, {0.0f, inf, 0.0f}), tol);
  CHECK(std::isinf(*t2.reference_max_abs));
  CHECK_FALSE(*t2.zeros_pass);
  // Not compared: no null candidate.
  const ws1::AccuracyTensor t3 = ws1::judge_accuracy("t", bf16({2}, {0.0f, 0.0f}), f32({3}, {0.0f, 0.0f, 0.0f}), tol);
  CHECK_FALSE(t3.comparable);
  CHECK_FALSE(t3.zeros_pass.has_value());
  CHECK_FALSE(t3.bias_ulp.has_value());
}

TEST_CASE("null candidates: bias_ulp is the mean signed ulp distance, exactly", "[judge][bias]") {
  const ws1::Tolerance tol = reduction_bf16();
  const std::size_t n = 5000;  // more than one summation block
  const std::vector<float> r = spread(n, 0.25f, 64.0f);
  const ws1::Shape shape{5, 1000};
  // The correctly rounded candidate: no bias. Shifted one ulp up or down: +1 / -1, while the row
  // passes all three (a drift no element test sees).
  const ws1::AccuracyTensor exact = ws1::judge_accuracy("y", bf16(shape, shifted(r, 0)), f32(shape, r), tol);
  const ws1::AccuracyTensor up = ws1::judge_accuracy("y", bf16(shape, shifted(r, 1)), f32(shape, r), tol);
  const ws1::AccuracyTensor down = ws1::judge_accuracy("y", bf16(shape, shifted(r, -1)), f32(shape, r), tol);
  CHECK(exact.violations == 0);
  CHECK(up.violations == 0);
  CHECK(down.violations == 0);
  CHECK(*exact.bias_ulp == 0.0);
  CHECK(*up.bias_ulp == 1.0);
  CHECK(*down.bias_ulp == -1.0);
  // Half the elements one up, the rest exact: +0.5; mixed signs cancel.
  std::vector<float> half = shifted(r, 0), mixed = shifted(r, 0);
  const std::vector<float> u = shifted(r, 1);
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 2 == 0) half[i] = u[i];
    mixed[i] = i % 2 == 0 ? u[i] : from_ord(ord(ws1::round_bf16(r[i]), DType::kBF16) - 1, DType::kBF16);
  }
  CHECK(*ws1::judge_accuracy("y", bf16(shape, half), f32(shape, r), tol).bias_ulp == 0.5);
  CHECK(*ws1::judge_accuracy("y", bf16(shape, mixed), f32(shape, r), tol).bias_ulp == 0.0);
  // NaN and infinite pairs are left out of the mean.
  std::vector<float> rn = r, cn = shifted(r, 1);
  rn[7] = std::numeric_limits<float>::quiet_NaN();
  cn[9] = std::numeric_limits<float>::infinity();
  rn[9] = std::numeric_limits<float>::infinity();
  CHECK(*ws1::judge_accuracy("y", bf16(shape, cn), f32(shape, rn), tol).bias_ulp == 1.0);
  // An f32 candidate's distance is clamped to 2^31 before the sum.
  const float big = std::numeric_limits<float>::max();
  const ws1::Tolerance f = tolerance(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kFloat32);
  CHECK(*ws1::judge_accuracy("y", f32({2}, {big, -big}), f32({2}, {-big, big}), f).bias_ulp == 0.0);
  CHECK(*ws1::judge_accuracy("y", f32({1}, {big}), f32({1}, {-big}), f).bias_ulp == 2147483648.0);
}

TEST_CASE("sign counts: which way each finite pair's error leans (v3's bias rule)", "[judge][bias]") {
  const ws1::Tolerance tol = reduction_bf16();
  const std::size_t n = 5000;  // alternating signs: 2500 positive, 2500 negative references
  const std::vector<float> r = spread(n, 0.25f, 64.0f);
  const ws1::Shape shape{5, 1000};
  const auto signs = [&](const std::vector<float>& c, const std::vector<float>& ref) {
    return ws1::judge_accuracy("y", bf16(shape, c), f32(shape, ref), tol).signs;
  };
  const ws1::SignCounts exact = signs(shifted(r, 0), r);
  CHECK(exact.finite == 5000);
  CHECK(exact.above + exact.below + exact.away + exact.toward == 0);
  CHECK(exact.positive == 2500);
  CHECK(exact.negative == 2500);
  // One step up: above everywhere; farther from zero where q > 0, nearer where q < 0.
  const ws1::SignCounts up = signs(shifted(r, 1), r);
  CHECK(up.above == 5000);
  CHECK(up.below == 0);
  CHECK(up.away == 2500);
  CHECK(up.toward == 2500);
  // One step toward zero everywhere (round-toward-zero's lean): nearer zero, above or below by sign.
  std::vector<float> shrunk(n);
  const std::vector<float> lo = shifted(r, -1), hi = shifted(r, 1);
  for (std::size_t i = 0; i < n; ++i) shrunk[i] = r[i] > 0 ? lo[i] : hi[i];
  const ws1::SignCounts tz = signs(shrunk, r);
  CHECK(tz.toward == 5000);
  CHECK(tz.away == 0);
  CHECK(tz.above == 2500);
  CHECK(tz.below == 2500);
  // NaN and infinite pairs are not finite pairs.
  std::vector<float> rn = r, cn = shifted(r, 1);
  rn[7] = std::numeric_limits<float>::quiet_NaN();
  cn[9] = std::numeric_limits<float>::infinity();
  rn[9] = std::numeric_limits<float>::infinity();
  const ws1::SignCounts nf = signs(cn, rn);
  CHECK(nf.finite == 4998);
  CHECK(nf.above == 4998);
}

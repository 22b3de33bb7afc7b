// The accuracy judge (spec §4.1): the element test at its exact boundary, NaN and infinities,
// pairs that cannot be compared, gold-dtype provenance, layouts and a planted defect.
#include <cmath>
#include <limits>
#include <optional>

#include "judge_test_support.hpp"
#include "ws1/numeric.hpp"

using judge_test::bf16;
using judge_test::contract;
using judge_test::f32;
using judge_test::tolerance;
using ws1::ContractDType;
using ws1::DType;
using ws1::Judgment;
using ws1::OpClass;
using ws1::Tolerance;

namespace {

struct Row {
  Judgment judgment;
  OpClass op_class;
  ContractDType dtype;
  Tolerance tol;
};

// Every tolerance-mode row of the two accuracy tables, straight from the contract.
std::vector<Row> accuracy_rows() {
  std::vector<Row> rows;
  for (Judgment j : {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy})
    for (const auto& [c, by_dtype] : contract().judgments.at(j).by_op_class)
      for (const auto& [t, row] : by_dtype)
        if (row.tolerance && row.tolerance->mode == ws1::CompareMode::kTolerance)
          rows.push_back({j, c, t, *row.tolerance});
  REQUIRE(rows.size() >= 24);
  return rows;
}

std::string row_name(const Row& r) {
  return std::string(ws1::contract_name(r.judgment)) + "." +
         std::string(ws1::contract_name(r.op_class)) + "." +
         std::string(ws1::contract_name(r.dtype));
}

// The last value of dtype `t` on the grid, walking away from r's rounding in direction `dir`
// (+1 up, -1 down), that the exact oracle accepts; nothing when even r's rounding fails (a
// bf16 candidate under a float32 row). Exponential then binary search: the accepted values
// form one interval around r.
std::optional<float> last_passing(float r, const Tolerance& tol, DType t, int dir) {
  const float start = t == DType::kBF16 ? ws1::round_bf16(r) : r;
  const auto pass = [&](std::int64_t o) {
    return judge_test::exact_within(judge_test::from_ord(o, t), r, tol.atol, tol.rtol);
  };
  const std::int64_t o0 = judge_test::ord(start, t);
  if (!pass(o0)) return std::nullopt;
  std::int64_t good = 0, step = 1;  // offsets from o0, in direction dir
  while (pass(o0 + dir * step)) {
    good = step;
    step *= 2;
  }
  std::int64_t bad = step;
  while (bad - good > 1) {
    const std::int64_t mid = good + (bad - good) / 2;
    (pass(o0 + dir * mid) ? good : bad) = mid;
  }
  return judge_test::from_ord(o0 + dir * good, t);
}

ws1::Tensor of_dtype(DType t, ws1::Shape shape, const std::vector<float>& values) {
  return t == DType::kBF16 ? bf16(std::move(shape), values) : f32(std::move(shape), values);
}

}  // namespace

TEST_CASE("accuracy: the boundary of every contract row is decided exactly", "[judge]") {
  // Reference values of several magnitudes and signs; for each the largest candidate that the
  // exact oracle accepts passes and the next representable value (f32 and bf16 grids) fails.
  const std::vector<float> refs = {1.0f, -2.5f, 3.14159274f, 0.0f, 1e-3f, -100.0f, 7.5e-6f, 0.3f};
  for (const Row& row : accuracy_rows()) {
    for (DType t : {DType::kF32, DType::kBF16}) {
      for (float r : refs) {
        for (int dir : {+1, -1}) {
          INFO(row_name(row) << " candidate " << ws1::dtype_contract_name(t) << " r=" << r
                             << " dir=" << dir);
          const std::optional<float> found = last_passing(r, row.tol, t, dir);
          if (!found) {  // no value of the grid passes: the judge agrees on r's rounding
            REQUIRE(t == DType::kBF16);
            CHECK_FALSE(ws1::within_tolerance(ws1::round_bf16(r), r, row.tol));
            continue;
          }
          const float edge = *found;
          const float beyond = judge_test::from_ord(judge_test::ord(edge, t) + dir, t);
          REQUIRE(judge_test::exact_within(edge, r, row.tol.atol, row.tol.rtol));
          REQUIRE_FALSE(judge_test::exact_within(beyond, r, row.tol.atol, row.tol.rtol));
          CHECK(ws1::within_tolerance(edge, r, row.tol));
          CHECK_FALSE(ws1::within_tolerance(beyond, r, row.tol));
          const ws1::AccuracyTensor a =
              ws1::judge_accuracy("y", of_dtype(t, {2}, {edge, beyond}), f32({2}, {r, r}), row.tol);
          CHECK(a.comparable);
          CHECK(a.violations == 1);
          REQUIRE(a.worst);
          CHECK(a.worst->index == ws1::Dims{1});
          CHECK(a.worst->violates);
          CHECK(a.worst->margin >= 1);  // |c - r| / allowed: over the allowance
          const ws1::AccuracyTensor ok =
              ws1::judge_accuracy("y", of_dtype(t, {1}, {edge}), f32({1}, {r}), row.tol);
          CHECK(ws1::passed(ok));
          REQUIRE(ok.worst);
          CHECK_FALSE(ok.worst->violates);
          CHECK(ok.worst->margin >= 0);
          CHECK(ok.worst->margin <= 1);
        }
      }
    }
  }
}

TEST_CASE("accuracy: an element exactly on atol + rtol*|r| passes, the next value fails",
          "[judge]") {
  // The contract's decimal tolerances are never exactly a difference of two floats, so the
  // tolerances here are the contract's rounded down to a power of two (0 stays 0): with r a
  // small multiple of that atol, r +- (atol + rtol*|r|) is then a float, and the element sits
  // exactly on the bound.
  const auto pow2_floor = [](double x) {
    return x > 0 ? std::exp2(std::floor(std::log2(x))) : 0.0;
  };
  for (const Row& row : accuracy_rows()) {
    const Tolerance tol{ws1::CompareMode::kTolerance, pow2_floor(row.tol.atol),
                        pow2_floor(row.tol.rtol)};
    REQUIRE(tol.atol > 0);
    const auto unit = static_cast<float>(tol.atol);
    for (float r : {0.0f, unit, -4 * unit, 3 * unit, -1024 * unit}) {
      INFO(row_name(row) << " r=" << r);
      const double bound = tol.atol + tol.rtol * std::fabs(r);
      for (int side : {+1, -1}) {
        const float on = static_cast<float>(r + side * bound);
        REQUIRE(static_cast<double>(on) == r + side * bound);  // exactly on the bound
        const float past = std::nextafter(on, side * std::numeric_limits<float>::infinity());
        CHECK(ws1::within_tolerance(on, r, tol));
        CHECK_FALSE(ws1::within_tolerance(past, r, tol));
        const auto a = ws1::judge_accuracy("y", f32({2}, {on, past}), f32({2}, {r, r}), tol);
        CHECK(a.violations == 1);
        REQUIRE(a.worst);
        CHECK(a.worst->index == ws1::Dims{1});  // the violation, not the element at ratio 1
        CHECK(a.worst->violates);
        const auto b = ws1::judge_accuracy("y", f32({1}, {on}), f32({1}, {r}), tol);
        CHECK(b.violations == 0);
        REQUIRE(b.worst);
        CHECK(b.worst->margin == 1);  // the whole allowance used, nothing more
        CHECK_FALSE(b.worst->violates);
      }
    }
  }
}

TEST_CASE("accuracy: a bound that double rounding would move is still decided exactly", "[judge]") {
  // atol is 2^a and rtol the double just below 2^p (both derived from the contract row), r =
  // 2^(a-1): the exact bound 2^a + 2^(a-1+p) - 2^(a-1+p-53) lies a hair below the float
  // c = r + 2^a + 2^(a-1+p), but evaluated in double it rounds up onto c - r. The element
  // must fail; a plain double comparison would pass it.
  const auto pow2_floor = [](double x) { return std::exp2(std::floor(std::log2(x))); };
  int rows = 0;
  for (const Row& row : accuracy_rows()) {
    if (row.tol.rtol == 0) continue;
    ++rows;
    const Tolerance tol{ws1::CompareMode::kTolerance, pow2_floor(row.tol.atol),
                        std::nextafter(pow2_floor(row.tol.rtol), 0.0)};
    const float r = static_cast<float>(tol.atol / 2);
    const double on_bound = tol.atol + (tol.atol / 2) * pow2_floor(row.tol.rtol);  // exact
    const float c = static_cast<float>(r + on_bound);
    INFO(row_name(row));
    REQUIRE(static_cast<double>(c) - r == on_bound);                    // c is a float
    REQUIRE(tol.atol + tol.rtol * std::fabs(r) == on_bound);            // double rounds onto it
    REQUIRE_FALSE(judge_test::exact_within(c, r, tol.atol, tol.rtol));  // exactly: outside
    CHECK_FALSE(ws1::within_tolerance(c, r, tol));
    const float inside = std::nextafter(c, 0.0f);
    REQUIRE(judge_test::exact_within(inside, r, tol.atol, tol.rtol));
    CHECK(ws1::within_tolerance(inside, r, tol));
    const auto a = ws1::judge_accuracy("y", f32({2}, {inside, c}), f32({2}, {r, r}), tol);
    CHECK(a.violations == 1);
    REQUIRE(a.worst);
    CHECK(a.worst->index == ws1::Dims{1});
    // In double, |c - r| / allowed is exactly 1 here; the record still says violation.
    CHECK(a.worst->margin == 1);
    CHECK(a.worst->violates);
    const std::vector<ws1::AccuracyTensor> v{a};
    CHECK(ws1::accuracy_reason(v).find("= 1 (over)") != std::string::npos);
  }
  CHECK(rows > 0);
}

TEST_CASE("accuracy: NaN never passes and is reported", "[judge]") {
  const Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kBFloat16);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_FALSE(ws1::within_tolerance(nan, 1.0f, tol));
  CHECK_FALSE(ws1::within_tolerance(1.0f, nan, tol));
  CHECK_FALSE(ws1::within_tolerance(nan, nan, tol));

  SECTION("NaN in the candidate") {
    const auto a = ws1::judge_accuracy("y", bf16({4}, {1.0f, nan, 2.0f, 0.5f}),
                                       f32({4}, {1.0f, 1.0f, 2.0f, 0.25f}), tol);
    CHECK(a.comparable);
    // the NaN, and element 3 as the exact oracle decides it
    CHECK(a.violations == 1 + !judge_test::exact_within(0.5f, 0.25f, tol.atol, tol.rtol));
    CHECK(a.nan_elements == 1);
    REQUIRE(a.worst);
    CHECK(a.worst->index == ws1::Dims{1});
    CHECK(std::isnan(a.worst->candidate));
    CHECK(a.worst->margin == std::numeric_limits<double>::infinity());
    CHECK(a.worst->violates);
    CHECK(a.abs_error.max == 0.25);  // the NaN is left out of the statistics
    CHECK_FALSE(ws1::passed(a));
    REQUIRE_FALSE(a.notes.empty());
    CHECK(a.notes[0].find("NaN never passes") != std::string::npos);
  }
  SECTION("the same NaN on both sides still fails") {
    const auto a = ws1::judge_accuracy("y", f32({2}, {nan, 3.0f}), f32({2}, {nan, 3.0f}), tol);
    CHECK(a.violations == 1);
    CHECK(a.nan_elements == 1);
    CHECK(a.abs_error.max == 0);
  }
  SECTION("all NaN: statistics are NaN, not zero") {
    const auto a = ws1::judge_accuracy("y", f32({2}, {1.0f, 2.0f}), f32({2}, {nan, nan}), tol);
    CHECK(a.violations == 2);
    CHECK(std::isnan(a.abs_error.max));
    CHECK(std::isnan(a.ulp_distance.p99));
  }
}

TEST_CASE("accuracy: equal infinities pass, any other infinity fails", "[judge]") {
  const Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kLogprob, ContractDType::kFloat32);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(ws1::within_tolerance(inf, inf, tol));
  CHECK(ws1::within_tolerance(-inf, -inf, tol));
  CHECK_FALSE(ws1::within_tolerance(inf, -inf, tol));
  CHECK_FALSE(ws1::within_tolerance(inf, 1.0f, tol));
  CHECK_FALSE(ws1::within_tolerance(std::numeric_limits<float>::max(), inf, tol));

  const auto a = ws1::judge_accuracy("logp", f32({2, 2}, {inf, -inf, 1.0f, 5.0f}),
                                     f32({2, 2}, {inf, -inf, inf, 5.0f}), tol);
  CHECK(a.violations == 1);
  CHECK(a.nan_elements == 0);
  REQUIRE(a.worst);
  CHECK(a.worst->index == ws1::Dims{1, 0});
  CHECK(a.worst->margin == std::numeric_limits<double>::infinity());
  CHECK(a.worst->violates);
  CHECK(a.abs_error.max == std::numeric_limits<double>::infinity());
  CHECK(a.abs_error.p99 == std::numeric_limits<double>::infinity());  // nearest rank 4 of 4
  CHECK(a.rel_error.max == std::numeric_limits<double>::infinity());
  REQUIRE(a.notes.size() == 1);
  CHECK(a.notes[0].find("infinity") != std::string::npos);

  const auto eq = ws1::judge_accuracy("logp", f32({2}, {inf, -inf}), f32({2}, {inf, -inf}), tol);
  CHECK(ws1::passed(eq));
  REQUIRE(eq.worst);
  CHECK(eq.worst->margin == 0);  // equal infinities: no error at all
  CHECK(eq.abs_error.max == 0);
  CHECK(eq.ulp_distance.max == 0);
}

TEST_CASE("accuracy: pairs that cannot be compared are red, never a crash", "[judge]") {
  const Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kBFloat16);
  SECTION("shapes differ") {
    const auto a = ws1::judge_accuracy("out", bf16({2, 3}, std::vector<float>(6, 1.0f)),
                                       f32({3, 2}, std::vector<float>(6, 1.0f)), tol);
    CHECK_FALSE(a.comparable);
    CHECK_FALSE(ws1::passed(a));
    CHECK(a.shape == ws1::Dims{2, 3});
    CHECK_FALSE(a.worst);
    REQUIRE(a.notes.size() == 1);
    CHECK(a.notes[0].find("[2, 3]") != std::string::npos);
    CHECK(a.notes[0].find("[3, 2]") != std::string::npos);
    const std::vector<ws1::AccuracyTensor> v{a};
    CHECK(ws1::accuracy_verdict(v) == ws1::Verdict::kRed);
    CHECK(ws1::accuracy_reason(v).find("out: not compared") != std::string::npos);
  }
  SECTION("empty candidate against a non-empty reference") {
    const auto a = ws1::judge_accuracy("out", f32({0}, {}), f32({1}, {1.0f}), tol);
    CHECK_FALSE(ws1::passed(a));
  }
  SECTION("integer candidate") {
    const auto a = ws1::judge_accuracy("out", ws1::Tensor(DType::kI32, {2}), f32({2}, {0, 0}), tol);
    CHECK_FALSE(a.comparable);
    CHECK(a.notes[0].find("int32") != std::string::npos);
  }
  SECTION("reference not float32, without a contract at hand") {
    const auto a = ws1::judge_accuracy("out", bf16({1}, {1.0f}), bf16({1}, {1.0f}), tol);
    CHECK_FALSE(a.comparable);
    CHECK(a.notes[0].find("reference dtype bfloat16 is not float32") != std::string::npos);
  }
  SECTION("undefined tensor is a programming error") {
    CHECK_THROWS_AS(ws1::judge_accuracy("out", ws1::Tensor(), f32({1}, {1.0f}), tol),
                    std::logic_error);
  }
}

TEST_CASE("accuracy: a bf16 reference is an error naming op and tensor (spec §9.3)", "[judge]") {
  // The planted defect of §9.3: det_gemm's gold computed in BF16.
  const Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kBFloat16);
  const ws1::Tensor cand = bf16({2}, {1.0f, 2.0f});
  const ws1::Tensor gold_bf16 = bf16({2}, {1.0f, 2.0f});
  const ws1::Status st = ws1::check_reference_dtype(contract(), gold_bf16, "det_gemm", "out");
  REQUIRE_FALSE(st.ok());
  const std::string msg = st.error().message();
  INFO(msg);
  CHECK(st.error().file == contract().file);
  CHECK(st.error().where == "policy.reference_dtype");
  CHECK(msg.find("det_gemm") != std::string::npos);
  CHECK(msg.find("'out'") != std::string::npos);
  CHECK(msg.find("bfloat16") != std::string::npos);
  CHECK(msg.find("float32") != std::string::npos);
  CHECK(msg.find('\n') == std::string::npos);

  const auto r = ws1::judge_accuracy(contract(), "det_gemm", "out", cand, gold_bf16, tol);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message() == msg);

  // Its twin with an FP32 gold passes both the check and the judgment.
  const ws1::Tensor gold = f32({2}, {1.0f, 2.0f});
  CHECK(ws1::check_reference_dtype(contract(), gold, "det_gemm", "out").ok());
  const auto g = ws1::judge_accuracy(contract(), "det_gemm", "out", cand, gold, tol);
  REQUIRE(g.ok());
  CHECK(ws1::passed(*g));
}

TEST_CASE("accuracy: bf16 rounding of the reference passes; a planted defect goes red", "[judge]") {
  const Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kElementwise, ContractDType::kBFloat16);
  std::vector<float> ref(8 * 16), cand(ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ref[i] = static_cast<float>(3.0 * std::sin(0.37 * static_cast<double>(i) + 0.1));
    cand[i] = ws1::round_bf16(ref[i]);
  }
  const auto good = ws1::judge_accuracy("y", bf16({8, 16}, cand), f32({8, 16}, ref), tol);
  CHECK(ws1::passed(good));
  CHECK(good.ulp_distance.max == 0);  // each element is the correctly rounded answer
  const std::vector<ws1::AccuracyTensor> gv{good};
  CHECK(ws1::accuracy_verdict(gv) == ws1::Verdict::kGreen);
  CHECK(ws1::accuracy_reason(gv).empty());

  cand[3 * 16 + 5] = ws1::round_bf16(cand[3 * 16 + 5] + 0.5f);  // the planted defect
  const auto bad = ws1::judge_accuracy("y", bf16({8, 16}, cand), f32({8, 16}, ref), tol);
  CHECK(bad.violations == 1);
  REQUIRE(bad.worst);
  CHECK(bad.worst->index == ws1::Dims{3, 5});
  CHECK(bad.worst->margin > 1);
  CHECK(bad.worst->violates);
  const std::vector<ws1::AccuracyTensor> bv{good, bad};
  CHECK(ws1::accuracy_verdict(bv) == ws1::Verdict::kRed);
  const std::string reason = ws1::accuracy_reason(bv);
  INFO(reason);
  CHECK(reason.rfind("y: 1 of 128 elements outside", 0) == 0);
  CHECK(reason.find("worst at [3, 5]") != std::string::npos);
}

TEST_CASE("accuracy: non-contiguous candidates are compared by logical index", "[judge]") {
  const Tolerance tol =
      tolerance(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kBFloat16);
  // stored [3, 4]; the transposed view is [4, 3]
  std::vector<float> stored(12);
  for (std::size_t i = 0; i < stored.size(); ++i) stored[i] = static_cast<float>(i) * 0.25f;
  const ws1::Tensor base = bf16({3, 4}, stored);
  const ws1::Tensor view = base.transpose(0, 1);
  REQUIRE_FALSE(view.is_contiguous());
  std::vector<float> logical;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) logical.push_back(stored[static_cast<std::size_t>(j * 4 + i)]);
  CHECK(ws1::passed(ws1::judge_accuracy("y", view, f32({4, 3}, logical), tol)));

  logical[1 * 3 + 2] += 1.0f;  // reference differs at logical [1, 2]
  const auto a = ws1::judge_accuracy("y", view, f32({4, 3}, logical), tol);
  CHECK(a.violations == 1);
  REQUIRE(a.worst);
  CHECK(a.worst->index == ws1::Dims{1, 2});
  CHECK(a.worst->candidate == stored[2 * 4 + 1]);

  // A strided reference too (a slice with a step in the outer dimension).
  const ws1::Tensor ref_wide = f32({4, 6}, std::vector<float>(24, 0.0f));
  const ws1::Tensor ref_view = ref_wide.slice(1, 0, 3);
  REQUIRE_FALSE(ref_view.is_contiguous());
  const auto z =
      ws1::judge_accuracy("y", bf16({4, 3}, std::vector<float>(12, 0.0f)), ref_view, tol);
  CHECK(ws1::passed(z));
}

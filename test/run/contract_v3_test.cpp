// Contract ws1-c1-v3's judgment rules through the real cell path: each rule is red on a planted
// candidate that ws1-c1-v2 let through and green on its faithful twin, and a v2 run's records
// carry no trace of the rules. Tolerances come from the shipped contracts only.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>

#include "run_test_support.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"
#include "ws1/ref.hpp"

using namespace ws1;
using test::gradient_cell;
using test::tensor_of;

namespace {

const test::Workload& smoke(const std::string& contract) { return test::workload("ws1-smoke", contract); }
const test::Workload& v2() { return smoke("ws1-c1-v2.json"); }
const test::Workload& v3() { return smoke("ws1-c1-v3.json"); }

double atol_rel(const test::Workload& w) {
  REQUIRE(w.contract.rules);
  REQUIRE(w.contract.rules->gradient_scale_free);
  return w.contract.rules->gradient_scale_free->atol_rel_by_dtype.at(ContractDType::kBFloat16);
}

}  // namespace

TEST_CASE("v3 scale-free gradients: each bf16 gradient tensor is judged at atol_rel x its peak |reference|",
          "[run][contract_v3]") {
  auto cpu = make_cpu_bf16_backend();
  const Cell c = gradient_cell(v3(), *cpu, "rms_norm", "rms_norm/primary/normal");
  CHECK(c.verdict == Verdict::kGreen);
  for (const AccuracyTensor& t : c.accuracy) {
    INFO(t.name);
    REQUIRE(t.rule);
    REQUIRE(t.reference_max_abs);
    CHECK(t.rule->source == "judgment_rules.gradient_scale_free");
    CHECK(t.rule->atol == atol_rel(v3()) * *t.reference_max_abs);
    CHECK(t.rule->rtol == c.threshold->rtol.value());
  }
  // Under v2 the same cell's records carry no rule: v2 artifacts are unchanged by v3.
  const Cell old = gradient_cell(v2(), *cpu, "rms_norm", "rms_norm/primary/normal");
  CHECK(old.verdict == Verdict::kGreen);
  for (const AccuracyTensor& t : old.accuracy) CHECK_FALSE(t.rule);
  // Forward cells keep their rows under v3.
  RunContext run = v3().run_context();
  FixtureGenerator gen;
  auto fwd = run_accuracy_cell(run, gen, *cpu, *find_op_impl("rms_norm"), Judgment::kForwardAccuracy,
                               v3().spec("rms_norm/primary/normal"));
  REQUIRE(fwd.ok());
  for (const AccuracyTensor& t : fwd->accuracy) CHECK_FALSE(t.rule);
}

TEST_CASE("planted defect: attention's dq with its sign flipped is vacuous under v2 and red under v3 on near_zero",
          "[run][contract_v3][planted]") {
  // On near_zero every |dq| is far below v2's gradient atol: the row passes an all-zero dq, so
  // the flipped dq passes too and the cell is only vacuous. v3 scales the bound to the tensor.
  test::PlantedBackend flipped("attention", test::Kernel{}, [](const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    auto out = find_op_impl("attention")->cpu_backward(in, ctx);
    if (!out) return out;
    for (NamedTensor& t : *out) {
      if (t.name != "dq") continue;
      auto* bits = t.tensor.data<std::uint16_t>();
      for (std::int64_t i = 0; i < t.tensor.numel(); ++i) bits[i] ^= 0x8000u;
    }
    return out;
  });
  CHECK(gradient_cell(v2(), flipped, "attention", "attention/primary/near_zero").verdict == Verdict::kVacuous);
  const Cell red = gradient_cell(v3(), flipped, "attention", "attention/primary/near_zero");
  CHECK(red.verdict == Verdict::kRed);
  CHECK_THAT(red.reason, Catch::Contains("dq"));
  // The faithful twin: cpu_bf16 is green under v3 where v2 could only call it vacuous.
  auto cpu = make_cpu_bf16_backend();
  CHECK(gradient_cell(v2(), *cpu, "attention", "attention/primary/near_zero").verdict == Verdict::kVacuous);
  CHECK(gradient_cell(v3(), *cpu, "attention", "attention/primary/near_zero").verdict == Verdict::kGreen);
}

TEST_CASE("v3 scale-free gradients: a correctly rounded gradient above the v2 row's bf16 floor is green",
          "[run][contract_v3]") {
  // Seeds x 2^12: |dweight| reaches the hundreds, where half a bf16 step exceeds linear_logp's
  // gradient atol with rtol 0; under v2 even the correctly rounded answer is red (the floor).
  auto cpu = make_cpu_bf16_backend();
  const Cell old = gradient_cell(v2(), *cpu, "linear_logp", "linear_logp/primary/normal", 4096.0f);
  REQUIRE(old.verdict == Verdict::kRed);
  CHECK(tensor_of(old, "dweight").floor_violations.value_or(0) > 0);
  const Cell now = gradient_cell(v3(), *cpu, "linear_logp", "linear_logp/primary/normal", 4096.0f);
  CHECK(now.verdict == Verdict::kGreen);
  // Its twin: the same large gradients one bf16 step too big everywhere are still red — the
  // rule scales the bound, it does not open it.
  test::PlantedBackend scaled("linear_logp", test::Kernel{}, [](const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    auto out = find_op_impl("linear_logp")->cpu_backward(in, ctx);
    if (!out) return out;
    for (NamedTensor& t : *out) {
      if (t.name != "dweight") continue;
      auto* bits = t.tensor.data<std::uint16_t>();
      for (std::int64_t i = 0; i < t.tensor.numel(); ++i)
        bits[i] = to_bf16(from_bf16(bf16{bits[i]}) * 1.0625f).bits;  // +6.25 %: 16 steps at 1.0
    }
    return out;
  });
  const Cell bad = gradient_cell(v3(), scaled, "linear_logp", "linear_logp/primary/normal", 4096.0f);
  CHECK(bad.verdict == Verdict::kRed);
  CHECK_THAT(bad.reason, Catch::Contains("dweight"));
}

TEST_CASE("v3 relative criterion: every float tensor is held to factor x the naive bf16 engine's error + one "
          "bf16 step at the peak; cpu_bf16 meets it on the smoke catalogue", "[run][contract_v3][relative]") {
  auto cpu = make_cpu_bf16_backend();
  const test::Workload& w = v3();
  const auto& rule = *w.contract.rules->relative_to_naive;
  RunContext run = w.run_context();
  FixtureGenerator gen;
  std::size_t judged = 0;
  for (const FixtureSpec& spec : w.catalogue) {
    if (spec.tier == Tier::kInvariance) continue;
    for (const Judgment j : {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy}) {
      auto cell = run_accuracy_cell(run, gen, *cpu, *find_op_impl(spec.op), j, spec);
      REQUIRE(cell.ok());
      INFO(cell->id << ": " << cell->reason);
      CHECK(cell->verdict != Verdict::kRed);
      const bool any_relative = std::any_of(cell->accuracy.begin(), cell->accuracy.end(),
                                            [](const AccuracyTensor& t) { return t.relative.has_value(); });
      const bool naive_stage = std::any_of(cell->timing.begin(), cell->timing.end(),
                                           [](const StageTime& st) { return st.stage == "naive"; });
      CHECK(naive_stage == any_relative);  // the naive engine's time is its own stage
      for (const AccuracyTensor& t : cell->accuracy) {
        if (!t.relative) continue;
        ++judged;
        CHECK(t.relative->factor == rule.factor_by_judgment.at(j));
        CHECK(t.relative->bound == t.relative->factor * t.relative->naive_max_abs + t.relative->floor);
        CHECK(t.relative->passed);
      }
    }
  }
  CHECK(judged > 100);
}

TEST_CASE("planted defect: attention's o with its sign flipped is vacuous under v2 and red under v3's relative "
          "criterion on near_zero; cpu_bf16 is green there", "[run][contract_v3][relative][planted]") {
  test::PlantedBackend flipped("attention", [](const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    auto out = find_op_impl("attention")->cpu_forward(in, ctx);
    if (!out) return out;
    for (NamedTensor& t : *out) {
      if (t.name != "o") continue;
      auto* bits = t.tensor.data<std::uint16_t>();
      for (std::int64_t i = 0; i < t.tensor.numel(); ++i) bits[i] ^= 0x8000u;
    }
    return out;
  });
  auto forward = [](const test::Workload& w, Backend& b) {
    RunContext run = w.run_context();
    FixtureGenerator gen;
    auto cell = run_accuracy_cell(run, gen, b, *find_op_impl("attention"), Judgment::kForwardAccuracy,
                                  w.spec("attention/primary/near_zero"));
    REQUIRE(cell.ok());
    return std::move(cell).value();
  };
  CHECK(forward(v2(), flipped).verdict == Verdict::kVacuous);
  const Cell red = forward(v3(), flipped);
  CHECK(red.verdict == Verdict::kRed);
  CHECK_THAT(red.reason, Catch::Contains("relative bound") && Catch::Contains("naive bf16"));
  auto cpu = make_cpu_bf16_backend();
  CHECK(forward(v2(), *cpu).verdict == Verdict::kVacuous);
  CHECK(forward(v3(), *cpu).verdict == Verdict::kGreen);
}

TEST_CASE("v3 relative criterion: the naive engine's error is computed once per fixture and shared by the runs "
          "of other backends (a gate's), with the same records", "[run][contract_v3][relative]") {
  const test::Workload& w = v3();
  RunContext run = w.run_context();
  REQUIRE(run.naive_errors != nullptr);  // every run context keeps one
  const FixtureSpec& spec = w.spec("rms_norm/primary/normal");
  const auto has_naive_stage = [](const Cell& c) {
    return std::any_of(c.timing.begin(), c.timing.end(), [](const StageTime& st) { return st.stage == "naive"; });
  };
  const auto relatives = [](const Cell& c) {
    std::vector<double> v;
    for (const AccuracyTensor& t : c.accuracy)
      if (t.relative) v.push_back(t.relative->naive_max_abs);
    return v;
  };
  FixtureGenerator gen;
  auto cpu = make_cpu_bf16_backend();
  auto first = run_accuracy_cell(run, gen, *cpu, *find_op_impl("rms_norm"), Judgment::kGradientAccuracy, spec);
  REQUIRE(first.ok());
  CHECK(has_naive_stage(*first));
  // Another backend (a planted one, off by a factor) on the same fixture: the memo answers.
  test::PlantedBackend scaled("rms_norm", test::Kernel{}, [](const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    auto out = find_op_impl("rms_norm")->cpu_backward(in, ctx);
    if (!out) return out;
    for (NamedTensor& t : *out)
      if (t.name == "dx") {
        auto* bits = t.tensor.data<std::uint16_t>();
        for (std::int64_t i = 0; i < t.tensor.numel(); ++i) bits[i] = to_bf16(from_bf16(bf16{bits[i]}) * 1.25f).bits;
      }
    return out;
  });
  auto second = run_accuracy_cell(run, gen, scaled, *find_op_impl("rms_norm"), Judgment::kGradientAccuracy, spec);
  REQUIRE(second.ok());
  CHECK_FALSE(has_naive_stage(*second));
  CHECK(relatives(*second) == relatives(*first));
  CHECK(second->verdict == Verdict::kRed);  // the memo changes where the number comes from, not the verdict
  // Without a memo the engine runs again and gives the same numbers.
  run.naive_errors = nullptr;
  auto third = run_accuracy_cell(run, gen, *cpu, *find_op_impl("rms_norm"), Judgment::kGradientAccuracy, spec);
  REQUIRE(third.ok());
  CHECK(has_naive_stage(*third));
  CHECK(relatives(*third) == relatives(*first));
}

namespace {

// A float rounded to bf16 three ways: to nearest even (the faithful twin), toward zero (what
// truncating the low half does), toward +infinity.
enum class Rounding { kNearest, kTowardZero, kUpward };
std::uint16_t round_to_bf16(float f, Rounding mode) {
  const auto b = std::bit_cast<std::uint32_t>(f);
  const auto high = static_cast<std::uint16_t>(b >> 16);
  switch (mode) {
    case Rounding::kNearest:
      return to_bf16(f).bits;
    case Rounding::kTowardZero:
      return high;
    case Rounding::kUpward:
      return (b & 0xffffu) != 0 && f > 0 ? static_cast<std::uint16_t>(high + 1) : high;
  }
  return high;
}

// rms_norm's forward as the FP32 reference rounded to bf16 by `mode`: every element within one
// bf16 step of the reference, so within v2's row whatever the mode.
test::PlantedBackend rounded_reference(Rounding mode) {
  return test::PlantedBackend("rms_norm", [mode](const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    auto out = ref::forward("rms_norm", in, ctx);
    if (!out) return out;
    for (NamedTensor& t : *out) {
      Tensor b(DType::kBF16, t.tensor.shape());
      for (std::int64_t i = 0; i < b.numel(); ++i) b.data<std::uint16_t>()[i] = round_to_bf16(t.tensor.data<float>()[i], mode);
      t.tensor = std::move(b);
    }
    return out;
  });
}

Cell forward_cell(const test::Workload& w, Backend& backend, const std::string& op, const std::string& fixture) {
  RunContext run = w.run_context();
  FixtureGenerator gen;
  auto cell = run_accuracy_cell(run, gen, backend, *find_op_impl(op), Judgment::kForwardAccuracy, w.spec(fixture));
  REQUIRE(cell.ok());
  return std::move(cell).value();
}

}  // namespace

TEST_CASE("planted defect: a forward rounded toward zero, or upward, is green under v2 and red under v3's bias "
          "rule; rounded to nearest it is green", "[run][contract_v3][bias][planted]") {
  const std::string fixture = "rms_norm/primary/normal";
  auto nearest = rounded_reference(Rounding::kNearest);
  const Cell twin = forward_cell(v3(), nearest, "rms_norm", fixture);
  CHECK(twin.verdict == Verdict::kGreen);
  const AccuracyTensor& y = tensor_of(twin, "y");
  REQUIRE(y.bias);
  CHECK(y.bias->passed);
  CHECK(y.bias->counts.above + y.bias->counts.below == 0);  // correctly rounded: no sign at all
  CHECK(y.bias->counts.finite == y.numel);
  CHECK(y.bias->max_mean == v3().contract.rules->bias->max_mean_by_dtype.at(ContractDType::kBFloat16));

  for (const Rounding mode : {Rounding::kTowardZero, Rounding::kUpward}) {
    INFO((mode == Rounding::kTowardZero ? "toward zero" : "upward"));
    auto planted = rounded_reference(mode);
    const Cell old = forward_cell(v2(), planted, "rms_norm", fixture);
    CHECK(old.verdict == Verdict::kGreen);  // every element within one step: v2 cannot see it
    CHECK_FALSE(tensor_of(old, "y").bias);  // and v2 records carry no bias
    const Cell red = forward_cell(v3(), planted, "rms_norm", fixture);
    CHECK(red.verdict == Verdict::kRed);
    CHECK_THAT(red.reason, Catch::Contains("the errors lean one way"));
    const AccuracyTensor& t = tensor_of(red, "y");
    REQUIRE(t.bias);
    CHECK_FALSE(t.bias->passed);
    CHECK(t.violations == 0);  // red by the rule alone
    if (mode == Rounding::kTowardZero) {
      CHECK(t.bias->counts.away == 0);
      CHECK(t.bias->growth < -t.bias->growth_bound);  // nearer zero everywhere it differs
      CHECK(std::fabs(t.bias->drift) <= t.bias->drift_bound);  // but no lean up or down: the signs of y mix
    } else {
      CHECK(t.bias->counts.below == 0);
      CHECK(t.bias->drift > t.bias->drift_bound);
    }
  }
}

TEST_CASE("v3 bias rule: the sign test and the mean bound", "[judge][contract_v3][bias]") {
  SignCounts s;
  s.finite = 10000;
  // 60 of 10000 above, none below: beyond chance (60 > 6 x sqrt(60) = 46), but a mean of 0.006,
  // within 0.1: a lean too small to matter, green.
  s.above = 60;
  CHECK(judge_bias(s, 0.1, 6).passed);
  CHECK(judge_bias(s, 0.1, 6).drift == 0.006);
  // 2000 above, none below: mean 0.2 over 0.1, and 2000 > 6 x sqrt(2000): red.
  s.above = 2000;
  BiasCheck b = judge_bias(s, 0.1, 6);
  CHECK_FALSE(b.passed);
  CHECK(b.drift_bound == 0.1);
  // The same lean on 40 pairs: mean 0.2 over 0.1, but 8 above 0 below is within 6 x sqrt(8) = 17:
  // too few to tell from chance, green.
  s = SignCounts{};
  s.finite = 40;
  s.above = 8;
  b = judge_bias(s, 0.1, 6);
  CHECK(b.passed);
  CHECK(b.drift_bound == 6 * std::sqrt(8.0) / 40);
  // Balanced signs pass whatever their number; no finite pair passes.
  s = SignCounts{};
  s.finite = 1000;
  s.away = s.toward = 500;
  CHECK(judge_bias(s, 0.1, 6).passed);
  CHECK(judge_bias(SignCounts{}, 0.1, 6).passed);
}

// Contract ws1-c1-v3's judgment rules through the real cell path: each rule is red on a planted
// candidate that ws1-c1-v2 let through and green on its faithful twin, and a v2 run's records
// carry no trace of the rules. Tolerances come from the shipped contracts only.
#include <catch2/catch.hpp>

#include <algorithm>

#include "run_test_support.hpp"
#include "ws1/numeric.hpp"

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

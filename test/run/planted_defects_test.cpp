// Planted defects through the real cell path (fixture -> backend -> reference -> judge): a
// backend that is cpu_bf16 except for one defective kernel must turn its cells red, while
// cpu_bf16 itself is green on the same cells. Tolerances come from the contract only.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "run_test_support.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;
using test::gradient_cell;
using test::tensor_of;

namespace {

using test::Kernel;
using DefectBackend = test::PlantedBackend;

const test::Workload& setup() { return test::workload("ws1-qwen3-8b-dense"); }
const FixtureSpec& spec(const std::string& id) { return setup().spec(id); }

Verdict run_cell(Backend& backend, const std::string& op, const std::string& fixture) {
  RunContext run = setup().run_context();
  FixtureGenerator gen;
  auto cell = run_accuracy_cell(run, gen, backend, *find_op_impl(op), Judgment::kForwardAccuracy,
                                spec(fixture));
  REQUIRE(cell.ok());
  if (cell->verdict == Verdict::kRed) INFO(cell->reason);
  return cell->verdict;
}

// rms_norm written with a defect: bf16 accumulation of the sum of squares, or no eps.
Kernel rms_norm_variant(bool bf16_accumulation, bool drop_eps) {
  return [=](const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    const Tensor& xt = *find_tensor(in, "x");
    const Tensor& wt = *find_tensor(in, "weight");
    const std::int64_t width = xt.shape().back(), rows = xt.numel() / width;
    Tensor y(DType::kBF16, xt.shape());
    const auto* x = xt.data<std::uint16_t>();
    const auto* w = wt.data<std::uint16_t>();
    auto* out = y.data<std::uint16_t>();
    for (std::int64_t r = 0; r < rows; ++r) {
      float ss = 0.0f;
      for (std::int64_t i = 0; i < width; ++i) {
        const float v = from_bf16(bf16{x[r * width + i]});
        ss = bf16_accumulation ? round_bf16(ss + v * v) : ss + v * v;
      }
      const float eps = drop_eps ? 0.0f : static_cast<float>(ctx.rms_norm_eps);
      const float rstd = 1.0f / std::sqrt(ss / static_cast<float>(width) + eps);
      for (std::int64_t i = 0; i < width; ++i)
        out[r * width + i] =
            to_bf16(from_bf16(bf16{x[r * width + i]}) * rstd * from_bf16(bf16{w[i]})).bits;
    }
    return Tensors{{"y", y}};
  };
}

}  // namespace

TEST_CASE("cpu_bf16 rms_norm is green on the cells the defects use", "[run][planted]") {
  auto cpu = make_cpu_bf16_backend();
  CHECK(run_cell(*cpu, "rms_norm", "rms_norm/primary/normal") == Verdict::kGreen);
  CHECK(run_cell(*cpu, "rms_norm", "rms_norm/primary/near_zero") == Verdict::kGreen);
  // The defect harness itself, without a defect, is green too (the red below is the defect's).
  DefectBackend clean("rms_norm", rms_norm_variant(false, false));
  CHECK(run_cell(clean, "rms_norm", "rms_norm/primary/normal") == Verdict::kGreen);
  CHECK(run_cell(clean, "rms_norm", "rms_norm/primary/near_zero") == Verdict::kGreen);
}

TEST_CASE("planted defect: bf16 accumulation in rms_norm turns the cell red", "[run][planted]") {
  DefectBackend bad("rms_norm", rms_norm_variant(true, false));
  CHECK(run_cell(bad, "rms_norm", "rms_norm/primary/normal") == Verdict::kRed);
}

TEST_CASE("planted defect: a missing eps in rms_norm turns the near-zero cell red", "[run][planted]") {
  DefectBackend bad("rms_norm", rms_norm_variant(false, true));
  // With unit-scale inputs eps is invisible (mean(x^2) ~ 1 >> 1e-6); the near-zero fixture
  // (|x| ~ 1e-3, mean(x^2) ~ eps) is the one that exposes it.
  CHECK(run_cell(bad, "rms_norm", "rms_norm/primary/near_zero") == Verdict::kRed);
}

TEST_CASE("a candidate output in the wrong dtype is red even when its values are close", "[run][planted]") {
  // rms_norm's declared output is bf16; an FP32 output (the reference itself!) must not pass.
  DefectBackend bad("rms_norm", [](const Tensors& in, const OpContext& ctx) {
    return find_op_impl("rms_norm")->reference_forward(in, ctx);
  });
  CHECK(run_cell(bad, "rms_norm", "rms_norm/primary/normal") == Verdict::kRed);
}

TEST_CASE("a fixture whose bytes are not pinned is refused, not judged", "[run]") {
  const test::Workload& s = setup();
  FixtureLock lock = s.lock;
  for (auto& [id, hash] : lock.fixtures)
    if (id == "rms_norm/primary/normal") hash = std::string(32, '0');
  RunContext run = make_run_context(s.contract, s.manifest, lock, "cpu_bf16", 0);
  FixtureGenerator gen;
  auto cpu = make_cpu_bf16_backend();
  auto cell = run_accuracy_cell(run, gen, *cpu, *find_op_impl("rms_norm"),
                                Judgment::kForwardAccuracy, spec("rms_norm/primary/normal"));
  REQUIRE_FALSE(cell.ok());
  CHECK(cell.error().message().find("rms_norm/primary/normal") != std::string::npos);
}

namespace {

}  // namespace

TEST_CASE("a red bf16 tensor below the row's bf16 floor says so; a red one above it does not", "[run][planted]") {
  const test::Workload& smoke = test::workload("ws1-smoke");
  auto cpu = make_cpu_bf16_backend();
  // Green: the floor is not judged.
  const Cell green = gradient_cell(smoke, *cpu, "linear_logp", "linear_logp/primary/normal", 1.0f);
  REQUIRE(green.verdict == Verdict::kGreen);
  CHECK_FALSE(tensor_of(green, "dweight").floor_violations.has_value());
  // Gradient seeds x 2^12: |dweight| reaches the hundreds, where half a bf16 step exceeds the
  // row's atol with rtol 0 (the linear_logp row): even the correctly rounded answer fails there,
  // so the reason says the row is below the bf16 floor, not that the kernel is wrong.
  const Cell large = gradient_cell(smoke, *cpu, "linear_logp", "linear_logp/primary/normal", 4096.0f);
  REQUIRE(large.verdict == Verdict::kRed);
  const AccuracyTensor& dw = tensor_of(large, "dweight");
  REQUIRE(dw.floor_violations.has_value());
  CHECK(*dw.floor_violations > 0);
  CHECK(*dw.floor_violations <= dw.violations + dw.numel);
  CHECK_THAT(large.reason, Catch::Contains("dweight") && Catch::Contains("below the bfloat16 floor"));
  // The twin: a kernel defect (bf16 accumulation in rms_norm) is red, and the correctly rounded
  // reference meets the row — no floor in the reason.
  RunContext run = setup().run_context();
  FixtureGenerator gen;
  DefectBackend bad("rms_norm", rms_norm_variant(true, false));
  auto cell = run_accuracy_cell(run, gen, bad, *find_op_impl("rms_norm"), Judgment::kForwardAccuracy,
                                spec("rms_norm/primary/normal"));
  REQUIRE(cell.ok());
  REQUIRE(cell->verdict == Verdict::kRed);
  REQUIRE(tensor_of(*cell, "y").floor_violations.has_value());
  CHECK(*tensor_of(*cell, "y").floor_violations == 0);
  CHECK_THAT(cell->reason, !Catch::Contains("floor"));
}

TEST_CASE("planted defect: attention with its sign flipped is red at unit scale and vacuous, not green, on "
          "near_zero", "[run][planted][vacuity]") {
  // o = -attention(q, k, v): tens of thousands of bf16 ulps from the answer. On near_zero every
  // |o| is far below the row's atol, so the row passes it (green before D29); the null
  // candidates show the cell cannot fail (vacuous), and the same defect is red on normal.
  DefectBackend flipped("attention", [](const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    auto out = find_op_impl("attention")->cpu_forward(in, ctx);
    if (!out) return out;
    for (NamedTensor& t : *out) {
      if (t.name != "o") continue;
      auto* bits = t.tensor.data<std::uint16_t>();
      for (std::int64_t i = 0; i < t.tensor.numel(); ++i) bits[i] ^= 0x8000u;  // the sign bit
    }
    return out;
  });
  CHECK(run_cell(flipped, "attention", "attention/primary/normal") == Verdict::kRed);
  CHECK(run_cell(flipped, "attention", "attention/primary/near_zero") == Verdict::kVacuous);
  // The faithful twin: cpu_bf16 is green where the row can fail, and the near_zero cell is
  // vacuous for it too (a property of the fixture and the row, not of the candidate).
  auto cpu = make_cpu_bf16_backend();
  CHECK(run_cell(*cpu, "attention", "attention/primary/normal") == Verdict::kGreen);
  CHECK(run_cell(*cpu, "attention", "attention/primary/near_zero") == Verdict::kVacuous);
}

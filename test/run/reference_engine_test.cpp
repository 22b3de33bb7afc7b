// Reference engines (ws1/reference.hpp) in the accuracy runner: the CPU references by default,
// recorded in the cell; another engine when the run names one, recorded with its math mode; and
// the gold-dtype check on every engine's output (a bf16 "reference" is an error, never a verdict).
#include <catch2/catch.hpp>

#include "run_test_support.hpp"
#include "ws1/numeric.hpp"
#include "ws1/op_catalogue.hpp"
#include "ws1/ref.hpp"
#include "ws1/reference.hpp"

using namespace ws1;

namespace {

// The CPU references under another name, or with their float outputs rounded to bf16.
class Relabelled final : public ReferenceEngine {
 public:
  explicit Relabelled(bool bf16_gold) : bf16_gold_(bf16_gold) {}
  std::string name() const override { return "relabelled"; }
  Result<ReferenceResult> forward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return wrap(cpu_->forward(op, in, ctx));
  }
  Result<ReferenceResult> backward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return wrap(cpu_->backward(op, in, ctx));
  }

 private:
  Result<ReferenceResult> wrap(Result<ReferenceResult> r) const {
    if (!r) return r;
    if (bf16_gold_)
      for (NamedTensor& t : r->tensors) {
        if (t.tensor.dtype() != DType::kF32) continue;
        Tensor b(DType::kBF16, t.tensor.shape());
        for (std::int64_t i = 0; i < b.numel(); ++i) b.data<std::uint16_t>()[i] = to_bf16(t.tensor.data<float>()[i]).bits;
        t.tensor = b;
      }
    r->provenance = {"relabelled engine", "CUBLAS_PEDANTIC_MATH"};
    return r;
  }
  bool bf16_gold_;
  std::unique_ptr<ReferenceEngine> cpu_ = make_cpu_reference();
};

Result<Cell> cell(ReferenceEngine* engine, Judgment j) {
  const test::Workload& w = test::workload("ws1-smoke");
  RunContext run = w.run_context();
  run.reference = engine;
  FixtureGenerator gen;
  auto cpu = make_cpu_bf16_backend();
  return run_accuracy_cell(run, gen, *cpu, *find_op_impl("rms_norm"), j, w.spec("rms_norm/primary/normal"));
}

}  // namespace

TEST_CASE("accuracy cells record the engine that computed their reference", "[run][reference]") {
  for (Judgment j : {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy}) {
    auto by_default = cell(nullptr, j);
    REQUIRE(by_default.ok());
    REQUIRE(by_default->reference.has_value());
    CHECK(by_default->reference->engine == "cpu_fp32 (lib/ref)");
    CHECK_FALSE(by_default->reference->math_mode.has_value());
    Relabelled other(false);
    auto named = cell(&other, j);
    REQUIRE(named.ok());
    CHECK(named->reference->engine == "relabelled engine");
    CHECK(named->reference->math_mode == std::optional<std::string>("CUBLAS_PEDANTIC_MATH"));
    CHECK(named->verdict == by_default->verdict);  // the same gold values: the same verdict
  }
}

TEST_CASE("a reference engine whose gold is bf16 is an error, not a verdict", "[run][reference][planted]") {
  Relabelled bf16_gold(true);
  auto c = cell(&bf16_gold, Judgment::kForwardAccuracy);
  REQUIRE_FALSE(c.ok());
  INFO(c.error().message());
  CHECK(c.error().message().find("float32") != std::string::npos);
}

TEST_CASE("lib/ref defines every op of the catalogue and refuses another name", "[run][reference]") {
  for (const OpInfo& info : op_catalogue()) {
    INFO(info.name);
    CHECK(ref::defines(info.name));
  }
  CHECK_FALSE(ref::defines("no_such_op"));
  const auto r = ref::forward("no_such_op", {}, OpContext{});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::kBadInput);
  CHECK_THAT(r.error().message(), Catch::Contains("no_such_op") && Catch::Contains("no FP32 reference"));
  // A missing input is the reference's own refusal, naming op and tensor (exit 2).
  const auto m = ref::backward("silu", {}, OpContext{});
  REQUIRE_FALSE(m.ok());
  CHECK(m.error().code == ExitCode::kBadInput);
  CHECK_THAT(m.error().message(), Catch::Contains("silu: x: missing input"));
}

// The cuda_fp32 reference engine (ws1cuda/cuda_reference.hpp) against the CPU references: on
// every accuracy fixture of the workload (WS1_GPU_WORKLOAD) of every op the engine computes on
// the device, forward and backward, each FP32 output within the contract's float32 row of the
// op's class (the two differ only in FP32 summation order), cuBLAS pedantic math read back where
// cuBLAS ran; and accuracy cells computed with it reach the same verdicts as with the CPU
// references (the known-red list included).
#include "gpu_test_support.hpp"
#include "ws1/judge.hpp"

#include <map>
#include <set>
#include "attention_f64.hpp"
#include "lm_head_f64.hpp"
#include "ws1cuda/cuda_reference.hpp"

using namespace ws1;

namespace {

ReferenceEngine& cuda_reference() {
  static std::unique_ptr<ReferenceEngine> e = [] {
    auto r = ws1cuda::make_cuda_fp32_reference();
    if (!r) FAIL(r.error().message());
    return std::move(r).value();
  }();
  return *e;
}

}  // namespace

TEST_CASE("cuda_fp32 references agree with the CPU references within the float32 rows", "[gpu][reference]") {
  const test::Workload& w = test::workload(test::gpu_workload_name());
  const RunContext run = test::cuda_run_context(w);
  auto cpu = make_cpu_reference();
  int compared = 0;
  std::set<std::string> on_device;
  for (const FixtureSpec& spec : w.catalogue) {
    if (spec.tier == Tier::kInvariance) continue;
    const Op& op = *find_op_impl(spec.op);
    FixtureGenerator gen;
    auto in = generated_inputs(run, gen, spec);
    REQUIRE(in.ok());
    for (bool backward : {false, true}) {
      INFO(spec.id << (backward ? " backward" : " forward"));
      auto g = backward ? cuda_reference().backward(op, in->tensors, run.op_context)
                        : cuda_reference().forward(op, in->tensors, run.op_context);
      auto c = backward ? cpu->backward(op, in->tensors, run.op_context) : cpu->forward(op, in->tensors, run.op_context);
      REQUIRE(g.ok());
      REQUIRE(c.ok());
      if (g->provenance.engine.rfind("cuda_fp32", 0) != 0) {
        CHECK(g->provenance.engine == c->provenance.engine);  // handed to the CPU engine
        continue;
      }
      on_device.insert(spec.op);
      if (g->provenance.math_mode) CHECK(*g->provenance.math_mode == "CUBLAS_PEDANTIC_MATH");
      const Judgment j = backward ? Judgment::kGradientAccuracy : Judgment::kForwardAccuracy;
      auto row = w.contract.threshold(j, op_class_for(run, op), ContractDType::kFloat32, run.arch);
      REQUIRE(row.ok());
      REQUIRE(row->tolerance.has_value());
      REQUIRE(g->tensors.size() == c->tensors.size());
      for (std::size_t i = 0; i < c->tensors.size(); ++i) {
        const std::string& name = c->tensors[i].name;
        const Tensor& theirs = c->tensors[i].tensor;
        const Tensor* mine = find_tensor(g->tensors, name);
        REQUIRE(mine != nullptr);
        ++compared;
        if (theirs.dtype() != DType::kF32) {  // index outputs (pack's cu_seqlens): the same integers
          INFO(name);
          CHECK(passed(judge_bitwise(name, *mine, theirs, NanPolicy::kFail)));
          continue;
        }
        auto t = judge_accuracy(w.contract, op.name(), name, *mine, theirs, *row->tolerance);
        REQUIRE(t.ok());
        INFO(name << ": worst |err|/allowed " << (t->worst ? t->worst->margin : 0.0));
        if (passed(*t)) continue;
        // Outside the float32 row of each other: two FP32 golds summing in different orders on
        // a fixture that cancels (outlier channels, scaled logits) or over a long reduction
        // (lm_head's V). DESIGN §4's budget for a gold's own error then decides (1% of the bf16
        // row's atol, the row the verdicts use; docs/decisions.md D21, D26): where a float64
        // truth exists (attention, lm_head) the device gold must be within it of the truth, and
        // lm_head's CPU gold too (its tree order is there for that); attention's CPU gold is
        // reported, not judged (on the outlier-channel dq it is the further of the two, D21);
        // elsewhere the two golds must differ by less than it. Reported as a warning either way.
        auto bf16_row = w.contract.threshold(j, op_class_for(run, op), ContractDType::kBFloat16, run.arch);
        REQUIRE(bf16_row.ok());
        REQUIRE(bf16_row->tolerance.has_value());
        const double budget = bf16_row->tolerance->atol / 100;
        const double apart = test::max_abs_difference(*mine, theirs);
        std::map<std::string, std::vector<double>> truth;
        if (spec.op == "attention") {
          test::AttentionF64 a = test::attention_f64(in->tensors, backward);
          truth = {{"o", std::move(a.o)}, {"dq", std::move(a.dq)}, {"dk", std::move(a.dk)}, {"dv", std::move(a.dv)}};
        } else if (spec.op == "lm_head") {
          test::LmHeadF64 l = test::lm_head_f64(in->tensors, backward);
          truth = {{"logits", std::move(l.logits)}, {"dhidden", std::move(l.dhidden)}, {"dweight", std::move(l.dweight)}};
        }
        std::string truth_note;
        if (!truth.empty()) {
          const auto found = truth.find(name);
          REQUIRE(found != truth.end());  // an output the float64 version does not compute
          const double device_err = test::max_abs_error(*mine, found->second);
          const double cpu_err = test::max_abs_error(theirs, found->second);
          truth_note = "; from float64: cuda_fp32 " + std::to_string(device_err) + ", cpu " + std::to_string(cpu_err);
          CHECK(device_err < budget);
          if (spec.op == "lm_head") CHECK(cpu_err < budget);
        } else {
          CHECK(apart < budget);
        }
        WARN(spec.id << (backward ? " backward " : " forward ") << name << ": the FP32 golds differ by "
                     << t->worst->margin << " x the float32 row, max |diff| " << apart << " (budget " << budget
                     << ")" << truth_note);
      }
    }
  }
  // Every op of the catalogue has its gold computed on the device (DESIGN §4, issue 4).
  for (const FixtureSpec& spec : w.catalogue) {
    INFO(spec.op << " has no device reference");
    CHECK(on_device.count(spec.op) == 1);
  }
  CHECK(compared > 0);
}

TEST_CASE("accuracy cells with the cuda_fp32 references: the same verdicts, the engine recorded", "[gpu][reference]") {
  const test::Workload& w = test::workload(test::gpu_workload_name());
  RunContext run = test::cuda_run_context(w);
  const std::set<std::string> known = test::known_red(test::gpu_workload_name());
  run.reference = &cuda_reference();
  for (const FixtureSpec& spec : w.catalogue) {
    if (spec.tier == Tier::kInvariance) continue;
    for (Judgment j : {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy}) {
      FixtureGenerator gen;
      auto cell = run_accuracy_cell(run, gen, test::cuda_backend(), *find_op_impl(spec.op), j, spec);
      REQUIRE(cell.ok());
      INFO(cell->id << ": " << cell->reason);
      REQUIRE(cell->reference.has_value());
      CHECK(!cell->reference->engine.empty());
      const std::string key = std::string(contract_name(j)) + "/" + spec.id;
      CHECK((cell->verdict == Verdict::kRed) == (known.count(key) > 0));
    }
  }
}

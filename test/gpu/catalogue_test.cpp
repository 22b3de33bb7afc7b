// The whole catalogue on cuda_bf16 through the shipped runner and judges: every op has both
// directions, every accuracy cell of the workload is green except the documented red ones,
// and every invariance cell is green or N/A.
#include <set>
#include <string>

#include "gpu_test_support.hpp"
#include "ws1/invariance.hpp"
#include "ws1cuda/cuda_op.hpp"

using namespace ws1;

TEST_CASE("every op of the catalogue has cuda_bf16 kernels for its directions", "[gpu]") {
  for (const Op* op : all_ops()) {
    INFO(op->name());
    const ws1cuda::CudaOp* c = ws1cuda::find_cuda_op(op->name());
    REQUIRE(c != nullptr);
    CHECK(c->forward != nullptr);
    CHECK((c->backward != nullptr) == !op->gradients().empty());
  }
}

TEST_CASE("accuracy: every cell of the workload on cuda_bf16", "[gpu][accuracy]") {
  const std::string name = test::gpu_workload_name();
  const test::Workload& w = test::workload(name);
  RunContext run = test::cuda_run_context(w);
  FixtureGenerator gen;
  std::set<std::string> red;
  std::string reasons;  // printed with the verdict check, so a failing run says why
  int cells = 0;
  for (const FixtureSpec& spec : w.catalogue) {
    if (spec.tier == Tier::kInvariance) continue;
    const Op* op = find_op_impl(spec.op);
    REQUIRE(op != nullptr);
    for (Judgment j : {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy}) {
      if (j == Judgment::kGradientAccuracy && op->gradients().empty()) continue;
      auto cell = run_accuracy_cell(run, gen, test::cuda_backend(), *op, j, spec);
      INFO(spec.id);
      REQUIRE(cell.ok());
      ++cells;
      if (cell->verdict == Verdict::kRed) {
        reasons += "\nred: " + cell->id + ": " + cell->reason;
        red.insert(cell->id.substr(cell->id.find('/') + 1));  // without the backend
      }
    }
  }
  INFO(name << ": " << cells << " cells" << reasons);
  CHECK(cells > 0);
  CHECK(red == test::known_red(name));
}

TEST_CASE("invariance: every transform of every op on cuda_bf16", "[gpu][invariance]") {
  const std::string name = test::gpu_workload_name();
  const test::Workload& w = test::workload(name);
  RunContext run = test::cuda_run_context(w);
  FixtureGenerator gen;
  int green = 0;
  for (const FixtureSpec& spec : w.catalogue) {
    if (spec.tier != Tier::kInvariance) continue;
    const Op* op = find_op_impl(spec.op);
    REQUIRE(op != nullptr);
    for (Judgment j : {Judgment::kForwardInvariance, Judgment::kGradientInvariance}) {
      if (j == Judgment::kGradientInvariance && op->gradients().empty()) continue;
      auto cells = run_invariance_cells(run, gen, test::cuda_backend(), *op, j, all_transforms(), spec);
      INFO(spec.id);
      REQUIRE(cells.ok());
      for (const Cell& c : *cells) {
        INFO(c.id << ": " << c.reason);
        CHECK(c.verdict != Verdict::kRed);
        if (c.verdict == Verdict::kGreen) ++green;
      }
    }
  }
  CHECK(green > 0);
}

// Chain parity and the C6/C7 decode-vs-prefill cases on cuda_bf16 (docs/parity.md): the tiny
// chain's manifest protocol with its weights resident on the device (strict: d == 0), and every
// kv case at Qwen3-8B's head shape green with decode rows and probe logps bit-equal to prefill.
#include "gpu_test_support.hpp"
#include "ws1/kv_consistency.hpp"
#include "ws1/model.hpp"
#include "ws1/parity.hpp"
#include "ws1cuda/resident.hpp"

using namespace ws1;

TEST_CASE("the tiny chain on cuda_bf16 (weights resident): manifest protocol green", "[gpu][parity]") {
  const test::Workload& wl = test::workload("ws1-qwen3-8b-dense");
  const RunContext ctx = test::cuda_run_context(wl);
  auto cfg = synthetic_config("tiny");
  REQUIRE(cfg.ok());
  auto weights = synthetic_weights(*cfg, "tiny", {static_cast<std::uint64_t>(wl.manifest.seed), 0});
  REQUIRE(weights.ok());
  const ParityFixture fixture = manifest_parity_fixture(wl.manifest);
  auto run = run_parity(*weights, test::cuda_backend(), ctx.op_context, fixture, {true, true});
  REQUIRE(run.ok());
  CHECK(ws1cuda::resident_tensors() == 0);  // released with the chain
  REQUIRE_FALSE(run->candidate_failure.has_value());
  auto cell = parity_cell({&wl.contract, &*weights, &fixture, &*run, {"cuda_bf16", "cuda_bf16"}, "test"});
  REQUIRE(cell.ok());
  INFO(cell->reason);
  CHECK(run->tokens.size() == 27);
  CHECK(cell->verdict == Verdict::kGreen);
}

TEST_CASE("C6/C7 decode-vs-prefill cases on cuda_bf16 at Qwen3-8B's head shape: green, bitwise", "[gpu][parity][kv]") {
  const test::Workload& wl = test::workload("ws1-qwen3-8b-dense");
  const RunContext run = test::cuda_run_context(wl);
  auto cfg = synthetic_config("qwen3-8b");
  REQUIRE(cfg.ok());
  auto cases = kv_consistency_cases(wl.manifest);
  REQUIRE(cases.ok());
  REQUIRE(cases->size() == 6);
  Backend& cuda = test::cuda_backend();
  for (const KvCase& c : *cases) {
    auto in = kv_case_inputs(c, *cfg, static_cast<std::uint64_t>(wl.manifest.seed));
    REQUIRE(in.ok());
    auto r = run_kv_case(*in, cuda, model_op_context(*cfg, run.op_context));
    REQUIRE(r.ok());
    REQUIRE_FALSE(r->candidate_failure.has_value());
    const KvCellInputs ci{&run, cuda.name(), "attention", "probe", true, cuda.readback()};
    auto cells = kv_case_cells(ci, *in, *r);
    REQUIRE(cells.ok());
    for (const Cell& cell : *cells) {
      INFO(cell.id << ": " << cell.reason);
      CHECK(cell.verdict == Verdict::kGreen);  // strict: decode rows and probe logps bit-equal
    }
  }
}

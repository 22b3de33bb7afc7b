// What the model tests share: the shipped contract and workload, the run's op settings, the
// tiny synthetic weights, a parity cell built from a run, and the planted attention that
// ignores key_mask (the kv-consistency and planted-parity tests both plant it).
#pragma once

#include <catch2/catch.hpp>

#include <memory>

#include "planted_backend.hpp"
#include "test_paths.hpp"
#include "ws1/fixture_lock.hpp"
#include "ws1/model.hpp"
#include "ws1/parity.hpp"
#include "ws1/runner.hpp"

namespace ws1::test {

struct ModelSetup {
  Contract contract;
  Manifest manifest;
  FixtureLock lock;
  OpContext ctx;      // the run's (contract declarations), before the model's dims
  ModelWeights tiny;  // synthetic:tiny at the manifest seed
};

inline const ModelSetup& model_setup() {
  static std::unique_ptr<ModelSetup> s;
  if (!s) {
    s = std::make_unique<ModelSetup>();
    auto c = load_contract(source_root() / "contracts" / "ws1-c1-v2.json");
    auto m = load_manifest(source_root() / "fixtures" / "ws1-qwen3-8b-dense.json");
    auto l = load_fixture_lock(source_root() / "fixtures" / "ws1-qwen3-8b-dense.lock.json");
    if (!c || !m || !l) FAIL("cannot load the shipped contract / workload / lock");
    s->contract = std::move(c).value();
    s->manifest = std::move(m).value();
    s->lock = std::move(l).value();
    s->ctx = make_run_context(s->contract, s->manifest, s->lock, "cpu_bf16", 0).op_context;
    auto cfg = synthetic_config("tiny");
    REQUIRE(cfg.ok());
    auto w = synthetic_weights(*cfg, "tiny", {static_cast<std::uint64_t>(s->manifest.seed), 0});
    if (!w) FAIL(w.error().message());
    s->tiny = std::move(w).value();
  }
  return *s;
}

// The manifest protocol on `backend` with the tiny weights, judged into a cell.
struct ParityOutcome {
  ParityFixture fixture;
  ParityRun run;
  Cell cell;
};

inline ParityOutcome manifest_parity(Backend& backend, bool strict, const ModelWeights* weights = nullptr) {
  const ModelSetup& s = model_setup();
  const ModelWeights& w = weights != nullptr ? *weights : s.tiny;
  ParityOutcome o;
  o.fixture = manifest_parity_fixture(s.manifest);
  auto run = run_parity(w, backend, s.ctx, o.fixture, {strict, true});
  if (!run) FAIL(run.error().message());
  o.run = std::move(run).value();
  auto cell = parity_cell({&s.contract, &w, &o.fixture, &o.run, {"cpu_bf16", backend.name()}, "test"});
  if (!cell) FAIL(cell.error().message());
  o.cell = std::move(cell).value();
  return o;
}

// The manifest's sequences with prompts of 8, 3, 5 and 12 tokens: under batched decode the
// caches in flight have different lengths (padding and key_mask in every decode step).
inline ParityFixture varied_prompt_fixture() {
  ParityFixture f = manifest_parity_fixture(model_setup().manifest);
  const std::int64_t prompts[] = {8, 3, 5, 12};
  for (std::size_t i = 0; i < f.sequences.size(); ++i) f.sequences[i].prompt_len = prompts[i];
  return f;
}

// Attention that drops key_mask: the padded keys of a batch take part in the softmax (a planted
// defect that only batched, padded calls can show).
inline OpKernel attention_ignores_key_mask() {
  return [](const Op& op, const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    Tensors without;
    for (const auto& t : in)
      if (t.name != "key_mask") without.push_back(t);
    return op.cpu_forward(without, ctx);
  };
}

inline const MetricResult& metric(const Cell& c, const std::string& name) {
  for (const auto& m : c.metrics)
    if (m.name == name) return m;
  FAIL("no metric " << name);
  throw;
}

}  // namespace ws1::test

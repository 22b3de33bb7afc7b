// What the runner tests share: a backend that is cpu_bf16 except for one planted kernel, and
// the shipped contract with a workload, its lock and its fixture catalogue.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "planted_backend.hpp"
#include "test_paths.hpp"
#include "ws1/backend.hpp"
#include "ws1/fixture_lock.hpp"
#include "ws1/numeric.hpp"
#include "ws1/runner.hpp"

namespace ws1::test {


struct Workload {
  Contract contract;
  Manifest manifest;
  FixtureLock lock;
  std::vector<FixtureSpec> catalogue;

  const FixtureSpec& spec(const std::string& id) const {
    for (const auto& s : catalogue)
      if (s.id == id) return s;
    FAIL("no fixture " << id);
    throw;
  }
  RunContext run_context() const { return make_run_context(contract, manifest, lock, "cpu_bf16", 0); }
};

// "ws1-qwen3-8b-dense" or "ws1-smoke", with a shipped contract (default the one in force,
// contracts/ws1-c1-v2.json); loaded once.
inline const Workload& workload(const std::string& name, const std::string& contract = "ws1-c1-v2.json") {
  static std::map<std::string, std::unique_ptr<Workload>> cache;
  auto& slot = cache[name + "|" + contract];
  if (!slot) {
    auto w = std::make_unique<Workload>();
    auto c = load_contract(source_root() / "contracts" / contract);
    auto m = load_manifest(source_root() / "fixtures" / (name + ".json"));
    auto l = load_fixture_lock(source_root() / "fixtures" / (name + ".lock.json"));
    if (!c || !m || !l) FAIL("cannot load the shipped contract / workload / lock for " << name);
    w->contract = std::move(c).value();
    w->manifest = std::move(m).value();
    w->lock = std::move(l).value();
    auto cat = fixture_catalogue(w->manifest);
    if (!cat) FAIL(cat.error().message());
    w->catalogue = std::move(cat).value();
    slot = std::move(w);
  }
  return *slot;
}

// The gradient-accuracy cell of `op` on `fixture` of workload `w`, its dy.* seeds multiplied by
// `seed_scale` (a power of two, so the scaled seeds are exact).
inline Cell gradient_cell(const Workload& w, Backend& backend, const std::string& op, const std::string& fixture,
                          float seed_scale = 1.0f) {
  RunContext run = w.run_context();
  FixtureGenerator gen;
  auto in = generated_inputs(run, gen, w.spec(fixture));
  REQUIRE(in.ok());
  for (NamedTensor& t : in->tensors) {
    if (t.name.rfind("dy.", 0) != 0) continue;
    REQUIRE((t.tensor.dtype() == DType::kBF16 || t.tensor.dtype() == DType::kF32));
    for (std::int64_t i = 0; i < t.tensor.numel(); ++i) {
      if (t.tensor.dtype() == DType::kF32) {
        t.tensor.data<float>()[i] *= seed_scale;
        continue;
      }
      auto& bits = t.tensor.data<std::uint16_t>()[i];
      bits = to_bf16(from_bf16(bf16{bits}) * seed_scale).bits;
    }
  }
  auto cell = run_accuracy_cell_on(run, backend, *find_op_impl(op), Judgment::kGradientAccuracy, *in);
  REQUIRE(cell.ok());
  if (cell->verdict == Verdict::kRed) INFO(cell->reason);
  return std::move(cell).value();
}

// Accuracy tensor `name` of cell `c`.
inline const AccuracyTensor& tensor_of(const Cell& c, const std::string& name) {
  for (const AccuracyTensor& t : c.accuracy)
    if (t.name == name) return t;
  FAIL("no tensor " << name);
  throw;
}

}  // namespace ws1::test

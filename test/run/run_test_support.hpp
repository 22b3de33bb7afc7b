// What the runner tests share: a backend that is cpu_bf16 except for one planted kernel, and
// the shipped contract with a workload, its lock and its fixture catalogue.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "test_paths.hpp"
#include "ws1/backend.hpp"
#include "ws1/fixture_lock.hpp"
#include "ws1/runner.hpp"

namespace ws1::test {

using Kernel = std::function<Result<Tensors>(const Tensors&, const OpContext&)>;

// cpu_bf16 with one op's forward and/or backward replaced (an empty Kernel keeps cpu_bf16's).
class PlantedBackend final : public Backend {
 public:
  PlantedBackend(std::string op, Kernel fwd, Kernel bwd = {})
      : op_(std::move(op)), fwd_(std::move(fwd)), bwd_(std::move(bwd)) {}
  std::string name() const override { return "cpu_bf16"; }
  std::string kernel_id(const Op& op, Direction d) const override {
    return base_->kernel_id(op, d) + "+planted-defect";
  }
  Result<Tensors> forward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return op.name() == op_ && fwd_ ? fwd_(in, ctx) : base_->forward(op, in, ctx);
  }
  Result<Tensors> backward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return op.name() == op_ && bwd_ ? bwd_(in, ctx) : base_->backward(op, in, ctx);
  }

 private:
  std::string op_;
  Kernel fwd_, bwd_;
  std::unique_ptr<Backend> base_ = make_cpu_bf16_backend();
};

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

// "ws1-qwen3-8b-dense" or "ws1-smoke", with contracts/ws1-c1-v2.json; loaded once.
inline const Workload& workload(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Workload>> cache;
  auto& slot = cache[name];
  if (!slot) {
    auto w = std::make_unique<Workload>();
    auto c = load_contract(source_root() / "contracts" / "ws1-c1-v2.json");
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

}  // namespace ws1::test

// plan_cells (ws1/plan.hpp): the one matrix every subcommand runs.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "run_test_support.hpp"
#include "ws1/plan.hpp"

using namespace ws1;

TEST_CASE("plan_cells: the whole matrix, op by op, accuracy before invariance", "[run][plan]") {
  const test::Workload& w = test::workload("ws1-smoke");
  std::vector<const Op*> ops(all_ops().begin(), all_ops().end());
  const auto steps = plan_cells(w.catalogue, w.manifest.file, whole_matrix(ops));
  REQUIRE(steps.ok());
  std::size_t accuracy = 0, fixtures = 0;
  for (const FixtureSpec& s : w.catalogue) fixtures += s.tier == Tier::kInvariance ? 0 : 1;
  std::size_t at = 0;
  for (const Op* op : ops) {
    INFO(op->name());
    // Accuracy: forward then gradient, each over the tiers in order, the catalogue's order within.
    for (Judgment j : {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy}) {
      int last_tier = -1;
      while (at < steps->size() && (*steps)[at].op == op && (*steps)[at].judgment == j) {
        const PlannedStep& s = (*steps)[at++];
        CHECK(s.fixture->op == op->name());
        CHECK(static_cast<int>(s.fixture->tier) >= last_tier);
        last_tier = static_cast<int>(s.fixture->tier);
        CHECK(s.transforms.empty());
        CHECK(s.cells() == 1);
        ++accuracy;
      }
    }
    // Invariance: each invariance fixture, forward then gradient, every transform the op has.
    for (const FixtureSpec* inv : invariance_fixtures(w.catalogue, op->name()))
      for (Judgment j : {Judgment::kForwardInvariance, Judgment::kGradientInvariance}) {
        REQUIRE(at < steps->size());
        const PlannedStep& s = (*steps)[at++];
        CHECK((s.op == op && s.judgment == j && s.fixture == inv));
        CHECK(s.transforms == op_transforms(*op, direction_of(j)));
        CHECK(s.cells() == s.transforms.size());
        CHECK(s.cells() > 0);
      }
  }
  CHECK(at == steps->size());
  CHECK(accuracy == 2 * fixtures);  // every accuracy fixture of every op, both directions
}

TEST_CASE("plan_cells: a selection plans only what it names", "[run][plan]") {
  const test::Workload& w = test::workload("ws1-smoke");
  const Op* rope = find_op_impl("rope");
  REQUIRE(rope != nullptr);
  CellSelection only_short{{rope}, {Judgment::kGradientAccuracy}, {Tier::kShort}, {}, std::nullopt};
  const auto a = plan_cells(w.catalogue, w.manifest.file, only_short);
  REQUIRE(a.ok());
  REQUIRE_FALSE(a->empty());
  for (const PlannedStep& s : *a) {
    CHECK((s.op == rope && s.judgment == Judgment::kGradientAccuracy && s.fixture->tier == Tier::kShort));
  }
  // One transform by name, applicable or not: exactly it, on every invariance fixture.
  CellSelection one{{rope}, {}, {}, {Judgment::kForwardInvariance}, Transform::kTp2};
  const auto b = plan_cells(w.catalogue, w.manifest.file, one);
  REQUIRE(b.ok());
  CHECK(b->size() == invariance_fixtures(w.catalogue, "rope").size());
  std::set<std::string> seen;
  for (const PlannedStep& s : *b) {
    CHECK(is_invariance(s.judgment));
    CHECK(s.transforms == std::vector<Transform>{Transform::kTp2});
    seen.insert(s.fixture->id);
  }
  CHECK(seen.size() == b->size());
}

TEST_CASE("plan_cells: an op without an invariance fixture is an error naming the manifest", "[run][plan]") {
  const test::Workload& w = test::workload("ws1-smoke");
  std::vector<FixtureSpec> no_inv;
  for (const FixtureSpec& s : w.catalogue)
    if (!(s.op == "silu" && s.tier == Tier::kInvariance)) no_inv.push_back(s);
  const Op* silu = find_op_impl("silu");
  const auto r = plan_cells(no_inv, w.manifest.file, whole_matrix({silu}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::kBadInput);
  CHECK_THAT(r.error().message(), Catch::Contains("silu") && Catch::Contains("no invariance fixture"));
  // Without invariance judgments the same catalogue plans.
  CHECK(plan_cells(no_inv, w.manifest.file, {{silu}, {Judgment::kForwardAccuracy}, {Tier::kPrimary}, {}, std::nullopt}).ok());
}

#include "ws1/plan.hpp"

#include <utility>

namespace ws1 {

std::vector<Transform> op_transforms(const Op& op, Direction d) {
  std::vector<Transform> out;
  for (Transform t : all_transforms()) {
    const auto na = transform_not_applicable(op, t, d);
    if (!na || na->listed) out.push_back(t);
  }
  return out;
}

CellSelection whole_matrix(std::vector<const Op*> ops) {
  return {std::move(ops),
          {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy},
          {Tier::kShort, Tier::kPrimary, Tier::kLong},
          {Judgment::kForwardInvariance, Judgment::kGradientInvariance},
          std::nullopt};
}

Result<std::vector<PlannedStep>> plan_cells(std::span<const FixtureSpec> catalogue,
                                            const std::string& manifest_file, const CellSelection& selection) {
  std::vector<PlannedStep> steps;
  for (const Op* op : selection.ops) {
    for (Judgment j : selection.accuracy)
      for (Tier tier : selection.tiers)
        for (const FixtureSpec& spec : catalogue)
          if (spec.op == op->name() && spec.tier == tier) steps.push_back({op, j, &spec, {}});
    if (selection.invariance.empty()) continue;
    const auto fixtures = invariance_fixtures(catalogue, op->name());
    if (fixtures.empty()) return bad_input(manifest_file, std::string(op->name()), "no invariance fixture for this op");
    for (const FixtureSpec* spec : fixtures)
      for (Judgment j : selection.invariance) {
        std::vector<Transform> ts =
            selection.transform ? std::vector<Transform>{*selection.transform} : op_transforms(*op, direction_of(j));
        steps.push_back({op, j, spec, std::move(ts)});
      }
  }
  return steps;
}

}  // namespace ws1

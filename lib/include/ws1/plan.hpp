// The cells a run judges, planned once for every subcommand (DESIGN §1: lib/run plans the
// matrix; `accuracy`, `invariance`, `gate` and `ops --matrix` parse options and print).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ws1/contract.hpp"
#include "ws1/error.hpp"
#include "ws1/invariance.hpp"
#include "ws1/manifest.hpp"
#include "ws1/op.hpp"

namespace ws1 {

// Every transform `op` has in direction `d`, in all_transforms() order: those that apply and
// those that are listed as N/A cells (tp2 only where there is a K to split).
std::vector<Transform> op_transforms(const Op& op, Direction d);

// What to plan. Judgments not named are not planned.
struct CellSelection {
  std::vector<const Op*> ops;
  std::vector<Judgment> accuracy;       // kForwardAccuracy and/or kGradientAccuracy, in order
  std::vector<Tier> tiers;              // the accuracy fixtures' tiers, in order
  std::vector<Judgment> invariance;     // kForwardInvariance and/or kGradientInvariance, in order
  std::optional<Transform> transform;   // invariance: this one (an inapplicable one becomes an
                                        // N/A cell), or every one the op has (op_transforms)
};

// What `gate` judges: both accuracy judgments on every tier, both invariance judgments under
// every transform each op has.
CellSelection whole_matrix(std::vector<const Op*> ops);

// One unit of work: an accuracy cell (one fixture), or one invariance judgment of an op on one
// invariance fixture under `transforms` (the runner makes the canonical calls once for all).
struct PlannedStep {
  const Op* op = nullptr;
  Judgment judgment = Judgment::kForwardAccuracy;
  const FixtureSpec* fixture = nullptr;  // into the catalogue planned from
  std::vector<Transform> transforms;     // invariance only
  bool invariance() const { return is_invariance(judgment); }
  // The cells the step adds to the evidence: 1, or one per transform.
  std::size_t cells() const { return invariance() ? transforms.size() : 1; }
};

// Op by op, in selection order: the accuracy cells (judgment, then tier, then the catalogue's
// fixtures of that tier in catalogue order), then the invariance steps (each invariance fixture
// of the op, then judgment). An op with invariance judgments selected and no invariance fixture
// is an Error naming `manifest_file` and the op.
Result<std::vector<PlannedStep>> plan_cells(std::span<const FixtureSpec> catalogue,
                                            const std::string& manifest_file, const CellSelection& selection);

}  // namespace ws1

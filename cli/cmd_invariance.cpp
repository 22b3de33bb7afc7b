// `ws1check invariance`: forward and gradient invariance (spec §4.2) of the candidates under the
// primary matrix's transforms (NOTES §d) plus layout and tp2; a table, the evidence artifact,
// exit 0 / 1.
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "run_session.hpp"
#include "run_support.hpp"
#include "ws1/invariance.hpp"
#include "ws1/plan.hpp"

namespace ws1cli {
namespace {

struct InvarianceOptions {
  std::string op = "all", direction = "fwd", transform = "all";
  std::string backend, contract, workload, out = "ws1check-out";
  bool json = false;
  unsigned threads = 0;
};

int run(const InvarianceOptions& o) {
  auto judgments = judgments_for(o.direction, ws1::Judgment::kForwardInvariance,
                                 ws1::Judgment::kGradientInvariance);
  if (!judgments) return report(judgments.error());
  std::optional<ws1::Transform> one;
  if (o.transform != "all") {
    one = ws1::transform_from_name(o.transform);
    if (!one) {
      std::string names;
      for (ws1::Transform t : ws1::all_transforms()) names += std::string(names.empty() ? "" : ", ") + std::string(ws1::transform_name(t));
      return report(ws1::bad_input("--transform", o.transform, "unknown transform; expected all, " + names));
    }
  }
  auto ops = select_ops(o.op);
  if (!ops) return report(ops.error());
  auto session = open_session({o.backend, o.contract, o.workload, o.threads, {}});
  if (!session) return report(session.error());
  Session& s = **session;

  // One transform by name (an inapplicable one becomes an N/A cell), or every one the op has.
  auto steps = ws1::plan_cells(s.workload.catalogue, s.workload.manifest.file, {*ops, {}, {}, *judgments, one});
  if (!steps) return report(steps.error());
  ws1::FixtureGenerator generator({o.threads});
  for (const ws1::PlannedStep& step : *steps) {
    const auto t0 = std::chrono::steady_clock::now();
    auto cells = ws1::run_invariance_cells(s.run, generator, *s.backend, *step.op, step.judgment, step.transforms,
                                           *step.fixture);
    if (!cells) return report(cells.error());
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info("{} {} ({} cells, {:.1f} s)", step.fixture->id, ws1::contract_name(step.judgment), cells->size(), secs);
    for (auto& c : *cells) s.evidence.cells.push_back(std::move(c));
  }
  return finish_run(s.evidence, o.out, "invariance-" + s.backend->name(), o.json);
}

}  // namespace

Command register_invariance(CLI::App& app) {
  auto o = std::make_shared<InvarianceOptions>();
  auto* sub = app.add_subcommand("invariance", "forward/gradient bitwise invariance across layouts");
  sub->add_option("--op", o->op, "op name or 'all'")->default_str("all");
  sub->add_option("--transform", o->transform,
                  "BN/chunked | B1/full | B1/chunked | BN/permuted | BN/padded_right | "
                  "BN/padded_left | layout | tp2 | tp4 | tp8 | repeat | all")
      ->default_str("all");
  sub->add_option("--direction", o->direction, "fwd | bwd | both")->default_str("fwd");
  add_run_options(sub, o->backend, o->contract, o->workload, o->out, o->json, o->threads);
  return {sub, [o] { return run(*o); }};
}

}  // namespace ws1cli

// `ws1check accuracy`: forward and gradient accuracy of the candidates against the FP32
// reference (spec §4.1) over the workload's fixtures; a table, the evidence artifact, exit 0/1.
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "gpu_environment.hpp"
#include "run_support.hpp"
#include "workload_context.hpp"
#include "ws1/backend.hpp"
#include "ws1/contract.hpp"
#include "ws1/evidence.hpp"
#include "ws1/runner.hpp"

namespace ws1cli {
namespace {

struct AccuracyOptions {
  std::string op = "all", direction = "fwd", tier = "all";
  std::string backend, contract, workload, out = "ws1check-out";
  bool json = false;
  unsigned threads = 0;
};

ws1::Result<std::vector<ws1::Judgment>> judgments_for(const std::string& direction) {
  if (direction == "fwd") return std::vector{ws1::Judgment::kForwardAccuracy};
  if (direction == "bwd") return std::vector{ws1::Judgment::kGradientAccuracy};
  if (direction == "both")
    return std::vector{ws1::Judgment::kForwardAccuracy, ws1::Judgment::kGradientAccuracy};
  return ws1::bad_input("--direction", direction, "expected fwd, bwd or both");
}

ws1::Result<std::vector<ws1::Tier>> tiers_for(const std::string& tier) {
  if (tier == "all") return std::vector{ws1::Tier::kShort, ws1::Tier::kPrimary, ws1::Tier::kLong};
  auto t = ws1::tier_from_name(tier);
  if (!t || *t == ws1::Tier::kInvariance)
    return ws1::bad_input("--tier", tier, "expected short, primary, long or all");
  return std::vector{*t};
}

int run(const AccuracyOptions& o) {
  auto judgments = judgments_for(o.direction);
  if (!judgments) return report(judgments.error());
  auto tiers = tiers_for(o.tier);
  if (!tiers) return report(tiers.error());
  auto ops = select_ops(o.op);
  if (!ops) return report(ops.error());

  auto contract = ws1::load_contract(o.contract.empty() ? default_contract() : o.contract);
  if (!contract) return report(contract.error());
  auto ctx = WorkloadContext::load(o.workload.empty() ? default_workload() : o.workload, true);
  if (!ctx) return report(ctx.error());

  ws1::Evidence evidence = ws1::begin_evidence(cli_argv());
  const bool gpu = fill_gpu_environment(evidence.environment);
  auto backend = open_backend(o.backend, gpu);
  if (!backend) return report(backend.error());
  evidence.environment.backend = (*backend)->name();
  evidence.contract = {contract->file, contract->version, contract->sha256};
  evidence.workload = {ctx->manifest.file, ctx->manifest.workload_id, ctx->manifest.version,
                       ctx->manifest.identity_sha256};

  ws1::RunContext run_ctx = ws1::make_run_context(*contract, ctx->manifest, *ctx->lock,
                                                  (*backend)->name(), o.threads);
  for (const auto& a : run_ctx.assumptions) spdlog::warn("{}", a);

  ws1::FixtureGenerator generator({o.threads});
  for (const ws1::Op* op : *ops) {
    for (ws1::Judgment j : *judgments) {
      for (ws1::Tier tier : *tiers) {
        for (const auto& spec : ctx->catalogue) {
          if (spec.op != op->name() || spec.tier != tier) continue;
          const auto t0 = std::chrono::steady_clock::now();
          auto cell = ws1::run_accuracy_cell(run_ctx, generator, **backend, *op, j, spec);
          if (!cell) return report(cell.error());
          const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          spdlog::info("{} {} ({:.1f} s)", cell->id, ws1::verdict_name(cell->verdict), secs);
          evidence.cells.push_back(std::move(cell).value());
        }
      }
    }
  }
  if (evidence.cells.empty())
    return report(ws1::bad_input(ctx->manifest.file, o.op, "no fixture of this op and tier"));
  return finish_run(evidence, o.out, "accuracy-" + (*backend)->name(), o.json);
}

}  // namespace

Command register_accuracy(CLI::App& app) {
  auto o = std::make_shared<AccuracyOptions>();
  auto* sub = app.add_subcommand("accuracy", "forward/gradient accuracy against the FP32 reference");
  sub->add_option("--op", o->op, "op name or 'all'")->default_str("all");
  sub->add_option("--direction", o->direction, "fwd | bwd | both")->default_str("fwd");
  sub->add_option("--tier", o->tier, "short | primary | long | all")->default_str("all");
  add_run_options(sub, o->backend, o->contract, o->workload, o->out, o->json, o->threads);
  return {sub, [o] { return run(*o); }};
}

}  // namespace ws1cli

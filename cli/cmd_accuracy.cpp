// `ws1check accuracy`: forward and gradient accuracy of the candidates against the FP32
// reference (spec §4.1) over the workload's fixtures or the user's tensors (--inputs); a
// table, the evidence artifact, optional per-cell dumps (--dump), exit 0/1.
#include <fmt/core.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>

#include "commands.hpp"
#include "common.hpp"
#include "run_session.hpp"
#include "run_support.hpp"
#include "workload_context.hpp"
#include "ws1/runner.hpp"
#include "ws1/plan.hpp"
#include "ws1/safetensors.hpp"

namespace ws1cli {
namespace {
namespace fs = std::filesystem;

struct AccuracyOptions {
  std::string op = "all", direction = "fwd", tier = "all";
  std::string backend, contract, workload, out = "ws1check-out";
  std::string inputs, dump;
  std::string reference;
  bool json = false;
  bool tier_given = false;
  unsigned threads = 0;
};

ws1::Result<std::vector<ws1::Tier>> tiers_for(const std::string& tier) {
  if (tier == "all") return std::vector{ws1::Tier::kShort, ws1::Tier::kPrimary, ws1::Tier::kLong};
  auto t = ws1::tier_from_name(tier);
  if (!t || *t == ws1::Tier::kInvariance)
    return ws1::bad_input("--tier", tier, "expected short, primary, long or all");
  return std::vector{*t};
}

// The --dump directory: one safetensors file per cell, each written atomically. When the run
// ends in an error (exit 2 or 3) the files it wrote are removed again, and the directory too
// if this run created it, so a failed run leaves nothing behind.
class DumpWriter {
 public:
  explicit DumpWriter(std::string dir) : dir_(std::move(dir)) {}
  DumpWriter(const DumpWriter&) = delete;
  DumpWriter& operator=(const DumpWriter&) = delete;
  ~DumpWriter() {
    if (!keep_) discard();
  }

  ws1::Status write(const ws1::CellDump& d) {
    std::error_code ec;
    if (!fs::is_directory(dir_, ec)) {
      if (fs::exists(dir_, ec)) return ws1::bad_input(dir_, "--dump", "exists and is not a directory");
      if (!fs::create_directories(dir_, ec) || ec)
        return ws1::bad_input(dir_, "--dump", "cannot create the directory: " + ec.message());
      created_ = true;
    }
    const fs::path path = fs::path(dir_) / d.file_name;
    if (auto st = ws1::write_safetensors(path, d.tensors, d.metadata); !st) return st;
    written_.push_back(path);
    spdlog::info("dump: {}", path.string());
    return {};
  }
  // The run finished (green or red): the files stay.
  void keep() { keep_ = true; }

 private:
  void discard() {
    std::error_code ec;
    for (const fs::path& p : written_) fs::remove(p, ec);
    if (created_) fs::remove(dir_, ec);  // only if empty
  }

  std::string dir_;
  std::vector<fs::path> written_;
  bool created_ = false, keep_ = false;
};

// Runs one cell and dumps it when asked. Errors are returned for the caller to report.
ws1::Result<ws1::Cell> run_cell(Session& s, const ws1::Op& op, ws1::Judgment j,
                                const ws1::CellInputs& in, DumpWriter* dump) {
  const auto t0 = std::chrono::steady_clock::now();
  ws1::CellTensors kept;
  auto cell = ws1::run_accuracy_cell_on(s.run, *s.backend, op, j, in,
                                        dump != nullptr ? &kept : nullptr);
  if (!cell) return cell.error();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  spdlog::info("{} {} ({:.1f} s)", cell->id, ws1::verdict_name(cell->verdict), secs);
  if (dump != nullptr)
    if (auto st = dump->write(ws1::cell_dump(*cell, in, kept, s.contract)); !st) return st.error();
  return cell;
}

// --inputs: the file's tensors for `op`, named and typed as the workload's fixtures of `op`.
ws1::Result<ws1::CellInputs> load_user_inputs(const AccuracyOptions& o, const ws1::Op& op,
                                              const std::vector<ws1::Judgment>& judgments) {
  auto file = ws1::read_safetensors(o.inputs);
  if (!file) return file.error();
  auto ctx = WorkloadContext::load(o.workload.empty() ? default_workload() : o.workload, false);
  if (!ctx) return ctx.error();
  const auto decls = ws1::op_input_decls(ctx->catalogue, op.name());
  if (decls.empty())
    return ws1::bad_input(ctx->manifest.file, std::string(op.name()), "no fixture of this op");
  bool backward = false;
  for (ws1::Judgment j : judgments) backward |= j == ws1::Judgment::kGradientAccuracy;
  return ws1::user_inputs(decls, op.name(), backward, o.inputs, file->metadata, file->tensors);
}

int run(const AccuracyOptions& o) {
  auto judgments = judgments_for(o.direction, ws1::Judgment::kForwardAccuracy,
                                 ws1::Judgment::kGradientAccuracy);
  if (!judgments) return report(judgments.error());
  auto tiers = tiers_for(o.tier);
  if (!tiers) return report(tiers.error());
  if (!o.inputs.empty()) {
    if (o.op == "all")
      return report(ws1::bad_input(o.inputs, "--op",
                                   "all: --inputs holds the tensors of one op; name it with --op"));
    if (o.tier_given)
      return report(ws1::bad_input(o.inputs, "--tier",
                                   "does not apply to --inputs (the cells' tier is 'user')"));
  }
  auto ops = select_ops(o.op);
  if (!ops) return report(ops.error());
  if (std::error_code ec; !o.dump.empty() && fs::exists(o.dump, ec) && !fs::is_directory(o.dump, ec))
    return report(ws1::bad_input(o.dump, "--dump", "exists and is not a directory"));

  // The user's tensors are checked against the op's declarations before anything else runs.
  std::optional<ws1::CellInputs> user;
  if (!o.inputs.empty()) {
    auto in = load_user_inputs(o, *ops->front(), *judgments);
    if (!in) return report(in.error());
    user = std::move(in).value();
  }

  auto session = open_session({o.backend, o.contract, o.workload, o.threads, o.reference});
  if (!session) return report(session.error());
  Session& s = **session;
  std::unique_ptr<DumpWriter> dump;
  if (!o.dump.empty()) dump = std::make_unique<DumpWriter>(o.dump);

  if (user) {
    spdlog::info("inputs: {} as fixture {} (hash {})", o.inputs, user->fixture_id, user->hash);
    for (ws1::Judgment j : *judgments) {
      auto cell = run_cell(s, *ops->front(), j, *user, dump.get());
      if (!cell) return report(cell.error());
      s.evidence.cells.push_back(std::move(cell).value());
    }
  } else {
    auto steps = ws1::plan_cells(s.workload.catalogue, s.workload.manifest.file, {*ops, *judgments, *tiers, {}, std::nullopt});
    if (!steps) return report(steps.error());
    ws1::FixtureGenerator generator({o.threads});
    for (const ws1::PlannedStep& step : *steps) {
      auto in = ws1::generated_inputs(s.run, generator, *step.fixture);
      if (!in) return report(in.error());
      auto cell = run_cell(s, *step.op, step.judgment, *in, dump.get());
      if (!cell) return report(cell.error());
      s.evidence.cells.push_back(std::move(cell).value());
    }
  }
  if (s.evidence.cells.empty())
    return report(ws1::bad_input(s.workload.manifest.file, o.op, "no fixture of this op and tier"));
  const int rc = finish_run(s.evidence, o.out, "accuracy-" + s.backend->name(), o.json);
  if (dump && rc <= exit_code(ws1::ExitCode::kRed)) dump->keep();
  return rc;
}

}  // namespace

Command register_accuracy(CLI::App& app) {
  auto o = std::make_shared<AccuracyOptions>();
  auto* sub = app.add_subcommand("accuracy", "forward/gradient accuracy against the FP32 reference");
  sub->add_option("--op", o->op, "op name or 'all' (one op with --inputs)")->default_str("all");
  sub->add_option("--direction", o->direction, "fwd | bwd | both")->default_str("fwd");
  auto* tier = sub->add_option("--tier", o->tier, "short | primary | long | all")->default_str("all");
  sub->add_option("--inputs", o->inputs,
                  "run --op on these tensors instead of generated fixtures: a .safetensors file "
                  "holding the tensors `ws1check ops --op OP` lists, with those dtypes (the dy.* "
                  "seeds are needed for bwd; no other tensor may be present). A --dump file is "
                  "accepted as is: its in.* tensors are used, its cand.*/ref.* ignored, and it "
                  "keeps the hash of the run that wrote it (a file changed since is refused). The "
                  "evidence names the fixture user:<file name>, tier 'user'. Not with --tier");
  sub->add_option("--dump", o->dump,
                  "write one .safetensors file per cell into this directory (<cell id, '/' -> "
                  "'__', other than [A-Za-z0-9._-] -> '_'>.safetensors): in.<name> inputs (dy.* included), cand.<name> candidate "
                  "and ref.<name> FP32 reference outputs or gradients, ws1.* metadata; replay "
                  "one with --inputs");
  sub->add_option("--reference", o->reference,
                  "where the FP32 references are computed: cpu (each op's lib/ref reference) | cuda_fp32 (every op "
                  "on the GPU: FP32 kernels, GEMMs through cuBLAS FP32 with pedantic math)")
      ->default_str("cpu");
  add_run_options(sub, o->backend, o->contract, o->workload, o->out, o->json, o->threads);
  return {sub, [o, tier] {
            o->tier_given = tier->count() > 0;
            return run(*o);
          }};
}

}  // namespace ws1cli

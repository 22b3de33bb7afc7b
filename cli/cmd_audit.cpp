// `ws1check audit`: the spec §9.1 table for this build, every row a check run now (exit 1 on a
// non-conformant row); `--repo PATH`: a static scan of a foreign tree for the §9 patterns, with
// `--sarif FILE` (exit 1 when something is found). `--json` prints the audit artifact,
// `--out DIR` writes it to DIR/audit.json.
#include <fmt/core.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>
#include <system_error>

#include "audit_session.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "ws1/audit.hpp"
#include "ws1/build_info.hpp"
#include "ws1/evidence.hpp"

namespace ws1cli {
namespace {

struct AuditOptions {
  BuildAuditOptions build;
  std::string repo, sarif, out;
  bool json = false;
  // Options of the build audit, to refuse them with --repo.
  std::vector<CLI::Option*> build_only;
};

ws1::AuditArtifact begin_artifact(std::string mode) {
  ws1::AuditArtifact a;
  a.tool = ws1::tool_info();
  a.checkout = ws1::read_checkout(std::filesystem::current_path());
  a.command = cli_argv();
  a.started = ws1::utc_now_iso8601();
  a.mode = std::move(mode);
  return a;
}

// Writes DIR/audit.json atomically; returns the path written, or the exit code of the error.
std::optional<int> write_artifact(const ws1::AuditArtifact& a, const std::string& out,
                                  std::string& written) {
  if (out.empty()) return std::nullopt;
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec) return report(ws1::bad_input(out, "--out", "cannot create directory: " + ec.message()));
  const std::filesystem::path path = std::filesystem::path(out) / "audit.json";
  if (auto st = ws1::write_file_atomic(path, ws1::audit_json(a)); !st) return report(st.error());
  written = path.string();
  return std::nullopt;
}

int run_build(const AuditOptions& o) {
  ws1::AuditArtifact a = begin_artifact("build");
  auto run = run_build_audit(o.build);
  if (!run) return report(run.error());
  a.contract = run->contract;
  a.tiny_workload = run->tiny;
  a.probe_workload = run->probe;
  a.rows = run->rows;
  a.finished = ws1::utc_now_iso8601();
  std::string written;
  if (auto rc = write_artifact(a, o.out, written)) return *rc;
  const ws1::AuditSummary s = ws1::summarize(a.rows);
  if (o.json) {
    fmt::print("{}", ws1::audit_json(a));
  } else {
    const auto& b = ws1::build_info();
    fmt::print("ws1check audit: source {} ({}), contract {} ({})\n", b.source_commit, b.source_state,
               a.contract->path, a.contract->version);
    std::size_t width = 3;
    for (const auto& r : a.rows) width = std::max(width, r.id.size());
    fmt::print("{:<{}}  {:<18}  {}\n", "row", width, "status", "basis");
    for (const auto& r : a.rows)
      fmt::print("{:<{}}  {:<18}  {}\n", r.id, width, ws1::audit_status_name(r.status), r.basis);
    fmt::print("conformant {}, exception_declared {}, non_conformant {}, not_checked {} of {} rows{}\n",
               s.conformant, s.exception_declared, s.non_conformant, s.not_checked, s.total,
               written.empty() ? "" : "; artifact: " + written);
  }
  return s.non_conformant > 0 ? exit_code(ws1::ExitCode::kRed) : 0;
}

int run_repo(const AuditOptions& o) {
  for (const CLI::Option* opt : o.build_only)
    if (opt->count() > 0)
      return report(ws1::bad_input(opt->get_name(), "--repo",
                                   "applies to the build audit, not to a scan of a foreign tree"));
  ws1::AuditArtifact a = begin_artifact("repo");
  auto scan = ws1::scan_repo(o.repo);
  if (!scan) return report(scan.error());
  a.repo = *scan;
  a.finished = ws1::utc_now_iso8601();
  if (!o.sarif.empty()) {
    if (auto st = ws1::write_file_atomic(o.sarif, ws1::sarif_json(*scan, ws1::build_info().version)); !st)
      return report(st.error());
  }
  std::string written;
  if (auto rc = write_artifact(a, o.out, written)) return *rc;
  if (o.json) {
    fmt::print("{}", ws1::audit_json(a));
  } else {
    fmt::print("ws1check audit --repo {}: {} source files scanned, {} findings\n", scan->root,
               scan->files_scanned, scan->findings.size());
    for (const auto& f : scan->findings)
      fmt::print("{}:{}: {}: {}\n", f.file, f.line, f.rule, f.message);
    const ws1::ToleranceCount& t = scan->tolerance_total;
    fmt::print("hard-coded tolerances in tests: {} (atol {}, rtol {}) in {} files\n", t.total(),
               t.atol, t.rtol, scan->tolerance_by_file.size());
    for (const auto& [file, c] : scan->tolerance_by_file)
      fmt::print("  {}: {} (atol {}, rtol {})\n", file, c.total(), c.atol, c.rtol);
    std::vector<std::string> by_rule;
    for (const auto& r : ws1::repo_rules()) {
      std::size_t n = 0;
      for (const auto& f : scan->findings) n += f.rule == r.id ? 1 : 0;
      by_rule.push_back(fmt::format("{} {}", r.id, n));
    }
    fmt::print("findings by rule: {}\n", fmt::join(by_rule, ", "));
    for (const auto& s : scan->skipped) fmt::print("skipped: {}\n", s);
    if (!o.sarif.empty()) fmt::print("sarif: {}\n", o.sarif);
    if (!written.empty()) fmt::print("artifact: {}\n", written);
  }
  return scan->findings.empty() ? 0 : exit_code(ws1::ExitCode::kRed);
}

}  // namespace

Command register_audit(CLI::App& app) {
  auto o = std::make_shared<AuditOptions>();
  auto* sub = app.add_subcommand("audit", "live spec §9 conformance table for this build, or "
                                          "--repo: static scan of a foreign tree");
  o->build_only.push_back(sub->add_option("--contract", o->build.contract, "tolerance contract")
                              ->default_str(default_contract()));
  o->build_only.push_back(
      sub->add_option("--workload", o->build.workload,
                      "tiny workload: its short fixtures feed the gold-provenance and logprob rows")
          ->default_str(default_tiny_workload()));
  o->build_only.push_back(
      sub->add_option("--probe-workload", o->build.probe_workload,
                      "workload whose model widths and seed the declared-order probes use")
          ->default_str(default_workload()));
  o->build_only.push_back(sub->add_option(
      "--evidence", o->build.evidence,
      "evidence artifact: its tool.source_commit must be this build's, its tree clean"));
  o->build_only.push_back(sub->add_option("--threads", o->build.threads, "CPU threads (0: all cores)"));
  o->build_only.push_back(sub->add_option(
      "--backend", o->build.backends,
      "a backend to probe besides cpu_bf16 and cuda_bf16 (repeatable; e.g. triton_cuda_bf16, exec:CMD)"));
  sub->add_option("--repo", o->repo, "static scan of a foreign Python/Triton/CUDA tree instead");
  auto* sarif = sub->add_option("--sarif", o->sarif, "with --repo: write the findings as SARIF 2.1.0");
  sub->add_option("--out", o->out, "directory for the audit artifact (DIR/audit.json)");
  sub->add_flag("--json", o->json, "print the audit artifact on stdout instead of the table");
  return {sub, [o, sarif] {
            if (!o->repo.empty()) return run_repo(*o);
            if (sarif->count() > 0)
              return report(ws1::bad_input("--sarif", o->sarif, "needs --repo PATH (SARIF carries the "
                                                                "findings of a repository scan)"));
            return run_build(*o);
          }};
}

}  // namespace ws1cli

// `ws1check gate`: the whole matrix for every op × requested backend — forward and gradient
// accuracy on every tier's fixtures, forward and gradient invariance under every transform —
// then parity (not built yet) and the build audit; prints the matrix and writes the evidence
// artifact, the matrix in upstream's C8 shape, JUnit XML and the HTML report. Exit 0 green,
// 1 a red cell (or a red C8 row, or a failed audit), 2 bad input, 3 environment.
#include <fmt/core.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <system_error>
#include <thread>

#include "audit_session.hpp"
#include "commands.hpp"
#include "gate_parity.hpp"
#include "common.hpp"
#include "run_session.hpp"
#include "run_support.hpp"
#include "ws1/invariance.hpp"
#include "ws1/plan.hpp"
#include "ws1/report.hpp"
#include "ws1/runner.hpp"

namespace ws1cli {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// File names inside --out.
constexpr std::string_view kEvidenceName = "gate";  // gate.json
constexpr std::string_view kC8File = "c8-execute.json";
constexpr std::string_view kJunitFile = "junit.xml";
constexpr std::string_view kHtmlFile = "report.html";

struct GateOptions {
  std::string backends, ops = "all", contract, workload, out = "ws1check-out", compare_c8;
  std::string model = "synthetic:tiny";
  std::string reference;  // --reference: where the accuracy cells' FP32 golds are computed
  bool quiet = false;
  bool overlap_backends = false;
  bool fail_vacuous = false;  // also on under a ws1-c1-v3 contract
  unsigned threads = 0;
};

// "a,b" -> {"a", "b"}; an empty item or a repeated one is bad input.
ws1::Result<std::vector<std::string>> split_list(const std::string& option, const std::string& value) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = value.find(',', start);
    std::string item = value.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (item.empty()) return ws1::bad_input(option, value, "empty item in the comma-separated list");
    for (const auto& o : out)
      if (o == item) return ws1::bad_input(option, value, "'" + item + "' is listed twice");
    out.push_back(item);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

ws1::Result<std::vector<const ws1::Op*>> gate_ops(const std::string& value) {
  if (value == "all") return select_ops("all");
  auto names = split_list("--ops", value);
  if (!names) return names.error();
  std::vector<const ws1::Op*> ops;
  for (const auto& n : *names) {
    if (n == "all") return ws1::bad_input("--ops", value, "'all' cannot be combined with op names");
    auto one = select_ops(n);
    if (!one) return one.error();
    ops.push_back(one->front());
  }
  return ops;
}

// A planned step (ws1/plan.hpp) of one backend's session.
struct Step {
  Session* session = nullptr;
  ws1::PlannedStep planned;
  std::string label;
};

ws1::Result<std::vector<Step>> plan(const std::vector<std::unique_ptr<Session>>& sessions,
                                    const std::vector<const ws1::Op*>& ops) {
  // As `accuracy --tier all` and `invariance --transform all`.
  const ws1::CellSelection all = ws1::whole_matrix(ops);
  std::vector<Step> steps;
  for (const auto& s : sessions) {
    auto planned = ws1::plan_cells(s->workload.catalogue, s->workload.manifest.file, all);
    if (!planned) return planned.error();
    for (ws1::PlannedStep& p : *planned) {
      std::string label = fmt::format("{} {} {}", s->backend->name(), ws1::contract_name(p.judgment), p.fixture->id);
      if (p.invariance()) label += fmt::format(" ({} transforms)", p.transforms.size());
      steps.push_back({s.get(), std::move(p), std::move(label)});
    }
  }
  return steps;
}

// One line on stderr, rewritten in place: cells done / total, the step running, elapsed.
// Safe to share between the backends' threads.
class Progress {
 public:
  Progress(bool on, std::size_t total) : on_(on), total_(total), t0_(Clock::now()) {}
  // `cells` more are done (0 at a step's start); `what` is running now.
  void show(std::size_t cells, const std::string& what) {
    std::lock_guard lock(mutex_);
    done_ += cells;
    if (!on_) return;
    const double secs = std::chrono::duration<double>(Clock::now() - t0_).count();
    fmt::print(stderr, "\r\x1b[K[gate {}/{} cells, {:.1f} s] {}", done_, total_, secs, what);
    std::fflush(stderr);
  }
  void clear() {
    std::lock_guard lock(mutex_);
    if (on_) fmt::print(stderr, "\r\x1b[K");
  }

 private:
  std::mutex mutex_;
  bool on_;
  std::size_t total_, done_ = 0;
  Clock::time_point t0_;
};

// What a run of steps produced, in step order; `error` stops it at the failing step.
struct StepsRun {
  std::vector<ws1::Cell> cells;
  std::map<std::string, double> seconds;  // per cell id (JUnit)
  std::optional<ws1::Error> error;
};

// Runs `steps` in order with one fixture generator (its parameter cache serves them all).
// `stop` set by another thread ends the run before its next step.
StepsRun run_steps(std::span<const Step> steps, unsigned threads, Progress& progress, const std::atomic<bool>& stop) {
  StepsRun r;
  ws1::FixtureGenerator generator({threads});
  for (const Step& st : steps) {
    if (stop) break;
    progress.show(0, st.label);
    const auto t0 = Clock::now();
    std::vector<ws1::Cell> cells;
    const ws1::PlannedStep& p = st.planned;
    if (!p.invariance()) {
      auto cell = ws1::run_accuracy_cell(st.session->run, generator, *st.session->backend, *p.op, p.judgment,
                                         *p.fixture);
      if (!cell) {
        r.error = cell.error();
        break;
      }
      cells.push_back(std::move(cell).value());
    } else {
      auto inv = ws1::run_invariance_cells(st.session->run, generator, *st.session->backend, *p.op, p.judgment,
                                           p.transforms, *p.fixture);
      if (!inv) {
        r.error = inv.error();
        break;
      }
      cells = std::move(inv).value();
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    spdlog::debug("{}: {} cells ({:.2f} s)", st.label, cells.size(), secs);
    for (auto& c : cells) {
      // An invariance step's time is shared evenly by its cells (one canonical run serves all).
      r.seconds[c.id] = secs / static_cast<double>(cells.size());
      r.cells.push_back(std::move(c));
    }
    progress.show(p.cells(), st.label);
  }
  return r;
}

// Every step, one backend after the other, or (overlap) each backend's steps on a thread of its
// own; either way the cells come back in step order, so the evidence does not depend on it.
StepsRun run_all(const std::vector<Step>& steps, unsigned threads, bool overlap, Progress& progress) {
  std::atomic<bool> stop = false;
  if (!overlap) return run_steps(steps, threads, progress, stop);
  std::vector<std::span<const Step>> groups;  // the plan is backend-major: one range per session
  for (std::size_t b = 0; b < steps.size();) {
    std::size_t e = b;
    while (e < steps.size() && steps[e].session == steps[b].session) ++e;
    groups.emplace_back(steps.data() + b, e - b);
    b = e;
  }
  std::vector<StepsRun> runs(groups.size());
  std::vector<std::thread> workers;
  for (std::size_t g = 0; g < groups.size(); ++g)
    workers.emplace_back([&, g] {
      runs[g] = run_steps(groups[g], threads, progress, stop);
      if (runs[g].error) stop = true;
    });
  for (std::thread& w : workers) w.join();
  StepsRun all;
  for (StepsRun& r : runs) {
    if (r.error && !all.error) all.error = r.error;
    for (ws1::Cell& c : r.cells) all.cells.push_back(std::move(c));
    all.seconds.merge(r.seconds);
  }
  return all;
}

// The matrix on stdout: one row per backend × op, one column per judgment, each the cells'
// verdicts counted.
std::string tally_text(const std::vector<const ws1::Cell*>& cells) {
  std::size_t g = 0, r = 0, na = 0, v = 0;
  for (const ws1::Cell* c : cells)
    (c->verdict == ws1::Verdict::kGreen     ? g
     : c->verdict == ws1::Verdict::kRed     ? r
     : c->verdict == ws1::Verdict::kVacuous ? v
                                            : na)++;
  if (cells.empty()) return "-";
  if (r > 0) return fmt::format("RED {}/{}", r, cells.size());
  std::string s = g > 0 ? fmt::format("green {}", g) : v > 0 ? fmt::format("vacuous {}", v) : fmt::format("N/A {}", na);
  if (g > 0 && v > 0) s += fmt::format(" +{} vac", v);
  if ((g > 0 || v > 0) && na > 0) s += fmt::format(" +{} N/A", na);
  return s;
}

void print_matrix(const ws1::Evidence& e, const std::vector<std::unique_ptr<Session>>& sessions,
                  const std::vector<const ws1::Op*>& ops) {
  const ws1::Judgment js[] = {ws1::Judgment::kForwardAccuracy, ws1::Judgment::kGradientAccuracy,
                              ws1::Judgment::kForwardInvariance, ws1::Judgment::kGradientInvariance};
  print_contract_line(e);
  fmt::print("{:<10} {:<21} {:<18} {:<18} {:<18} {:<18}\n", "backend", "op", "forward_accuracy",
             "gradient_accuracy", "forward_invariance", "gradient_invariance");
  for (const auto& s : sessions)
    for (const ws1::Op* op : ops) {
      fmt::print("{:<10} {:<21}", s->backend->name(), op->name());
      for (ws1::Judgment j : js) {
        std::vector<const ws1::Cell*> cells;
        for (const auto& c : e.cells)
          if (c.backend.expected == s->backend->name() && c.op == op->name() && c.judgment == j)
            cells.push_back(&c);
        fmt::print(" {:<18}", tally_text(cells));
      }
      fmt::print("\n");
    }
  for (const auto& c : e.cells)
    if (c.verdict == ws1::Verdict::kRed) fmt::print("red: {}: {}\n", c.id, ws1::cell_failure_message(c));
}

// The audit stage: the build audit of `ws1check audit` (its rows; a non-conformant row fails
// the stage).
ws1::Result<ws1::GateStage> audit_stage(const GateOptions& o, const std::vector<std::string>& backends) {
  BuildAuditOptions a{o.contract, "", "", "", o.threads, backends};
  auto run = run_build_audit(a);
  if (!run) return run.error();
  ws1::GateStage st{"audit", ws1::StageStatus::kPassed, "", {}};
  const ws1::AuditSummary sum = ws1::summarize(run->rows);
  for (const auto& r : run->rows)
    st.rows.push_back({r.id, std::string(ws1::audit_status_name(r.status)), r.basis});
  if (sum.non_conformant > 0) st.status = ws1::StageStatus::kFailed;
  st.detail = fmt::format("{} rows: {} conformant, {} exception declared, {} non-conformant, {} not checked",
                          sum.total, sum.conformant, sum.exception_declared, sum.non_conformant,
                          sum.not_checked);
  return st;
}

// Writes every output or none: each file atomically, and the ones already written are removed
// again when a later one fails.
ws1::Status write_outputs(const ws1::Evidence& e, const fs::path& out,
                          const std::vector<std::pair<std::string_view, std::string>>& files,
                          std::vector<fs::path>& written) {
  auto ev = ws1::write_evidence(e, out, kEvidenceName);
  if (!ev) return ev.error();
  written.push_back(*ev);
  for (const auto& [name, text] : files) {
    const fs::path p = out / name;
    if (auto st = ws1::write_file_atomic(p, text); !st) {
      std::error_code ec;
      for (const auto& w : written) fs::remove(w, ec);
      written.clear();
      return st;
    }
    written.push_back(p);
  }
  return {};
}

int run(const GateOptions& o) {
  const auto t_start = Clock::now();
  if (o.quiet) spdlog::set_level(spdlog::level::err);
  if (o.backends.empty())
    return report(ws1::bad_input("--backends", "", "required: e.g. --backends cpu_bf16 (comma-separated)"));
  auto backends = split_list("--backends", o.backends);
  if (!backends) return report(backends.error());
  auto ops = gate_ops(o.ops);
  if (!ops) return report(ops.error());
  std::optional<ws1::C8Matrix> theirs;
  if (!o.compare_c8.empty()) {
    auto m = ws1::read_c8(o.compare_c8);
    if (!m) return report(m.error());
    theirs = std::move(m).value();
  }
  if (std::error_code ec; fs::exists(o.out, ec) && !fs::is_directory(o.out, ec))
    return report(ws1::bad_input(o.out, "--out", "exists and is not a directory"));

  std::vector<std::unique_ptr<Session>> sessions;
  for (const auto& b : *backends) {
    auto s = open_session({b, o.contract, o.workload, o.threads, o.reference});
    if (!s) return report(s.error());
    sessions.push_back(std::move(s).value());
  }
  // Every backend judges the same fixtures against the same reference: v3's naive-engine errors
  // are computed once for all of them.
  for (const auto& s : sessions) s->run.naive_errors = sessions.front()->run.naive_errors;
  // Cells and C8 rows are keyed by the id each backend answers to (an exec: worker announces
  // its own, e.g. triton_cuda_bf16), so two entries answering to one id cannot share a gate.
  std::vector<std::string> profiles;
  for (const auto& s : sessions) {
    const std::string id = s->backend->name();
    if (std::find(profiles.begin(), profiles.end(), id) != profiles.end())
      return report(ws1::bad_input("--backends", o.backends, "two entries run as backend " + id));
    profiles.push_back(id);
  }
  ws1::Evidence& evidence = sessions.front()->evidence;
  evidence.environment.backend = o.backends;
  auto steps = plan(sessions, *ops);
  if (!steps) return report(steps.error());

  std::size_t total = 0;
  for (const auto& st : *steps) total += st.planned.cells();
  const bool quiet = o.quiet || spdlog::get_level() >= spdlog::level::err;
  Progress progress(!quiet && isatty(STDERR_FILENO) != 0, total);
  StepsRun ran = run_all(*steps, o.threads, o.overlap_backends && sessions.size() > 1, progress);
  if (ran.error) {
    progress.clear();
    return report(*ran.error);
  }
  for (ws1::Cell& c : ran.cells) evidence.cells.push_back(std::move(c));
  const std::map<std::string, double>& seconds = ran.seconds;
  progress.show(0, "parity, audit, reports");

  std::vector<ws1::GateStage> stages;
  auto parity = parity_stage(o.model, sessions, o.threads, evidence.cells);
  if (!parity) {
    progress.clear();
    return report(parity.error());
  }
  stages.push_back(std::move(parity).value());
  auto audit = audit_stage(o, *backends);
  if (!audit) {
    progress.clear();
    return report(audit.error());
  }
  stages.push_back(std::move(audit).value());

  evidence.finished = ws1::utc_now_iso8601();
  std::vector<std::string> op_names;
  for (const ws1::Op* op : *ops) op_names.emplace_back(op->name());
  const ws1::C8Matrix c8 = ws1::c8_matrix(evidence, profiles, op_names);

  // Everything is rendered (and the evidence validated) before the first byte is written.
  const fs::path out(o.out);
  auto evidence_text = ws1::evidence_json(evidence, (out / fmt::format("{}.json", kEvidenceName)).string());
  if (!evidence_text) {
    progress.clear();
    return report(evidence_text.error());
  }
  ws1::JunitOptions junit{"ws1check", seconds, stages};
  ws1::HtmlOptions html;
  html.stages = stages;
  html.c8 = &c8;
  const std::vector<std::pair<std::string_view, std::string>> files = {
      {kC8File, ws1::c8_json(c8)},
      {kJunitFile, ws1::junit_xml(evidence, junit)},
      {kHtmlFile, ws1::html_report(evidence, html)},
  };
  std::vector<fs::path> written;
  if (auto st = write_outputs(evidence, out, files, written); !st) {
    progress.clear();
    return report(st.error());
  }
  progress.clear();

  print_matrix(evidence, sessions, *ops);
  bool red = false;
  for (const auto& st : stages) {
    fmt::print("{}: {}\n", st.name, st.status == ws1::StageStatus::kNotBuilt ? "not built"
                                    : fmt::format("{} ({})", ws1::stage_status_name(st.status), st.detail));
    red |= st.status == ws1::StageStatus::kFailed;
    for (const auto& r : st.rows)
      if (st.status == ws1::StageStatus::kFailed) fmt::print("  {}: {}: {}\n", r.name, r.status, r.detail);
  }
  std::string c8_counts;
  for (const auto& [k, n] : ws1::c8_counts(c8)) c8_counts += fmt::format("{}{} {}", c8_counts.empty() ? "" : ", ", k, n);
  fmt::print("c8 ({}): {} rows: {}\n", ws1::kC8SchemaVersion, c8.cells.size(), c8_counts.empty() ? "none" : c8_counts);
  for (const auto& c : c8.cells)
    if (c.status == "red") {
      red = true;
      fmt::print("c8 red: {} {} {} {}: {}\n", c.profile, c.op_name, c.judgment, c.tier, c.detail);
    }
  if (theirs) {
    const auto diffs = ws1::compare_c8(c8, *theirs);
    fmt::print("c8 compare with {}: {} rows differ\n", o.compare_c8, diffs.size());
    for (const auto& d : diffs)
      fmt::print("  {} vs {}: {} {} {}: {} vs {}\n", d.ours_profile, d.theirs_profile, d.op_name, d.judgment,
                 d.tier, d.ours.value_or("(no row)"), d.theirs.value_or("(no row)"));
  }
  const ws1::Summary sum = ws1::summarize(evidence.cells);
  red |= sum.red > 0;
  const bool fail_vacuous = o.fail_vacuous || evidence.contract.version == "ws1-c1-v3";
  if (sum.vacuous > 0)
    fmt::print("vacuous: {} cell(s) that an all-zero candidate passes as well{}\n", sum.vacuous,
               fail_vacuous ? " (they fail the gate: --fail-vacuous or contract v3)" : "; --fail-vacuous fails on them");
  red |= fail_vacuous && sum.vacuous > 0;
  fmt::print("gate {}: green {}, red {}, N/A {}, vacuous {} of {} cells ({:.1f} s)\n", red ? "red" : "green",
             sum.green, sum.red, sum.na, sum.vacuous, sum.total,
             std::chrono::duration<double>(Clock::now() - t_start).count());
  for (const auto& p : written) fmt::print("wrote {}\n", p.string());
  return red ? exit_code(ws1::ExitCode::kRed) : 0;
}

}  // namespace

Command register_gate(CLI::App& app) {
  auto o = std::make_shared<GateOptions>();
  auto* sub = app.add_subcommand(
      "gate", "the whole matrix (accuracy on every tier, invariance under every transform) for every op and "
              "backend, parity and audit; evidence, C8 matrix, JUnit XML and HTML report");
  sub->add_option("--backends", o->backends, "comma-separated backends, e.g. cpu_bf16 or cpu_bf16,cuda_bf16 (required)");
  sub->add_option("--ops", o->ops, "comma-separated op names or 'all'")->default_str("all");
  sub->add_option("--contract", o->contract, "tolerance contract")->default_str(default_contract());
  sub->add_option("--workload", o->workload, "workload manifest")->default_str(default_workload());
  sub->add_option("--out", o->out,
                  "directory for gate.json (evidence), c8-execute.json (upstream's C8 shape), junit.xml and "
                  "report.html")
      ->default_str(o->out);
  sub->add_option("--compare-c8", o->compare_c8,
                  "a ws1-c8-execute-v2 file (e.g. upstream's H20 evidence) to compare row by row; differences "
                  "are printed and do not change the exit code");
  sub->add_option("--model", o->model,
                  "the parity stage's weights: synthetic:tiny | synthetic:qwen3-8b | a Hugging Face snapshot "
                  "(verified against the manifest's pins; the WS1 chain gate)")
      ->default_str(o->model);
  sub->add_option("--reference", o->reference,
                  "where the accuracy cells' FP32 references are computed: cpu | cuda_fp32 (every op on the GPU; "
                  "each cell records its engine)")
      ->default_str("cpu");
  sub->add_option("--threads", o->threads, "CPU threads (0: all cores)");
  sub->add_flag("--overlap-backends", o->overlap_backends,
                "run each backend's cells on a host thread of its own, at the same time (the evidence is the "
                "same as one backend after the other; not yet measured on the GPU)");
  sub->add_flag("--fail-vacuous", o->fail_vacuous,
                "exit 1 when a cell is vacuous (passed, but an all-zero candidate passes too); the default "
                "under a ws1-c1-v3 contract");
  sub->add_flag("-q,--quiet", o->quiet, "no progress line and only errors on stderr");
  return {sub, [o] { return run(*o); }};
}

}  // namespace ws1cli

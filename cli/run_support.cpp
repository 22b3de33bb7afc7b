#include "run_support.hpp"

#include <fmt/core.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <filesystem>

#include "common.hpp"
#include "ws1/op_catalogue.hpp"

namespace ws1cli {

void add_run_options(CLI::App* sub, std::string& backend, std::string& contract,
                     std::string& workload, std::string& out, bool& json, unsigned& threads) {
  sub->add_option("--backend", backend, "cpu_bf16 | cuda_bf16 (default: cuda_bf16 with a GPU)");
  sub->add_option("--contract", contract, "tolerance contract")->default_str(default_contract());
  sub->add_option("--workload", workload, "workload manifest")->default_str(default_workload());
  sub->add_option("--out", out, "directory for the evidence artifact")->default_str(out);
  sub->add_flag("--json", json, "print the evidence artifact on stdout instead of the table");
  sub->add_option("--threads", threads, "CPU threads (0: all cores)");
}

ws1::Result<std::vector<ws1::Judgment>> judgments_for(const std::string& direction,
                                                      ws1::Judgment forward, ws1::Judgment gradient) {
  if (direction == "fwd") return std::vector{forward};
  if (direction == "bwd") return std::vector{gradient};
  if (direction == "both") return std::vector{forward, gradient};
  return ws1::bad_input("--direction", direction, "expected fwd, bwd or both");
}

ws1::Result<std::vector<const ws1::Op*>> select_ops(const std::string& op) {
  std::vector<const ws1::Op*> out;
  if (op == "all") {
    for (const auto& info : ws1::op_catalogue()) {
      const ws1::Op* impl = ws1::find_op_impl(info.name);
      if (impl == nullptr)
        return ws1::bad_input("--op", std::string(info.name), "no implementation in this build");
      out.push_back(impl);
    }
    return out;
  }
  if (!ws1::find_op(op)) return ws1::bad_input("--op", op, "unknown op (see `ws1check ops`)");
  const ws1::Op* impl = ws1::find_op_impl(op);
  if (impl == nullptr) return ws1::bad_input("--op", op, "no implementation in this build");
  out.push_back(impl);
  return out;
}

namespace {

// A bitwise cell: what was compared, e.g. "bits equal: o [27, 32, 128], dq [27, 32, 128]".
std::string bits_text(const ws1::Cell& c) {
  std::string s;
  for (const auto& t : c.bitwise)
    s += fmt::format("{}{} {}", s.empty() ? "bits equal: " : ", ", t.name,
                     ws1::shape_string(t.rhs_shape));
  return s;
}

// Max ulp in context: an element N candidate steps off by at most max|err| has
// |ref| <~ 2^p * max|err| / N (a step at |r| is more than |r| * 2^-p, p the significand bits),
// so a large count beside a green verdict reads as what it is: tiny values, tiny steps.
std::string ulp_text(const ws1::AccuracyTensor& t) {
  const double n = t.ulp_distance.max;
  if (!(n >= 16) || !std::isfinite(t.abs_error.max)) return fmt::format("max ulp {:.0f}", n);
  const int p = t.dtype == ws1::DType::kBF16 ? 8 : t.dtype == ws1::DType::kF16 ? 11 : 24;
  return fmt::format("max ulp {:.0f} (at |ref| below ~{:.2g})", n, std::ldexp(t.abs_error.max, p) / n);
}

std::string worst_text(const ws1::Cell& c) {
  if (c.accuracy.empty() && !c.bitwise.empty()) return bits_text(c);
  // The tensor whose worst element uses the largest share of its allowance (|err| / allowed,
  // the judge's margin) first, then that tensor's max |err|, P99.9 and max ulp, against the row.
  const ws1::AccuracyTensor* worst = nullptr;
  const auto ratio = [](const ws1::AccuracyTensor& t) { return t.worst ? t.worst->margin : 0.0; };
  for (const auto& t : c.accuracy)
    if (worst == nullptr || ratio(t) > ratio(*worst)) worst = &t;
  if (worst == nullptr || !c.threshold) return c.reason;
  const std::string at =
      worst->worst ? fmt::format(" at {}", ws1::shape_string(worst->worst->index)) : "";
  // A v3 rule's tolerance is the tensor's own (ws1::AppliedRule), not the cell row's.
  const double atol = worst->rule ? worst->rule->atol : c.threshold->atol.value_or(0);
  const double rtol = worst->rule ? worst->rule->rtol : c.threshold->rtol.value_or(0);
  return fmt::format("{}: |err|/allowed {:.3g}{}; max|err| {:.3g}, p99.9 {:.3g}, {} (atol {:.3g}{}, rtol {:.3g})",
                     worst->name, ratio(*worst), at, worst->abs_error.max, worst->abs_error.p999, ulp_text(*worst),
                     atol, worst->rule ? " = atol_rel x max|ref|" : "", rtol);
}

}  // namespace

void print_contract_line(const ws1::Evidence& evidence) {
  fmt::print("judged by contract {} ({}, sha256 {:.12})\n", evidence.contract.version, evidence.contract.path,
             evidence.contract.sha256);
}

int finish_run(ws1::Evidence& evidence, const std::string& out, const std::string& name,
               bool json) {
  evidence.finished = ws1::utc_now_iso8601();
  auto text = ws1::evidence_json(evidence, out + "/" + name + ".json");
  if (!text) return report(text.error());
  std::error_code ec;
  const bool replaces = std::filesystem::exists(std::filesystem::path(out) / (name + ".json"), ec);
  auto path = ws1::write_evidence(evidence, out, name);
  if (!path) return report(path.error());
  const ws1::Summary s = ws1::summarize(evidence.cells);
  if (json) {
    fmt::print("{}", *text);
  } else {
    std::size_t width = 4;
    for (const auto& c : evidence.cells) width = std::max(width, c.id.size());
    print_contract_line(evidence);
    fmt::print("{:<{}}  {:<5}  {}\n", "cell", width, "verdict", "worst |err|/allowed, largest error vs the contract row | reason");
    for (const auto& c : evidence.cells) {
      const std::string detail = c.verdict == ws1::Verdict::kGreen ? worst_text(c)
                                 : c.verdict == ws1::Verdict::kNa  ? c.reason
                                                                   : c.reason;
      fmt::print("{:<{}}  {:<7}  {}\n", c.id, width, ws1::verdict_name(c.verdict), detail);
    }
    fmt::print("green {}, red {}, N/A {}{} of {} cells; evidence: {}{}\n", s.green, s.red, s.na,
               s.vacuous > 0 ? fmt::format(", vacuous {} (not green evidence)", s.vacuous) : "", s.total,
               path->string(), replaces ? " (replacing the previous run's; --out DIR keeps runs apart)" : "");
  }
  return s.red > 0 ? exit_code(ws1::ExitCode::kRed) : 0;
}

}  // namespace ws1cli

// The self-contained HTML report: static markup (readable without script), inline style,
// inline SVG charts and a small inline script (html_assets.cpp).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "html_parts.hpp"
#include "report_text.hpp"
#include "ws1/report.hpp"
#include "ws1/tensor.hpp"

namespace ws1 {
namespace {

using report::num;

std::string h(std::string_view s) { return xml_escape(s); }

std::string vclass(Verdict v) { return "v-" + std::string(verdict_name(v)); }
std::string vlabel(Verdict v) { return v == Verdict::kNa ? "N/A" : std::string(verdict_name(v)); }
std::string anchor(const Cell& c) { return "c-" + c.id; }

bool is_accuracy(Judgment j) {
  return j == Judgment::kForwardAccuracy || j == Judgment::kGradientAccuracy;
}

// ---- the matrix ----

struct Column {
  Judgment judgment;
  std::string sub;  // tier (accuracy) or transform (invariance)
};

int tier_rank(const std::string& t) {
  static const std::vector<std::string> order = {"short", "primary", "long", "user"};
  auto it = std::find(order.begin(), order.end(), t);
  return static_cast<int>(it - order.begin());
}

std::vector<Column> columns_of(const std::vector<Cell>& cells) {
  std::vector<Column> cols;
  for (Judgment j : {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy,
                     Judgment::kForwardInvariance, Judgment::kGradientInvariance,
                     Judgment::kChainParity}) {
    std::vector<std::string> subs;
    for (const Cell& c : cells) {
      if (c.judgment != j) continue;
      const std::string sub = is_accuracy(j) ? c.tier : c.transform;
      if (std::find(subs.begin(), subs.end(), sub) == subs.end()) subs.push_back(sub);
    }
    if (is_accuracy(j))
      std::stable_sort(subs.begin(), subs.end(),
                       [](const auto& a, const auto& b) { return tier_rank(a) < tier_rank(b); });
    for (auto& s : subs) cols.push_back({j, s});
  }
  return cols;
}

std::string square(const Cell& c) {
  const bool param = c.id.ends_with("/parameters");
  std::string detail = c.verdict == Verdict::kRed ? cell_failure_message(c) : c.reason;
  return fmt::format("<a class=\"sq {}{}\" data-v=\"{}\" href=\"#{}\" title=\"{}\"></a>", vclass(c.verdict),
                     param ? " param" : "", verdict_name(c.verdict), h(anchor(c)),
                     h(c.id + ": " + vlabel(c.verdict) + (detail.empty() ? "" : " | " + detail)));
}

std::string matrix_section(const Evidence& e) {
  const std::vector<Column> cols = columns_of(e.cells);
  std::vector<std::pair<std::string, std::string>> rows;  // (backend, op)
  std::map<std::pair<std::string, std::string>, std::map<std::size_t, std::string>> squares;
  for (const Cell& c : e.cells) {
    std::pair key{c.backend.expected, c.op};
    if (std::find(rows.begin(), rows.end(), key) == rows.end()) rows.push_back(key);
    const std::string sub = is_accuracy(c.judgment) ? c.tier : c.transform;
    for (std::size_t i = 0; i < cols.size(); ++i)
      if (cols[i].judgment == c.judgment && cols[i].sub == sub) squares[key][i] += square(c);
  }
  std::string s =
      "<section id=\"matrix\"><h2>Matrix</h2>\n<p class=\"legend\"><span><i class=\"sq v-green\"></i>green</span>"
      "<span><i class=\"sq v-red\"></i>red</span><span><i class=\"sq v-na\"></i>N/A</span>"
      "<span><i class=\"sq v-na param\"></i>parameter-gradient cell</span>"
      "<button data-filter=\"all\" hidden>all</button><button data-filter=\"red\" hidden>red only</button></p>\n"
      "<p class=\"muted\">One square per cell (accuracy: one per fixture of the tier; invariance: one per "
      "transform, round for parameter gradients). Hover for the verdict, click for the details.</p>\n"
      "<table class=\"heat\"><thead><tr><th rowspan=\"2\">backend</th><th rowspan=\"2\">op</th>";
  for (std::size_t i = 0; i < cols.size();) {
    std::size_t n = 0;
    while (i + n < cols.size() && cols[i + n].judgment == cols[i].judgment) ++n;
    s += fmt::format("<th class=\"grp\" colspan=\"{}\">{}</th>", n, h(contract_name(cols[i].judgment)));
    i += n;
  }
  s += "</tr><tr>";
  for (const Column& c : cols) s += fmt::format("<th class=\"col\">{}</th>", h(c.sub));
  s += "</tr></thead><tbody>\n";
  for (const auto& key : rows) {
    s += fmt::format("<tr><th>{}</th><th>{}</th>", h(key.first), h(key.second));
    for (std::size_t i = 0; i < cols.size(); ++i) {
      auto& m = squares[key];
      auto it = m.find(i);
      s += "<td>" + (it == m.end() ? std::string() : it->second) + "</td>";
    }
    s += "</tr>\n";
  }
  return s + "</tbody></table></section>\n";
}

// ---- header, stages, red cells ----

Verdict page_verdict(const Summary& sum, const HtmlOptions& o) {
  bool red = sum.red > 0;
  for (const GateStage& st : o.stages) red |= st.status == StageStatus::kFailed;
  if (o.c8 != nullptr)
    for (const C8Cell& c : o.c8->cells) red |= c.status == "red";
  return red ? Verdict::kRed : overall_verdict(sum);
}

std::string header(const Evidence& e, const HtmlOptions& o, const Summary& sum) {
  const Verdict v = page_verdict(sum, o);
  std::string source = e.checkout ? e.checkout->commit + (e.checkout->dirty ? " (dirty tree)" : " (clean tree)")
                                  : "not a git checkout";
  std::string s = fmt::format(
      "<header><h1>{} <span class=\"badge {}\" id=\"verdict\">{}</span></h1>\n"
      "<p id=\"summary-counts\" data-green=\"{}\" data-red=\"{}\" data-na=\"{}\" data-total=\"{}\" "
      "data-vacuous=\"{}\"><b>{} cells</b>: green {}, red {}, N/A {}, vacuous {} (not green evidence)</p>\n"
      "<p class=\"muted\" id=\"rendered-counts\">(the page's script has not run)</p>\n"
      "<p>contract <code>{}</code> ({}, sha256 <code>{}</code>)<br>workload <code>{}</code> ({}, {})<br>"
      "source {} &middot; {} {} &middot; {} &rarr; {}</p>\n",
      h(o.title), vclass(v), h(vlabel(v)), sum.green, sum.red, sum.na, sum.total, sum.vacuous, sum.total,
      sum.green, sum.red, sum.na, sum.vacuous, h(e.contract.path), h(e.contract.version), h(e.contract.sha256),
      h(e.workload.path), h(e.workload.workload_id), h(e.workload.manifest_version), h(source),
      h(e.tool.name), h(e.tool.version), h(e.started), h(e.finished));
  s += "<nav><a href=\"#stages\">stages</a><a href=\"#matrix\">matrix</a><a href=\"#red\">red cells</a>"
       "<a href=\"#worst\">worst elements</a><a href=\"#accuracy\">error distributions</a>"
       "<a href=\"#invariance\">invariance</a><a href=\"#parity\">parity</a><a href=\"#c8\">C8 rows</a><a href=\"#environment\">environment</a></nav>"
       "</header>\n";
  return s;
}

std::string stages_section(const HtmlOptions& o) {
  std::string s = "<section id=\"stages\"><h2>Gate stages</h2>\n<table><tr><th>stage</th><th>status</th><th>detail</th></tr>\n";
  for (const GateStage& st : o.stages) {
    const char* cls = st.status == StageStatus::kPassed ? "s-green" : st.status == StageStatus::kFailed ? "s-red" : "s-na";
    s += fmt::format("<tr class=\"stage\"><th>{}</th><td class=\"{}\">{}</td><td>{}</td></tr>\n", h(st.name), cls,
                     h(stage_status_name(st.status)), h(st.detail));
    for (const StageRow& r : st.rows)
      s += fmt::format("<tr><td>&nbsp;&nbsp;{}</td><td>{}</td><td>{}</td></tr>\n", h(r.name), h(r.status), h(r.detail));
  }
  if (o.stages.empty()) s += "<tr><td colspan=\"3\" class=\"muted\">none</td></tr>\n";
  return s + "</table></section>\n";
}

std::string red_section(const Evidence& e) {
  std::string s = "<section id=\"red\"><h2>Red cells</h2>\n";
  std::string rows;
  for (const Cell& c : e.cells)
    if (c.verdict == Verdict::kRed)
      rows += fmt::format("<tr><td><a href=\"#{}\">{}</a></td><td>{}</td></tr>\n", h(anchor(c)), h(c.id),
                          h(cell_failure_message(c)));
  if (rows.empty()) return s + "<p>None.</p></section>\n";
  return s + "<table><tr><th>cell</th><th>worst element | reason</th></tr>\n" + rows + "</table></section>\n";
}

// ---- worst elements ----

std::string worst_section(const Evidence& e, std::size_t limit) {
  std::vector<std::pair<const Cell*, const AccuracyTensor*>> all;
  for (const Cell& c : e.cells)
    for (const auto& t : c.accuracy)
      if (t.worst) all.emplace_back(&c, &t);
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.second->worst->margin > b.second->worst->margin;
  });
  std::string s = fmt::format(
      "<section id=\"worst\"><h2>Worst elements</h2>\n<p class=\"muted\">The {} tensors whose worst element uses the "
      "largest share of its allowance (|err| / (atol + rtol&middot;|reference|); above 1 is a violation), of {}.</p>\n"
      "<table><tr><th>cell</th><th>tensor</th><th>index</th><th>candidate</th><th>reference</th><th>|err|</th>"
      "<th>allowed</th><th>|err|/allowed</th><th>violations</th></tr>\n",
      std::min(limit, all.size()), all.size());
  for (std::size_t i = 0; i < all.size() && i < limit; ++i) {
    const auto& [c, t] = all[i];
    const WorstElement& w = *t->worst;
    s += fmt::format(
        "<tr class=\"{}\"><td><a href=\"#{}\">{}</a></td><td>{}</td><td class=\"mono\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num{}\">{}</td>"
        "<td class=\"num\">{} / {}</td></tr>\n",
        w.violates ? "bad" : "ok", h(anchor(*c)), h(c->id), h(t->name), h(shape_string(w.index)), num(w.candidate),
        num(w.reference), num(std::fabs(w.candidate - w.reference)), num(w.allowed), w.violates ? " s-red" : "",
        num(w.margin), t->violations, t->numel);
  }
  return s + "</table></section>\n";
}

// ---- per-cell details ----

std::string details_open(const Cell& c, const std::string& brief) {
  return fmt::format("<details class=\"cell {}\" id=\"{}\"{}><summary><code>{}</code> <b>{}</b> {}</summary>\n",
                     vclass(c.verdict), h(anchor(c)), c.verdict == Verdict::kRed ? " open" : "", h(c.id),
                     h(vlabel(c.verdict)), h(brief));
}

std::string cell_context(const Cell& c) {
  std::string s = "<p class=\"muted\">";
  if (c.threshold)
    s += fmt::format("{} row <code>{}</code>: atol {}, rtol {}. ", h(threshold_mode_name(c.threshold->mode)),
                     h(c.threshold->source), c.threshold->atol ? num(*c.threshold->atol) : "-",
                     c.threshold->rtol ? num(*c.threshold->rtol) : "-");
  if (c.fixture) s += fmt::format("fixture <code>{}</code> (hash <code>{}</code>). ", h(c.fixture->id), h(c.fixture->hash));
  s += fmt::format("kernel <code>{}</code>, backend {} (ran {}).", h(c.kernel_id), h(c.backend.expected),
                   h(c.backend.actual));
  s += "</p>\n";
  if (!c.reason.empty()) s += fmt::format("<p>{}</p>\n", h(c.reason));
  return s;
}

std::string accuracy_details(const Cell& c) {
  const AccuracyTensor* worst = report::worst_tensor(c);
  std::string brief = worst && worst->worst ? fmt::format("max |err|/allowed {} ({})", num(worst->worst->margin), worst->name)
                                            : c.reason;
  std::string s = details_open(c, brief) + cell_context(c);
  if (c.accuracy.empty()) return s + "</details>\n";
  const std::optional<double> atol = c.threshold ? c.threshold->atol : std::nullopt;
  s += "<table><tr><th>tensor</th><th>shape</th><th>violations</th><th>max |err|</th><th>mean</th><th>P99</th>"
       "<th>P99.9</th><th>max ulp</th><th>|error| against atol (&bull; mean, | P99, | P99.9, &diams; max; dashed: atol, "
       "orange: allowed at the worst element)</th><th>worst element</th></tr>\n";
  for (const auto& t : c.accuracy)
    s += fmt::format(
        "<tr><td>{}</td><td class=\"mono\">{} {}</td><td class=\"num{}\">{} / {}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td>{}</td><td class=\"mono\">{}</td></tr>\n",
        h(t.name), h(dtype_contract_name(t.dtype)), h(shape_string(t.shape)), passed(t) ? "" : " s-red", t.violations,
        t.numel, num(t.abs_error.max), num(t.abs_error.mean), num(t.abs_error.p99), num(t.abs_error.p999),
        num(t.ulp_distance.max), report::error_chart_svg(t, atol), h(report::worst_element_text(t)));
  return s + "</table></details>\n";
}

std::string bitwise_details(const Cell& c) {
  std::string brief;
  for (const auto& t : c.bitwise)
    brief += fmt::format("{}{} {}", brief.empty() ? "" : ", ", t.name, passed(t) ? "bits equal" : "DIFFER");
  std::string s = details_open(c, brief.empty() ? c.reason : brief) + cell_context(c);
  if (c.bitwise.empty()) return s + "</details>\n";
  s += "<table><tr><th>tensor</th><th>shape</th><th>dtype</th><th>bits</th><th>mismatches</th><th>&plusmn;0</th>"
       "<th>NaNs (transform / canonical)</th><th>first mismatches (transform against canonical)</th><th>notes</th></tr>\n";
  for (const auto& t : c.bitwise) {
    std::string first;
    for (std::size_t i = 0; i < t.first_mismatches.size() && i < 4; ++i) {
      const BitMismatch& m = t.first_mismatches[i];
      first += fmt::format("{}{} {} vs {}", first.empty() ? "" : "<br>", h(shape_string(m.index)),
                           report::bits_hex(m.lhs_bits, t.lhs_dtype), report::bits_hex(m.rhs_bits, t.rhs_dtype));
    }
    std::string notes;
    for (const auto& n : t.notes) notes += (notes.empty() ? "" : "; ") + n;
    s += fmt::format(
        "<tr><td>{}</td><td class=\"mono\">{}{}</td><td>{}</td><td class=\"{}\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{} / {}</td><td class=\"mono\">{}</td><td>{}</td></tr>\n",
        h(t.name), h(shape_string(t.lhs_shape)),
        t.lhs_shape == t.rhs_shape ? "" : " vs " + h(shape_string(t.rhs_shape)), h(dtype_contract_name(t.lhs_dtype)),
        passed(t) ? "s-green" : "s-red", t.equal_bits ? "equal" : "differ", t.mismatches, t.signed_zero_mismatches,
        t.lhs_nans, t.rhs_nans, first, h(notes));
  }
  return s + "</table></details>\n";
}

// A chain_parity cell: the metrics against the contract, and |dlogp|'s distribution (mean, P99,
// P99.9, max over the active tokens) on the error chart's log scale in units of the
// max_abs_dlogp threshold.
std::string parity_details(const Cell& c) {
  std::optional<double> limit;
  AccuracyTensor d;
  d.name = "|dlogp|";
  for (const MetricResult& m : c.metrics) {
    if (m.name == "max_abs_dlogp") {
      d.abs_error.max = m.value;
      limit = m.threshold;
    }
    if (m.name == "mean_abs_dlogp") d.abs_error.mean = m.value;
    if (m.name == "p99_abs_dlogp") d.abs_error.p99 = m.value;
    if (m.name == "p999_abs_dlogp") d.abs_error.p999 = m.value;
    if (m.name == "active_tokens") d.numel = static_cast<std::int64_t>(m.value);
  }
  if (limit && d.abs_error.max > *limit) d.violations = 1;
  std::string s = details_open(c, fmt::format("max |dlogp| {} over {} tokens", num(d.abs_error.max), d.numel)) +
                  cell_context(c) + "<p>" + report::error_chart_svg(d, limit) +
                  " &bull; mean, | P99, | P99.9, &diams; max; dashed: the max_abs_dlogp threshold</p>\n" +
                  "<table><tr><th>metric</th><th>value</th><th>threshold</th><th></th><th>source</th></tr>\n";
  for (const MetricResult& m : c.metrics) {
    const bool ok = !m.threshold || m.value <= *m.threshold;
    s += fmt::format("<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"{}\">{}</td>"
                     "<td class=\"mono\">{}</td></tr>\n",
                     h(m.name), num(m.value), m.threshold ? num(*m.threshold) : "-",
                     m.threshold ? (ok ? "s-green" : "s-red") : "", m.threshold ? (ok ? "pass" : "FAIL") : "reported",
                     h(m.source));
  }
  return s + "</table></details>\n";
}

std::string cells_sections(const Evidence& e) {
  std::string acc, inv, par;
  for (const Cell& c : e.cells) {
    if (is_accuracy(c.judgment))
      acc += accuracy_details(c);
    else if (c.judgment == Judgment::kChainParity)
      par += parity_details(c);
    else
      inv += bitwise_details(c);
  }
  return "<section id=\"accuracy\"><h2>Accuracy: error distributions per tensor</h2>\n"
         "<p class=\"muted\">Per tensor: mean, P99, P99.9 and max |candidate &minus; reference| on a log scale from "
         "1e-4&middot;atol to 100&middot;atol, against the contract's atol (dashed) and the allowance of the worst "
         "element (orange, where rtol adds to it). Red cells are open.</p>\n" +
         (acc.empty() ? "<p>No accuracy cells.</p>\n" : acc) +
         "</section>\n<section id=\"invariance\"><h2>Invariance: raw-bit comparisons</h2>\n" +
         (inv.empty() ? "<p>No invariance cells.</p>\n" : inv) +
         "</section>\n<section id=\"parity\"><h2>Chain parity: teacher forcing against rollout decode</h2>\n"
         "<p class=\"muted\">d = lhs &minus; rhs per active token (the contract's dlogp_definition); the gated "
         "metrics against their thresholds, the rest reported.</p>\n" +
         (par.empty() ? "<p>No parity cells.</p>\n" : par) + "</section>\n";
}

// ---- C8 rows and environment ----

std::string c8_section(const C8Matrix* m) {
  std::string s = "<section id=\"c8\"><h2>Upstream C8 rows (ws1-c8-execute-v2)</h2>\n";
  if (m == nullptr) return s + "<p class=\"muted\">Not produced by this run.</p></section>\n";
  std::string counts;
  for (const auto& [k, n] : c8_counts(*m)) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", h(k), n);
  s += fmt::format("<p id=\"c8-counts\">{} rows: {}</p>\n<table><tr><th>profile</th><th>op</th>", m->cells.size(), counts);
  for (std::string_view tier : c8_tiers())
    for (Judgment j : c8_judgments())
      s += fmt::format("<th>{} {}</th>", h(tier), h(report::judgment_short(j)));
  s += "</tr>\n";
  std::vector<std::pair<std::string, std::string>> rows;
  for (const C8Cell& c : m->cells)
    if (std::find(rows.begin(), rows.end(), std::pair{c.profile, c.op_name}) == rows.end())
      rows.emplace_back(c.profile, c.op_name);
  for (const auto& [profile, op] : rows) {
    s += fmt::format("<tr><th>{}</th><th>{}</th>", h(profile), h(op));
    for (std::string_view tier : c8_tiers())
      for (Judgment j : c8_judgments()) {
        const C8Cell* cell = nullptr;
        for (const C8Cell& c : m->cells)
          if (c.profile == profile && c.op_name == op && c.tier == tier && c.judgment == contract_name(j)) cell = &c;
        if (cell == nullptr) {
          s += "<td></td>";
          continue;
        }
        const std::string cls = cell->status == "green" ? "s-green" : cell->status == "red" ? "s-red" : "s-na";
        s += fmt::format("<td class=\"c8 {}\" title=\"{}\">{}</td>", cls, h(cell->detail), h(cell->status));
      }
    s += "</tr>\n";
  }
  return s + "</table></section>\n";
}

std::string env_section(const Evidence& e) {
  const Environment& v = e.environment;
  std::vector<std::pair<std::string, std::string>> rows = {
      {"tool", fmt::format("{} {} (source {}{})", e.tool.name, e.tool.version, e.tool.source_commit,
                           e.tool.source_dirty ? (*e.tool.source_dirty ? ", dirty" : ", clean") : "")},
      {"checkout", e.checkout ? e.checkout->commit + (e.checkout->dirty ? " (dirty)" : " (clean)") : "none"},
      {"command", [&] {
         std::string c;
         for (const auto& w : e.command) c += (c.empty() ? "" : " ") + w;
         return c;
       }()},
      {"host", fmt::format("{} — {}, {}, {}", v.host.hostname, v.host.os, v.host.kernel, v.host.arch)},
      {"cpu", fmt::format("{} ({} logical cores, {:.1f} GiB)", v.host.cpu_model, v.host.logical_cores,
                          static_cast<double>(v.host.memory_total_bytes) / (1024.0 * 1024 * 1024))},
      {"compiler", v.compiler},
      {"build type", v.build_type},
      {"built with CUDA", v.built_with_cuda ? "yes" : "no"},
      {"backend", v.backend},
      {"autocast", v.autocast},
      {"captured at", v.captured_at},
  };
  if (v.gpu) {
    const GpuEnvironment& g = *v.gpu;
    rows.push_back({"GPU", fmt::format("{} (CC {}, {} SMs, {:.1f} GiB)", g.name, g.compute_capability, g.sm_count,
                                       static_cast<double>(g.memory_bytes) / (1024.0 * 1024 * 1024))});
    rows.push_back({"driver / runtime / cuBLAS", fmt::format("{} / {} / {}", g.driver_version, g.cuda_runtime_version,
                                                             g.cublas_version)});
    rows.push_back({"cuBLAS math mode, TF32", fmt::format("{}, TF32 {}", g.cublas_math_mode, g.tf32_enabled ? "on" : "off")});
  } else {
    rows.push_back({"GPU", "none: " + v.gpu_absent_reason});
  }
  std::string s = "<section id=\"environment\"><h2>Environment</h2>\n<table>\n";
  for (const auto& [k, val] : rows) s += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", h(k), h(val));
  return s + "</table></section>\n";
}

}  // namespace

std::string html_report(const Evidence& e, const HtmlOptions& o) {
  const Summary sum = summarize(e.cells);
  std::string s = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<title>{} — {}</title>\n<style>{}</style></head>\n<body>\n",
      h(o.title), h(vlabel(page_verdict(sum, o))), report::kHtmlStyle);
  s += header(e, o, sum);
  s += stages_section(o);
  s += matrix_section(e);
  s += red_section(e);
  s += worst_section(e, o.worst_rows);
  s += cells_sections(e);
  s += c8_section(o.c8);
  s += env_section(e);
  s += fmt::format("<script>{}</script>\n</body></html>\n", report::kHtmlScript);
  return s;
}

}  // namespace ws1

// JUnit XML for CI: one testsuite per backend profile, one testcase per cell. The counts and
// attributes are those GitLab's and Jenkins' parsers read (Ant's JUnit report layout).
#include <fmt/core.h>

#include <algorithm>
#include <numeric>

#include "report_text.hpp"
#include "ws1/report.hpp"
#include "ws1/tensor.hpp"

namespace ws1 {
namespace {

using report::num;

std::string attr(std::string_view name, std::string_view value) {
  return fmt::format(" {}=\"{}\"", name, xml_escape(value));
}

// Ant's timestamp: ISO 8601 without fraction and zone ("2026-11-30T12:34:56", UTC here).
std::string ant_timestamp(const std::string& iso) { return iso.substr(0, 19); }

// What a red cell's <failure> element holds beside its message: the threshold and every
// tensor's statistics, one per line.
std::string failure_body(const Cell& c) {
  std::string s = fmt::format("cell {}\nreason: {}\n", c.id, c.reason);
  if (c.threshold)
    s += fmt::format("threshold: {} atol {} rtol {} ({})\n", threshold_mode_name(c.threshold->mode),
                     c.threshold->atol ? num(*c.threshold->atol) : "-",
                     c.threshold->rtol ? num(*c.threshold->rtol) : "-", c.threshold->source);
  if (c.fixture) s += fmt::format("fixture: {} (hash {})\n", c.fixture->id, c.fixture->hash);
  for (const auto& t : c.accuracy)
    s += fmt::format("{} {}: {}; |err| max {} mean {} p99 {} p99.9 {}; {}\n", t.name,
                     shape_string(t.shape), passed(t) ? "pass" : "FAIL", num(t.abs_error.max),
                     num(t.abs_error.mean), num(t.abs_error.p99), num(t.abs_error.p999),
                     report::worst_element_text(t));
  for (const auto& t : c.bitwise) {
    s += fmt::format("{} {}: {}; {} elements differ", t.name, shape_string(t.rhs_shape),
                     passed(t) ? "bits equal" : "FAIL", t.mismatches);
    for (const auto& m : t.first_mismatches)
      s += fmt::format("; {} {} vs {}", shape_string(m.index), report::bits_hex(m.lhs_bits, t.lhs_dtype),
                       report::bits_hex(m.rhs_bits, t.rhs_dtype));
    s += "\n";
  }
  for (const auto& m : c.metrics)
    s += fmt::format("{} = {}{}\n", m.name, num(m.value),
                     m.threshold ? fmt::format(" (threshold {})", num(*m.threshold)) : "");
  return s;
}

struct Counts {
  std::int64_t tests = 0, failures = 0, skipped = 0;
  double seconds = 0;
};

std::string suite_open(std::string_view name, const Counts& n, const Evidence& e) {
  return fmt::format("  <testsuite{}{}{}{}{}{}{}{}>\n", attr("name", name),
                     attr("tests", std::to_string(n.tests)), attr("failures", std::to_string(n.failures)),
                     attr("errors", "0"), attr("skipped", std::to_string(n.skipped)),
                     attr("time", fmt::format("{:.3f}", n.seconds)),
                     attr("timestamp", ant_timestamp(e.started)),
                     attr("hostname", e.environment.host.hostname));
}

std::string properties(const Evidence& e, const std::string& profile) {
  std::vector<std::pair<std::string, std::string>> p = {
      {"backend", profile},
      {"contract", fmt::format("{} ({}, sha256 {})", e.contract.path, e.contract.version, e.contract.sha256)},
      {"workload", fmt::format("{} ({}, {})", e.workload.path, e.workload.workload_id, e.workload.manifest_version)},
      {"tool", fmt::format("{} {}", e.tool.name, e.tool.version)},
      {"source_commit", e.checkout ? e.checkout->commit + (e.checkout->dirty ? " (dirty)" : "")
                                   : e.tool.source_commit},
  };
  std::string s = "    <properties>\n";
  for (const auto& [k, v] : p) s += fmt::format("      <property{}{}/>\n", attr("name", k), attr("value", v));
  return s + "    </properties>\n";
}

}  // namespace

std::string junit_xml(const Evidence& e, const JunitOptions& o) {
  std::vector<std::string> profiles;
  for (const Cell& c : e.cells)
    if (std::find(profiles.begin(), profiles.end(), c.backend.expected) == profiles.end())
      profiles.push_back(c.backend.expected);
  const auto secs = [&](const std::string& id) {
    auto it = o.seconds.find(id);
    return it == o.seconds.end() ? 0.0 : it->second;
  };

  Counts all;
  std::string body;
  for (const std::string& profile : profiles) {
    Counts n;
    std::string cases;
    for (const Cell& c : e.cells) {
      if (c.backend.expected != profile) continue;
      ++n.tests;
      n.seconds += secs(c.id);
      cases += fmt::format("    <testcase{}{}{}", attr("classname", c.op), attr("name", c.id),
                           attr("time", fmt::format("{:.3f}", secs(c.id))));
      if (c.verdict == Verdict::kGreen) {
        // A green cell's reason qualifies it (e.g. weights not pinned: not the chain gate).
        cases += c.reason.empty() ? std::string("/>\n")
                                  : fmt::format(">\n      <system-out>{}</system-out>\n    </testcase>\n",
                                                xml_escape(c.reason));
      } else if (c.verdict == Verdict::kNa || c.verdict == Verdict::kVacuous) {  // vacuous: not a pass
        ++n.skipped;
        cases += fmt::format(">\n      <skipped{}/>\n    </testcase>\n", attr("message", c.reason));
      } else {
        ++n.failures;
        cases += fmt::format(">\n      <failure{}{}>{}</failure>\n    </testcase>\n",
                             attr("message", cell_failure_message(c)), attr("type", "red"),
                             xml_escape(failure_body(c)));
      }
    }
    body += suite_open(o.name + "." + profile, n, e) + properties(e, profile) + cases + "  </testsuite>\n";
    all.tests += n.tests;
    all.failures += n.failures;
    all.skipped += n.skipped;
    all.seconds += n.seconds;
  }
  if (!o.stages.empty()) {
    Counts n;
    std::string cases;
    for (const GateStage& st : o.stages) {
      ++n.tests;
      cases += fmt::format("    <testcase{}{}{}", attr("classname", "gate"), attr("name", st.name),
                           attr("time", "0.000"));
      std::string rows;
      for (const StageRow& r : st.rows) rows += fmt::format("{}: {}: {}\n", r.name, r.status, r.detail);
      switch (st.status) {
        case StageStatus::kPassed:
          cases += "/>\n";
          break;
        case StageStatus::kNotBuilt:
          ++n.skipped;
          cases += fmt::format(">\n      <skipped{}/>\n    </testcase>\n",
                               attr("message", fmt::format("{}: not built", st.name)));
          break;
        case StageStatus::kFailed:
          ++n.failures;
          cases += fmt::format(">\n      <failure{}{}>{}</failure>\n    </testcase>\n",
                               attr("message", st.detail), attr("type", "failed"),
                               xml_escape(st.detail + "\n" + rows));
          break;
      }
    }
    body += suite_open(o.name + ".stages", n, e) + cases + "  </testsuite>\n";
    all.tests += n.tests;
    all.failures += n.failures;
    all.skipped += n.skipped;
  }
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites{}{}{}{}{}{}>\n{}</testsuites>\n",
                     attr("name", o.name), attr("tests", std::to_string(all.tests)),
                     attr("failures", std::to_string(all.failures)), attr("errors", "0"),
                     attr("skipped", std::to_string(all.skipped)),
                     attr("time", fmt::format("{:.3f}", all.seconds)), body);
}

}  // namespace ws1

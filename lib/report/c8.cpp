// The evidence's cells as upstream's C8 rows (NOTES §a) and the rows as its JSON.
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>

#include "report_text.hpp"
#include "ws1/op_catalogue.hpp"
#include "ws1/report.hpp"

namespace ws1 {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::array kJudgments = {Judgment::kForwardAccuracy, Judgment::kForwardInvariance,
                                   Judgment::kGradientAccuracy, Judgment::kGradientInvariance};
constexpr std::array<std::string_view, 2> kTiers = {"short", "primary"};

// Upstream's detail for pack, and why it is N/A there.
constexpr std::string_view kPackDetail =
    "profile-independent layout helper; C2 declares PyTorch pack and C3/C4 cover it";

bool is_accuracy(Judgment j) {
  return j == Judgment::kForwardAccuracy || j == Judgment::kGradientAccuracy;
}

std::string direction_word(Judgment j) {
  return direction_of(j) == Direction::kForward ? "forward" : "gradient";
}

struct Tally {
  std::vector<const Cell*> green, red, na, vacuous;
  std::size_t total() const { return green.size() + red.size() + na.size() + vacuous.size(); }
};

Tally tally(std::span<const Cell> cells, const std::string& profile, std::string_view op,
            Judgment j, std::string_view tier) {
  Tally t;
  for (const Cell& c : cells) {
    if (c.backend.expected != profile || c.op != op || c.judgment != j || c.tier != tier) continue;
    (c.verdict == Verdict::kGreen   ? t.green
     : c.verdict == Verdict::kRed   ? t.red
     : c.verdict == Verdict::kVacuous ? t.vacuous
                                      : t.na)
        .push_back(&c);
  }
  return t;
}

// The fixtures' distributions ("normal, heavy_tailed") or the transforms of a tally's cells.
std::string what_ran(const std::vector<const Cell*>& cells, bool invariance) {
  std::vector<std::string> names;
  for (const Cell* c : cells) {
    std::string n;
    if (invariance) {
      n = c->transform;
      if (c->id.ends_with("/parameters")) n += " (parameters)";
    } else if (c->fixture) {
      const auto slash = c->fixture->id.rfind('/');
      n = slash == std::string::npos ? c->fixture->id : c->fixture->id.substr(slash + 1);
    }
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

C8Cell row(std::span<const Cell> cells, const std::string& profile, std::string_view op,
           Judgment j, std::string_view tier) {
  const bool accuracy = is_accuracy(j);
  C8Cell r;
  r.profile = profile;
  r.op_name = std::string(op);
  r.judgment = std::string(contract_name(j));
  r.tier = std::string(tier);
  r.evidence_kind = accuracy ? "representative_accuracy" : "logical_config_invariance";
  r.candidate = profile;
  // Upstream's invariance gates run once per op; both tiers carry that result.
  const Tally t = tally(cells, profile, op, j, accuracy ? tier : std::string_view("invariance"));
  const Cell* first = !t.red.empty() ? t.red.front() : !t.green.empty() ? t.green.front()
                      : !t.vacuous.empty() ? t.vacuous.front() : !t.na.empty() ? t.na.front() : nullptr;
  if (first != nullptr) {
    r.case_id = accuracy ? fmt::format("{}/{}", op, tier)
                         : (first->fixture ? first->fixture->id : fmt::format("{}/invariance", op));
    r.expected_kernel_config_id = first->kernel_id;
    r.actual_backend_id = first->backend.actual;
    r.actual_kernel_config_id = first->kernel_id;
  }
  const std::string dir = direction_word(j);
  if (op == kC8LayoutHelperOp) {
    r.status = "N/A";
    r.detail = fmt::format(
        "{}; as upstream's C8. ws1check judged it here: {} green, {} red, {} N/A cells (evidence)",
        kPackDetail, t.green.size(), t.red.size(), t.na.size());
    return r;
  }
  if (t.total() == 0) {
    r.status = "red";
    r.detail = accuracy ? fmt::format("required untested: no {} fixture cell in the evidence", tier)
                        : fmt::format("required untested: no {} invariance cell in the evidence", dir);
    return r;
  }
  if (!t.red.empty()) {
    r.status = "red";
    r.detail = fmt::format("{} of {} cells red; first {}: {}", t.red.size(), t.total(),
                           t.red.front()->id, cell_failure_message(*t.red.front()));
    return r;
  }
  if (!t.green.empty()) {
    r.status = "green";
    r.detail = accuracy ? fmt::format("representative case {} accuracy passed: {} fixture cells "
                                      "green ({})",
                                      dir, t.green.size(), what_ran(t.green, false))
                        : fmt::format("{} gate passed: bit-identical under {}", dir,
                                      what_ran(t.green, true));
    if (!t.vacuous.empty())
      r.detail += fmt::format("; vacuous: {} cell(s), first {}: {}", t.vacuous.size(), t.vacuous.front()->id,
                              t.vacuous.front()->reason);
    if (!t.na.empty())
      r.detail += fmt::format("; N/A: {} ({})", what_ran(t.na, !accuracy), t.na.front()->reason);
    return r;
  }
  if (!t.vacuous.empty()) {  // passed, but nothing a kernel could fail: not green evidence
    r.status = "red";
    r.detail = fmt::format("{} of {} cells vacuous, none green; first {}: {}", t.vacuous.size(), t.total(),
                           t.vacuous.front()->id, t.vacuous.front()->reason);
    return r;
  }
  r.status = "N/A";
  r.detail = t.na.front()->reason;
  return r;
}

std::optional<std::string> nonempty(const std::string& s) {
  if (s.empty() || s == "unknown") return std::nullopt;
  return s;
}

std::string shell_word(const std::string& w) {
  if (!w.empty() && w.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

ojson opt(const std::optional<std::string>& s) { return s ? ojson(*s) : ojson(nullptr); }

}  // namespace

std::span<const Judgment> c8_judgments() { return kJudgments; }
std::span<const std::string_view> c8_tiers() { return kTiers; }

std::vector<std::pair<std::string, std::int64_t>> c8_counts(const C8Matrix& m) {
  std::vector<std::pair<std::string, std::int64_t>> counts;
  for (const C8Cell& c : m.cells) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& p) { return p.first == c.status; });
    if (it == counts.end())
      counts.emplace_back(c.status, 1);
    else
      ++it->second;
  }
  return counts;
}

C8Matrix c8_matrix(const Evidence& e, std::span<const std::string> profiles,
                   std::span<const std::string> ops) {
  C8Matrix m;
  if (e.checkout) {
    m.git_commit = e.checkout->commit;
    m.git_dirty = e.checkout->dirty;
  } else {
    m.git_commit = nonempty(e.tool.source_commit);
    m.git_dirty = e.tool.source_dirty;
  }
  std::string platform = e.environment.host.kernel.substr(0, e.environment.host.kernel.find(' '));
  std::transform(platform.begin(), platform.end(), platform.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  const auto& gpu = e.environment.gpu;
  m.environment = {
      {"python", std::nullopt},
      {"platform", nonempty(platform)},
      {"pytorch", std::nullopt},
      {"cuda_runtime", gpu ? nonempty(gpu->cuda_runtime_version) : std::nullopt},
      {"gpu_name", gpu ? nonempty(gpu->name) : std::nullopt},
      {"compute_capability", gpu ? nonempty(gpu->compute_capability) : std::nullopt},
      {"driver", gpu ? nonempty(gpu->driver_version) : std::nullopt},
      {"triton", std::nullopt},
  };
  m.workload_id = e.workload.workload_id;
  m.manifest_version = e.workload.manifest_version;
  m.fixture_identity_sha256 = e.workload.identity_sha256;
  std::vector<std::string> words;
  for (const auto& w : e.command) words.push_back(shell_word(w));
  m.command = fmt::format("{}", fmt::join(words, " "));
  m.threshold_source = e.contract.path;
  m.fallback_policy =
      "forbidden (a cell whose actual backend differs from the expected one is red); required "
      "untested is red; pack is N/A as upstream's C8 and judged in the evidence";
  for (const std::string& profile : profiles)
    for (const OpInfo& info : op_catalogue()) {
      if (!info.c8_required || std::find(ops.begin(), ops.end(), info.name) == ops.end()) continue;
      for (std::string_view tier : kTiers)
        for (Judgment j : kJudgments) m.cells.push_back(row(e.cells, profile, info.name, j, tier));
    }
  return m;
}

std::string c8_json(const C8Matrix& m) {
  ojson j;
  j["schema_version"] = kC8SchemaVersion;
  j["git"] = {{"commit", opt(m.git_commit)},
              {"branch", opt(m.git_branch)},
              {"dirty", m.git_dirty ? ojson(*m.git_dirty) : ojson(nullptr)}};
  ojson env = ojson::object();
  for (const auto& [k, v] : m.environment) env[k] = opt(v);
  j["environment"] = env;
  j["workload"] = {{"workload_id", m.workload_id},
                   {"manifest_version", m.manifest_version},
                   {"fixture_identity_sha256", m.fixture_identity_sha256}};
  j["command"] = m.command;
  j["threshold_source"] = m.threshold_source;
  j["fallback_policy"] = m.fallback_policy;
  ojson counts = ojson::object();
  for (const auto& [status, n] : c8_counts(m)) counts[status] = n;
  j["counts"] = counts;
  ojson cells = ojson::array();
  for (const C8Cell& c : m.cells)
    cells.push_back({{"profile", c.profile},
                     {"op_name", c.op_name},
                     {"judgment", c.judgment},
                     {"tier", c.tier},
                     {"case_id", opt(c.case_id)},
                     {"status", c.status},
                     {"detail", c.detail},
                     {"candidate", opt(c.candidate)},
                     {"expected_kernel_config_id", opt(c.expected_kernel_config_id)},
                     {"actual_backend_id", opt(c.actual_backend_id)},
                     {"actual_kernel_config_id", opt(c.actual_kernel_config_id)},
                     {"evidence_kind", c.evidence_kind}});
  j["cells"] = std::move(cells);
  // Replace, not throw, on text that is not UTF-8 (a reason quoting a user's file name).
  return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

}  // namespace ws1

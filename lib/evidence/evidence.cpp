// The evidence model: names, summary, and the self-consistency check run before writing.
#include <cmath>
#include <filesystem>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "ws1/build_info.hpp"
#include "ws1/evidence.hpp"

namespace ws1 {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kGreen: return "green";
    case Verdict::kRed: return "red";
    case Verdict::kNa: return "na";
    case Verdict::kVacuous: return "vacuous";
  }
  return "?";
}

std::string_view judgment_name(Judgment j) {
  switch (j) {
    case Judgment::kForwardAccuracy: return "forward_accuracy";
    case Judgment::kGradientAccuracy: return "gradient_accuracy";
    case Judgment::kForwardInvariance: return "forward_invariance";
    case Judgment::kGradientInvariance: return "gradient_invariance";
    case Judgment::kChainParity: return "chain_parity";
  }
  return "?";
}

std::string_view direction_name(Direction d) { return d == Direction::kForward ? "fwd" : "bwd"; }

std::string_view threshold_mode_name(ThresholdMode m) {
  switch (m) {
    case ThresholdMode::kTolerance: return "tolerance";
    case ThresholdMode::kBitwise: return "bitwise";
    case ThresholdMode::kMetric: return "metric";
  }
  return "?";
}

Direction direction_of(Judgment j) {
  return j == Judgment::kGradientAccuracy || j == Judgment::kGradientInvariance
             ? Direction::kBackward
             : Direction::kForward;
}

Summary summarize(std::span<const Cell> cells) {
  Summary s;
  for (const Cell& c : cells) {
    switch (c.verdict) {
      case Verdict::kGreen: ++s.green; break;
      case Verdict::kRed: ++s.red; break;
      case Verdict::kNa: ++s.na; break;
      case Verdict::kVacuous: ++s.vacuous; break;
    }
  }
  s.total = static_cast<std::int64_t>(cells.size());
  return s;
}

Verdict overall_verdict(const Summary& s) {
  if (s.red > 0) return Verdict::kRed;
  if (s.green > 0) return Verdict::kGreen;
  if (s.vacuous > 0) return Verdict::kVacuous;
  return Verdict::kNa;
}

ToolInfo tool_info() {
  const BuildInfo& b = build_info();
  ToolInfo t;
  t.version = b.version;
  t.source_commit = b.source_commit;
  if (b.source_state == "clean") t.source_dirty = false;
  if (b.source_state == "dirty") t.source_dirty = true;
  return t;
}

Evidence begin_evidence(std::vector<std::string> command) {
  Evidence e;
  e.tool = tool_info();
  std::error_code ec;
  const auto cwd = std::filesystem::current_path(ec);
  if (!ec) e.checkout = read_checkout(cwd);
  e.command = std::move(command);
  e.environment = read_environment();
  e.started = e.environment.captured_at;
  return e;
}

bool passed(const AccuracyTensor& t) {
  return t.comparable && t.violations == 0 && (!t.relative || t.relative->passed) && (!t.bias || t.bias->passed);
}

bool passed(const BitwiseTensor& t) {
  const bool nan_fails = t.nan_policy == NanPolicy::kFail && (t.lhs_nans > 0 || t.rhs_nans > 0);
  return t.equal_bits && !nan_fails;
}

namespace {

// Collects the first problem; later checks are skipped once one is found.
class Checker {
 public:
  explicit Checker(const std::string& file) : file_(file) {}
  void require(bool ok, const std::string& where, const std::string& problem) {
    if (!ok && !error_) error_ = bad_input(file_, where, problem);
  }
  Status status() const { return error_ ? Status(*error_) : Status(); }

 private:
  const std::string& file_;
  std::optional<Error> error_;
};

void check_accuracy(Checker& ck, const AccuracyTensor& t, const std::string& at, bool green) {
  ck.require(!t.name.empty(), at + ".name", "empty tensor name");
  std::int64_t n = 1;
  bool dims_ok = true;
  for (std::int64_t d : t.shape)
    dims_ok = dims_ok && d >= 0 && !__builtin_mul_overflow(n, d, &n);
  ck.require(dims_ok, at + ".shape", "negative dimension or too many elements");
  ck.require(dims_ok && n == t.numel, at + ".numel",
             fmt::format("numel {} does not match the shape", t.numel));
  ck.require(t.violations >= 0 && t.violations <= t.numel, at + ".violations",
             fmt::format("{} violations in {} elements", t.violations, t.numel));
  ck.require(t.numel == 0 || !t.comparable || t.worst.has_value(), at + ".worst",
             "missing for a non-empty tensor");
  ck.require(t.nan_elements >= 0 && t.nan_elements <= t.violations, at + ".nan_elements",
             "not within the violation count");
  ck.require(!t.floor_violations || (*t.floor_violations >= 0 && *t.floor_violations <= t.numel),
             at + ".floor_violations", "not within the element count");
  ck.require(!t.floor_violations || !passed(t), at + ".floor_violations", "judged on a passing tensor");
  ck.require(t.comparable || (!t.reference_max_abs && !t.zeros_pass && !t.bias_ulp), at + ".zeros_pass",
             "null candidates judged on a tensor that was not compared");
  ck.require(!t.reference_max_abs || !(*t.reference_max_abs < 0), at + ".reference_max_abs", "negative");
  ck.require(!green || t.violations == 0, at + ".violations",
             fmt::format("{} violations in a green cell", t.violations));
  ck.require(!green || t.comparable, at + ".comparable", "false in a green cell");
  ck.require(t.engine == "host" || t.engine == "cuda", at + ".statistics_engine",
             fmt::format("'{}' is not host or cuda", t.engine));
  if (t.worst) {
    const WorstElement& w = *t.worst;
    ck.require(w.index.size() == t.shape.size(), at + ".worst.index",
               "rank differs from the tensor's");
    // The worst element is a violation exactly when the tensor has one (violations outrank
    // passes), and its ratio sits on the same side of 1 as that decision.
    ck.require(w.violates == (t.violations > 0), at + ".worst.violates",
               fmt::format("{} with {} violation(s) in the tensor", w.violates, t.violations));
    ck.require(w.violates ? w.margin >= 1 : (w.margin >= 0 && w.margin <= 1), at + ".worst.margin",
               fmt::format("{} contradicts violates = {} (a pass uses at most its allowance, a "
                           "violation at least all of it)",
                           w.margin, w.violates));
  }
}

void check_bitwise(Checker& ck, const BitwiseTensor& t, const std::string& at, bool green) {
  ck.require(!t.name.empty(), at + ".name", "empty tensor name");
  ck.require(t.mismatches >= 0, at + ".mismatches", "negative count");
  ck.require(static_cast<std::int64_t>(t.first_mismatches.size()) <= t.mismatches,
             at + ".first_mismatches", "more listed than counted");
  ck.require(t.signed_zero_mismatches >= 0 && t.signed_zero_mismatches <= t.mismatches,
             at + ".signed_zero_mismatches", "not within the mismatch count");
  const bool same_layout = t.lhs_shape == t.rhs_shape && t.lhs_dtype == t.rhs_dtype;
  ck.require(!t.equal_bits || (same_layout && t.mismatches == 0), at + ".equal_bits",
             "true with differing shapes, dtypes or bits");
  ck.require(t.equal_bits || !same_layout || t.mismatches > 0, at + ".equal_bits",
             "false without a difference");
  ck.require(!green || t.equal_bits, at + ".equal_bits", "false in a green cell");
  ck.require(t.lhs_nans >= 0 && t.rhs_nans >= 0, at + ".lhs_nans", "negative count");
  ck.require(static_cast<std::int64_t>(t.first_nans.size()) <= t.lhs_nans + t.rhs_nans,
             at + ".first_nans", "more listed than counted");
  ck.require(!green || passed(t), at + ".nan_policy",
             fmt::format("NaN under nan_policy {} in a green cell", contract_name(t.nan_policy)));
}

void check_cell(Checker& ck, const Cell& c, const std::string& at) {
  // A vacuous cell passed like a green one; only a null candidate's passing sets it apart.
  const bool green = c.verdict == Verdict::kGreen || c.verdict == Verdict::kVacuous;
  bool zeros_pass = false;
  for (const AccuracyTensor& t : c.accuracy) zeros_pass = zeros_pass || t.zeros_pass.value_or(false);
  if (c.verdict == Verdict::kGreen)
    ck.require(!zeros_pass, at + ".verdict",
               fmt::format("green cell '{}' has a tensor an all-zero candidate passes (vacuous)", c.id));
  if (c.verdict == Verdict::kVacuous)
    ck.require(zeros_pass, at + ".verdict",
               fmt::format("vacuous cell '{}' has no tensor an all-zero candidate passes", c.id));
  ck.require(!c.id.empty(), at + ".id", "empty cell id");
  ck.require(!c.op.empty(), at + ".op", "empty op");
  if (c.verdict != Verdict::kGreen)
    ck.require(!c.reason.empty(), at + ".reason",
               fmt::format("verdict {} requires a reason (cell '{}')", verdict_name(c.verdict),
                           c.id));
  if (c.verdict != Verdict::kNa) {
    ck.require(c.fixture.has_value(), at + ".fixture",
               fmt::format("verdict {} requires a fixture (cell '{}')", verdict_name(c.verdict), c.id));
    ck.require(c.threshold.has_value(), at + ".threshold",
               fmt::format("verdict {} requires a threshold (cell '{}')", verdict_name(c.verdict), c.id));
  }
  if (c.threshold) {
    const CellThreshold& th = *c.threshold;
    ck.require(!th.source.empty(), at + ".threshold.source", "empty contract row path");
    if (th.mode != ThresholdMode::kMetric)
      ck.require(th.atol && th.rtol, at + ".threshold",
                 fmt::format("mode {} requires atol and rtol", threshold_mode_name(th.mode)));
  }
  if (green) {
    ck.require(!c.accuracy.empty() || !c.bitwise.empty() || !c.metrics.empty(), at + ".tensors",
               fmt::format("green cell '{}' carries no measurement", c.id));
    ck.require(c.backend.actual == c.backend.expected, at + ".backend.actual",
               fmt::format("green cell '{}' ran on '{}', not the expected '{}'", c.id,
                           c.backend.actual, c.backend.expected));
  }
  for (std::size_t i = 0; i < c.accuracy.size(); ++i)
    check_accuracy(ck, c.accuracy[i], fmt::format("{}.tensors[{}]", at, i), green);
  for (std::size_t i = 0; i < c.bitwise.size(); ++i)
    check_bitwise(ck, c.bitwise[i], fmt::format("{}.tensors[{}]", at, c.accuracy.size() + i), green);
  for (std::size_t i = 0; i < c.metrics.size(); ++i) {
    const MetricResult& m = c.metrics[i];
    const std::string mat = fmt::format("{}.metrics[{}]", at, i);
    ck.require(!m.name.empty(), mat + ".name", "empty metric name");
    ck.require(!green || !m.threshold || m.value <= *m.threshold, mat + ".value",
               fmt::format("metric {} above its threshold in a green cell", m.name));
  }
}

}  // namespace

Status validate(const Evidence& e, const std::string& file) {
  Checker ck(file);
  ck.require(e.schema_version == kEvidenceSchemaVersion, "schema_version",
             fmt::format("'{}' is not {}", e.schema_version, kEvidenceSchemaVersion));
  ck.require(!e.tool.version.empty(), "tool.version", "empty");
  ck.require(!e.contract.version.empty(), "contract.version", "empty");
  ck.require(!e.contract.sha256.empty(), "contract.sha256", "empty");
  ck.require(!e.workload.workload_id.empty(), "workload.workload_id", "empty");
  ck.require(!e.started.empty(), "started", "empty");
  ck.require(!e.finished.empty(), "finished", "empty");
  ck.require(e.environment.gpu.has_value() || !e.environment.gpu_absent_reason.empty(),
             "environment.gpu_absent_reason", "no GPU recorded and no reason why");
  std::set<std::string> ids;
  for (std::size_t i = 0; i < e.cells.size(); ++i) {
    const std::string at = fmt::format("cells[{}]", i);
    check_cell(ck, e.cells[i], at);
    ck.require(ids.insert(e.cells[i].id).second, at + ".id",
               fmt::format("duplicate cell id '{}'", e.cells[i].id));
  }
  return ck.status();
}

}  // namespace ws1

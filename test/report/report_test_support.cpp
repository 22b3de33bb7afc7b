#include "report_test_support.hpp"

#include <fmt/core.h>

#include "ws1/op_catalogue.hpp"

namespace ws1::test {
namespace {

Cell base(const std::string& profile, const std::string& op, Judgment j, const std::string& tier) {
  Cell c;
  c.op = op;
  c.op_class = "reduction";
  c.judgment = j;
  c.tier = tier;
  c.backend = {profile, profile};
  c.kernel_id = fmt::format("{}/{}/{}", profile, op, direction_name(direction_of(j)));
  return c;
}

}  // namespace

Cell accuracy_cell(const std::string& profile, const std::string& op, Judgment j,
                   const std::string& tier, const std::string& dist, double margin) {
  Cell c = base(profile, op, j, tier);
  const std::string fixture = fmt::format("{}/{}/{}", op, tier, dist);
  c.id = fmt::format("{}/{}/{}/{}/{}", profile, contract_name(j), op, tier, fixture);
  c.transform = "none";
  c.fixture = FixtureRef{fixture, std::string(32, 'a'), 20260812, {{"x", DType::kBF16, {8, 64}}}};
  c.dtypes = {DType::kBF16, DType::kF32};
  c.threshold = CellThreshold{ThresholdMode::kTolerance, 0.01, 0.0, "judgments.forward_accuracy.x"};
  AccuracyTensor t;
  t.name = direction_of(j) == Direction::kForward ? "y" : "dx";
  t.shape = {8, 64};
  t.numel = 512;
  t.abs_error = {0.01 * margin, 0.0001, 0.001, 0.002};
  t.rel_error = {0.01, 0.001, 0.002, 0.003};
  t.ulp_distance = {2, 0.1, 1, 1};
  t.worst = WorstElement{{3, 17}, 1.0 + 0.01 * margin, 1.0, 0.01, margin, margin > 1};
  t.violations = margin > 1 ? 1 : 0;
  c.accuracy.push_back(t);
  c.verdict = margin > 1 ? Verdict::kRed : Verdict::kGreen;
  if (margin > 1) c.reason = "1 of 512 elements outside atol + rtol*|ref|";
  return c;
}

Cell invariance_cell(const std::string& profile, const std::string& op, Judgment j,
                     const std::string& transform, Verdict v) {
  Cell c = base(profile, op, j, "invariance");
  c.id = fmt::format("{}/{}/{}/invariance/{}", profile, contract_name(j), op, transform);
  c.transform = transform;
  c.verdict = v;
  if (v == Verdict::kNa) {
    c.reason = "no K to split";
    return c;
  }
  c.fixture = FixtureRef{op + "/invariance/pattern", std::string(32, 'b'), 20260812, {{"x", DType::kBF16, {27, 64}}}};
  c.dtypes = {DType::kBF16, DType::kBF16};
  c.threshold = CellThreshold{ThresholdMode::kBitwise, 0.0, 0.0, "judgments.forward_invariance.x"};
  BitwiseTensor b;
  b.name = "y";
  b.lhs_shape = b.rhs_shape = {27, 64};
  b.equal_bits = v == Verdict::kGreen;
  if (v == Verdict::kRed) {
    b.mismatches = 1;
    b.first_mismatches = {BitMismatch{{5, 9}, 0x3f81, 0x3f80, 1.0078125, 1.0}};
    c.reason = "1 of 1728 elements differ in their bits";
  }
  c.bitwise.push_back(b);
  return c;
}

std::vector<std::string> catalogue_op_names() {
  std::vector<std::string> names;
  for (const auto& info : op_catalogue()) names.emplace_back(info.name);
  return names;
}

Evidence full_green_evidence(const std::vector<std::string>& profiles) {
  Evidence e;
  e.tool = tool_info();
  e.command = {"ws1check", "gate", "--backends", "cpu_bf16"};
  e.started = "2026-11-30T12:00:00.000Z";
  e.finished = "2026-11-30T12:00:05.000Z";
  e.contract = {"contracts/ws1-c1-v2.json", "ws1-c1-v2", std::string(64, 'c')};
  e.workload = {"fixtures/ws1-smoke.json", "ws1-smoke-v1", "ws1-c2-v8", std::string(64, 'd')};
  e.environment = read_environment();
  for (const auto& p : profiles)
    for (const auto& op : catalogue_op_names()) {
      for (Judgment j : {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy})
        for (const char* tier : {"short", "primary"})
          for (const char* dist : {"normal", "heavy_tailed"}) e.cells.push_back(accuracy_cell(p, op, j, tier, dist));
      for (Judgment j : {Judgment::kForwardInvariance, Judgment::kGradientInvariance}) {
        e.cells.push_back(invariance_cell(p, op, j, "BN/chunked", Verdict::kGreen));
        e.cells.push_back(invariance_cell(p, op, j, "B1/full", Verdict::kGreen));
        e.cells.push_back(invariance_cell(p, op, j, "tp2", Verdict::kNa));
      }
    }
  return e;
}

}  // namespace ws1::test

// Verdicts from the judges' records, the contract row as the evidence records it, and the
// judges' records inside an evidence artifact (validated and written).
#include <nlohmann/json.hpp>

#include "judge_test_support.hpp"

using judge_test::bf16;
using judge_test::contract;
using judge_test::f32;
using ws1::ContractDType;
using ws1::Judgment;
using ws1::OpClass;

TEST_CASE("verdict: no tensor is red, not green and not N/A", "[judge]") {
  CHECK(ws1::accuracy_verdict({}) == ws1::Verdict::kRed);
  CHECK(ws1::bitwise_verdict({}) == ws1::Verdict::kRed);
  CHECK(ws1::accuracy_reason({}) == "no tensor was compared");
  CHECK(ws1::bitwise_reason({}) == "no tensor was compared");
}

TEST_CASE("verdict: one failing tensor among passing ones makes the cell red", "[judge]") {
  const ws1::Tolerance tol = judge_test::tolerance(Judgment::kGradientAccuracy, OpClass::kAttention,
                                                   ContractDType::kBFloat16);
  const auto ok = ws1::judge_accuracy("dq", bf16({2}, {1.0f, 2.0f}), f32({2}, {1.0f, 2.0f}), tol);
  const auto also_ok = ws1::judge_accuracy("dk", bf16({1}, {0.5f}), f32({1}, {0.5f}), tol);
  const auto bad = ws1::judge_accuracy("dv", bf16({1}, {4.0f}), f32({1}, {1.0f}), tol);
  const std::vector<ws1::AccuracyTensor> green{ok, also_ok}, red{ok, bad, also_ok};
  CHECK(ws1::accuracy_verdict(green) == ws1::Verdict::kGreen);
  CHECK(ws1::accuracy_verdict(red) == ws1::Verdict::kRed);
  const std::string reason = ws1::accuracy_reason(red);
  CHECK(reason.rfind("dv: 1 of 1 elements", 0) == 0);
  CHECK(reason.find("dq") == std::string::npos);
}

TEST_CASE("verdict: cell thresholds carry the contract row and its path", "[judge]") {
  const ws1::Contract& c = contract();
  const auto acc =
      c.threshold(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kBFloat16);
  REQUIRE(acc.ok());
  const auto ct = ws1::cell_threshold(*acc, c.file);
  REQUIRE(ct.ok());
  CHECK(ct->mode == ws1::ThresholdMode::kTolerance);
  CHECK(ct->atol == acc->tolerance->atol);
  CHECK(ct->rtol == acc->tolerance->rtol);
  CHECK(ct->source == "judgments.forward_accuracy.by_op_class.reduction.bfloat16");

  const auto inv =
      c.threshold(Judgment::kGradientInvariance, OpClass::kAttention, ContractDType::kBFloat16);
  REQUIRE(inv.ok());
  const auto it = ws1::cell_threshold(*inv, c.file);
  REQUIRE(it.ok());
  CHECK(it->mode == ws1::ThresholdMode::kBitwise);
  CHECK(it->atol == inv->tolerance->atol);
  CHECK(it->source == "judgments.gradient_invariance.by_op_class.attention.bfloat16");

  const auto fp8 =
      c.threshold(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kFloat8);
  REQUIRE(fp8.ok());
  REQUIRE_FALSE(fp8->tolerance.has_value());
  const auto none = ws1::cell_threshold(*fp8, c.file);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().file == c.file);
  CHECK(none.error().where == "judgments.forward_accuracy.by_op_class.reduction.float8");
  CHECK(none.error().problem.find("out_of_scope") != std::string::npos);
}

namespace {

ws1::Evidence minimal_evidence() {
  ws1::Evidence e;
  e.tool = ws1::tool_info();
  e.started = e.finished = "2026-11-30T12:00:00.000Z";
  e.contract = {contract().file, contract().version, contract().sha256};
  e.workload = {"fixtures/w.json", "ws1-qwen3-8b-dense-primary-v6", "ws1-c2-v8",
                std::string(64, 'd')};
  e.environment.gpu_absent_reason = "none in this test";
  return e;
}

ws1::Cell judged_cell(std::string id, Judgment j, ws1::CellThreshold th) {
  ws1::Cell c;
  c.id = std::move(id);
  c.op = "rms_norm";
  c.op_class = "reduction";
  c.judgment = j;
  c.tier = "short";
  c.transform = "none";
  c.backend = {"cpu_bf16", "cpu_bf16"};
  c.fixture = ws1::FixtureRef{"f", std::string(32, '0'), 1, {}};
  c.threshold = std::move(th);
  return c;
}

}  // namespace

TEST_CASE("verdict: judge records go into a valid artifact", "[judge]") {
  const ws1::Contract& k = contract();
  const auto acc_row =
      k.threshold(Judgment::kForwardAccuracy, OpClass::kReduction, ContractDType::kBFloat16);
  const auto inv_row =
      k.threshold(Judgment::kForwardInvariance, OpClass::kReduction, ContractDType::kBFloat16);
  REQUIRE(acc_row.ok());
  REQUIRE(inv_row.ok());

  ws1::Evidence e = minimal_evidence();
  ws1::Cell acc =
      judged_cell("acc", Judgment::kForwardAccuracy, *ws1::cell_threshold(*acc_row, k.file));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  acc.accuracy.push_back(ws1::judge_accuracy("y", bf16({3}, {1.0f, nan, 2.0f}),
                                             f32({3}, {1.0f, 1.0f, 2.0f}), *acc_row->tolerance));
  acc.accuracy.push_back(ws1::judge_accuracy("z", bf16({2}, {1.0f, 1.0f}),
                                             f32({1, 2}, {1.0f, 1.0f}), *acc_row->tolerance));
  acc.verdict = ws1::accuracy_verdict(acc.accuracy);
  acc.reason = ws1::accuracy_reason(acc.accuracy);
  CHECK(acc.verdict == ws1::Verdict::kRed);

  ws1::Cell inv =
      judged_cell("inv", Judgment::kForwardInvariance, *ws1::cell_threshold(*inv_row, k.file));
  const auto same = bf16({2}, {nan, 1.0f});
  inv.bitwise.push_back(ws1::judge_bitwise("y", same, same.contiguous(), ws1::NanPolicy::kFail));
  inv.verdict = ws1::bitwise_verdict(inv.bitwise);
  inv.reason = ws1::bitwise_reason(inv.bitwise);
  CHECK(inv.verdict == ws1::Verdict::kRed);
  e.cells = {acc, inv};

  const auto text = ws1::evidence_json(e, "out.json");
  INFO((text.ok() ? std::string() : text.error().message()));
  REQUIRE(text.ok());
  const auto j = nlohmann::ordered_json::parse(*text);
  const auto& y = j["cells"][0]["tensors"][0];
  CHECK(y["nan_elements"] == 1);
  CHECK(y["passed"] == false);
  CHECK(y["comparable"] == true);
  CHECK(y["worst"]["candidate"] == "nan");
  CHECK(y["worst"]["margin"] == "inf");
  CHECK(y["worst"]["violates"] == true);
  CHECK(j["cells"][0]["tensors"][1]["comparable"] == false);
  const auto& b = j["cells"][1]["tensors"][0];
  CHECK(b["equal_bits"] == true);
  CHECK(b["passed"] == false);
  CHECK(b["nan_policy"] == "fail");
  CHECK(b["first_nans"][0]["lhs_bits"] == "0x7fc0");

  // The artifact refuses to call such cells green.
  ws1::Evidence g = e;
  g.cells[1].verdict = ws1::Verdict::kGreen;
  const ws1::Status st = ws1::validate(g, "out.json");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().where == "cells[1].tensors[0].nan_policy");
  g = e;
  g.cells[0].accuracy.erase(g.cells[0].accuracy.begin());
  g.cells[0].verdict = ws1::Verdict::kGreen;
  const ws1::Status st2 = ws1::validate(g, "out.json");
  REQUIRE_FALSE(st2.ok());
  CHECK(st2.error().where == "cells[0].tensors[0].comparable");
}

// The model refuses artifacts that are incomplete or contradict themselves; each refusal
// names the artifact and the field.
#include <functional>

#include "evidence_test_support.hpp"

namespace {

// Applies `edit` to a valid sample and expects validation to fail naming `where`.
void expect_rejected(const std::function<void(ws1::Evidence&)>& edit, const std::string& where,
                     const std::string& problem_part) {
  ws1::Evidence e = ws1::test::sample_evidence();
  REQUIRE(ws1::validate(e, "out/gate.json").ok());
  edit(e);
  const ws1::Status st = ws1::validate(e, "out/gate.json");
  REQUIRE_FALSE(st.ok());
  INFO(st.error().message());
  CHECK(st.error().file == "out/gate.json");
  CHECK(st.error().where == where);
  CHECK(st.error().problem.find(problem_part) != std::string::npos);
  CHECK(st.error().message().rfind("out/gate.json: " + where + ": ", 0) == 0);
  // Nothing is serialized either.
  CHECK_FALSE(ws1::evidence_json(e).ok());
}

}  // namespace

TEST_CASE("evidence: the sample artifact is valid", "[evidence]") {
  const ws1::Status st = ws1::validate(ws1::test::sample_evidence(), "x.json");
  INFO((st.ok() ? std::string() : st.error().message()));
  CHECK(st.ok());
}

TEST_CASE("evidence: N/A and red cells without a reason are rejected", "[evidence]") {
  expect_rejected([](ws1::Evidence& e) { e.cells[2].reason.clear(); }, "cells[2].reason",
                  "verdict na requires a reason");
  expect_rejected([](ws1::Evidence& e) { e.cells[1].reason.clear(); }, "cells[1].reason",
                  "verdict red requires a reason");
}

TEST_CASE("evidence: judged cells need a fixture and a threshold", "[evidence]") {
  expect_rejected([](ws1::Evidence& e) { e.cells[0].fixture.reset(); }, "cells[0].fixture",
                  "requires a fixture");
  expect_rejected([](ws1::Evidence& e) { e.cells[1].threshold.reset(); }, "cells[1].threshold",
                  "requires a threshold");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].threshold->rtol.reset(); },
                  "cells[0].threshold", "requires atol and rtol");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].threshold->source.clear(); },
                  "cells[0].threshold.source", "empty");
}

TEST_CASE("evidence: a green cell an all-zero candidate passes is vacuous, and only that is", "[evidence][vacuity]") {
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy[0].zeros_pass = true; }, "cells[0].verdict",
                  "an all-zero candidate passes (vacuous)");
  expect_rejected(
      [](ws1::Evidence& e) {
        e.cells[0].verdict = ws1::Verdict::kVacuous;
        e.cells[0].reason = "vacuous: ...";
      },
      "cells[0].verdict", "no tensor an all-zero candidate passes");
  expect_rejected(
      [](ws1::Evidence& e) {
        e.cells[0].verdict = ws1::Verdict::kVacuous;
        e.cells[0].accuracy[0].zeros_pass = true;
      },
      "cells[0].reason", "verdict vacuous requires a reason");
  // A vacuous cell passed: it cannot hold a violation either.
  expect_rejected(
      [](ws1::Evidence& e) {
        e.cells[0].verdict = ws1::Verdict::kVacuous;
        e.cells[0].reason = "vacuous: y";
        e.cells[0].accuracy[0].zeros_pass = true;
        e.cells[0].accuracy[0].violations = 2;
      },
      "cells[0].tensors[0].violations", "violations in a green cell");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy[0].reference_max_abs = -1.0; },
                  "cells[0].tensors[0].reference_max_abs", "negative");
  // The faithful twin: the same edits together are a valid vacuous cell, counted apart.
  ws1::Evidence e = ws1::test::sample_evidence();
  e.cells[0].verdict = ws1::Verdict::kVacuous;
  e.cells[0].reason = "vacuous: y";
  e.cells[0].accuracy[0].zeros_pass = true;
  CHECK(ws1::validate(e, "x.json").ok());
  const ws1::Summary s = ws1::summarize(e.cells);
  CHECK(s.vacuous == 1);
  CHECK(s.green + s.red + s.na + s.vacuous == s.total);
  // Overall: red > green > vacuous > N/A.
  CHECK(ws1::overall_verdict({0, 0, 3, 1, 4}) == ws1::Verdict::kVacuous);
  CHECK(ws1::overall_verdict({1, 0, 3, 1, 5}) == ws1::Verdict::kGreen);
  CHECK(ws1::overall_verdict({1, 1, 3, 1, 6}) == ws1::Verdict::kRed);
}

TEST_CASE("evidence: a green cell cannot contradict its numbers", "[evidence]") {
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy.clear(); }, "cells[0].tensors",
                  "carries no measurement");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy[0].violations = 3; },
                  "cells[0].tensors[0].violations", "violations in a green cell");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy[0].engine = "tpu"; },
                  "cells[0].tensors[0].statistics_engine", "'tpu' is not host or cuda");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].backend.actual = "cpu_bf16"; },
                  "cells[0].backend.actual", "not the expected 'cuda_bf16'");
  expect_rejected([](ws1::Evidence& e) { e.cells[3].metrics[0].value = 0.5; },
                  "cells[3].metrics[0].value", "above its threshold");
  expect_rejected(
      [](ws1::Evidence& e) {
        e.cells[3].metrics[0].value = std::numeric_limits<double>::quiet_NaN();
      },
      "cells[3].metrics[0].value", "above its threshold");
  expect_rejected(
      [](ws1::Evidence& e) {
        e.cells[1].verdict = ws1::Verdict::kGreen;  // bitwise mismatches in a green cell
      },
      "cells[1].tensors[0].equal_bits", "false in a green cell");
}

TEST_CASE("evidence: inconsistent tensor records are rejected", "[evidence]") {
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy[0].numel = 5; },
                  "cells[0].tensors[0].numel", "does not match the shape");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy[0].worst.reset(); },
                  "cells[0].tensors[0].worst", "missing");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy[0].worst->index = {1}; },
                  "cells[0].tensors[0].worst.index", "rank");
  // The worst element must not contradict the exact decision: a violation there iff the tensor
  // has one, and a ratio on that side of 1.
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy[0].worst->violates = true; },
                  "cells[0].tensors[0].worst.violates", "true with 0 violation(s)");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy[0].worst->margin = 1.5; },
                  "cells[0].tensors[0].worst.margin", "contradicts violates = false");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].accuracy[0].worst->margin = -0.25; },
                  "cells[0].tensors[0].worst.margin", "contradicts");
  expect_rejected(
      [](ws1::Evidence& e) {
        auto& t = e.cells[0].accuracy[0];
        e.cells[0].verdict = ws1::Verdict::kRed;
        e.cells[0].reason = "y: 1 violation";
        t.violations = 1;
        t.worst->violates = true;  // a violation whose ratio reads below 1
      },
      "cells[0].tensors[0].worst.margin", "contradicts violates = true");
  expect_rejected([](ws1::Evidence& e) { e.cells[1].bitwise[1].equal_bits = true; },
                  "cells[1].tensors[1].equal_bits", "true with differing");
  expect_rejected([](ws1::Evidence& e) { e.cells[1].bitwise[0].mismatches = 1; },
                  "cells[1].tensors[0].first_mismatches", "more listed than counted");
  expect_rejected(
      [](ws1::Evidence& e) {
        auto& t = e.cells[1].bitwise[0];
        t.mismatches = 0;
        t.first_mismatches.clear();
        t.signed_zero_mismatches = 0;
      },
      "cells[1].tensors[0].equal_bits", "false without a difference");
}

TEST_CASE("evidence: artifact-level fields are checked", "[evidence]") {
  expect_rejected([](ws1::Evidence& e) { e.cells[3].id = e.cells[0].id; }, "cells[3].id",
                  "duplicate cell id");
  expect_rejected([](ws1::Evidence& e) { e.cells[0].id.clear(); }, "cells[0].id", "empty");
  expect_rejected([](ws1::Evidence& e) { e.schema_version = "v0"; }, "schema_version",
                  "ws1check-evidence-v6");
  // Older versions are valid in the schema (old files), but this build writes only v6: its
  // documents always carry the v2-v6 fields, so an older label would understate them.
  expect_rejected([](ws1::Evidence& e) { e.schema_version = "ws1check-evidence-v1"; },
                  "schema_version", "is not ws1check-evidence-v6");
  expect_rejected([](ws1::Evidence& e) { e.schema_version = "ws1check-evidence-v2"; },
                  "schema_version", "is not ws1check-evidence-v6");
  expect_rejected([](ws1::Evidence& e) { e.schema_version = "ws1check-evidence-v3"; },
                  "schema_version", "is not ws1check-evidence-v6");
  expect_rejected([](ws1::Evidence& e) { e.schema_version = "ws1check-evidence-v4"; },
                  "schema_version", "is not ws1check-evidence-v6");
  expect_rejected([](ws1::Evidence& e) { e.schema_version = "ws1check-evidence-v5"; },
                  "schema_version", "is not ws1check-evidence-v6");
  expect_rejected([](ws1::Evidence& e) { e.contract.sha256.clear(); }, "contract.sha256", "empty");
  expect_rejected([](ws1::Evidence& e) { e.workload.workload_id.clear(); },
                  "workload.workload_id", "empty");
  expect_rejected([](ws1::Evidence& e) { e.finished.clear(); }, "finished", "empty");
  expect_rejected(
      [](ws1::Evidence& e) {
        e.environment.gpu.reset();
        e.environment.gpu_absent_reason.clear();
      },
      "environment.gpu_absent_reason", "no reason");
}

TEST_CASE("evidence: names and directions", "[evidence]") {
  using ws1::Judgment;
  CHECK(ws1::direction_of(Judgment::kForwardAccuracy) == ws1::Direction::kForward);
  CHECK(ws1::direction_of(Judgment::kForwardInvariance) == ws1::Direction::kForward);
  CHECK(ws1::direction_of(Judgment::kChainParity) == ws1::Direction::kForward);
  CHECK(ws1::direction_of(Judgment::kGradientAccuracy) == ws1::Direction::kBackward);
  CHECK(ws1::direction_of(Judgment::kGradientInvariance) == ws1::Direction::kBackward);
  CHECK(ws1::judgment_name(Judgment::kGradientInvariance) == "gradient_invariance");
  CHECK(ws1::verdict_name(ws1::Verdict::kNa) == "na");
  CHECK(ws1::threshold_mode_name(ws1::ThresholdMode::kBitwise) == "bitwise");
}

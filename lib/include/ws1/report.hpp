// Reports of a run, read from its evidence model (DESIGN §1 report/, §7): the matrix in
// upstream's C8 shape (`ws1-c8-execute-v2`, NOTES §a) so a run compares row by row with the H20
// file, JUnit XML for CI (GitLab, Jenkins), and a self-contained HTML page for people.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/error.hpp"
#include "ws1/evidence.hpp"

namespace ws1 {

// ---- stages of the gate beside the cell matrix (parity, audit) ----

enum class StageStatus { kPassed, kFailed, kNotBuilt };
std::string_view stage_status_name(StageStatus s);  // "passed", "failed", "not built"

struct StageRow {
  std::string name, status, detail;  // e.g. an audit row: "det_gemm", "exception declared", basis
};

struct GateStage {
  std::string name;  // "parity", "audit"
  StageStatus status = StageStatus::kNotBuilt;
  std::string detail;  // one line
  std::vector<StageRow> rows;
};

// ---- upstream's C8 matrix ----

inline constexpr std::string_view kC8SchemaVersion = "ws1-c8-execute-v2";
// Upstream's C8 judgments and tiers, in its row order (per op: short then primary, each with
// the four judgments).
std::span<const Judgment> c8_judgments();
std::span<const std::string_view> c8_tiers();  // "short", "primary"
// The op upstream's C8 leaves N/A in every profile (a profile-independent layout helper).
inline constexpr std::string_view kC8LayoutHelperOp = "pack";

// One row, fields as upstream names them; absent optionals are written as null.
struct C8Cell {
  std::string profile, op_name, judgment, tier;
  std::optional<std::string> case_id;
  std::string status;  // "green", "red", "N/A" (upstream also knows "pending_hopper")
  std::string detail;
  std::optional<std::string> candidate, expected_kernel_config_id, actual_backend_id,
      actual_kernel_config_id;
  std::string evidence_kind;  // "representative_accuracy" | "logical_config_invariance"
};

struct C8Matrix {
  std::optional<std::string> git_commit, git_branch;
  std::optional<bool> git_dirty;
  // Upstream's environment keys (python, platform, pytorch, cuda_runtime, gpu_name,
  // compute_capability, driver, triton) in that order; null where this runtime has none.
  std::vector<std::pair<std::string, std::optional<std::string>>> environment;
  std::string workload_id, manifest_version, fixture_identity_sha256;
  std::string command, threshold_source, fallback_policy;
  std::vector<C8Cell> cells;
};

// Counts per status, in the order statuses first appear.
std::vector<std::pair<std::string, std::int64_t>> c8_counts(const C8Matrix& m);

// The C8 rows of `evidence` for each profile (backend) and op asked for; ops that upstream's
// C8 does not require (linear_logp) are left out. An accuracy row (op, judgment, tier) is red
// if any of the tier's fixture cells is red, or if it has none (required untested); else green
// if one is green; else N/A. An invariance row summarises the op's invariance cells of that
// judgment over every transform (their N/A cells do not count against it) and is the same for
// both tiers, as upstream's (which runs one gate per op). Pack rows are N/A as upstream's; the
// detail says what the evidence cells found.
C8Matrix c8_matrix(const Evidence& evidence, std::span<const std::string> profiles,
                   std::span<const std::string> ops);

// The matrix as upstream's JSON (top-level keys and cell fields in its order, indent 2).
std::string c8_json(const C8Matrix& m);

// Reads a C8 file (ours or upstream's): schema_version must be kC8SchemaVersion, every cell
// must carry profile, op_name, judgment, tier and status, and (profile, op, judgment, tier)
// must be unique. Errors name the file and the JSON path.
Result<C8Matrix> read_c8(const std::filesystem::path& file);

// A row whose status differs between two matrices, or that only one of them has.
struct C8Difference {
  std::string ours_profile, theirs_profile;
  std::string op_name, judgment, tier;
  std::optional<std::string> ours, theirs;  // status; absent: the matrix has no such row
};

// Row by row on (op, judgment, tier): each profile of `ours` against the same profile of
// `theirs`, or, when `theirs` has no such profile, against each of its profiles (a cpu_bf16
// run against the H20 file's cuda_bf16 and triton_cuda_bf16). In `ours`' row order.
std::vector<C8Difference> compare_c8(const C8Matrix& ours, const C8Matrix& theirs);

// ---- JUnit XML ----

struct JunitOptions {
  std::string name = "ws1check";
  std::map<std::string, double> seconds;  // per cell id; cells absent here get time="0"
  std::vector<GateStage> stages;          // one testcase each, in a testsuite of their own
};

// One testsuite per backend profile (cells grouped by backend.expected, in order of first
// appearance), one testcase per cell: classname = op, name = cell id. A red cell carries a
// <failure> whose message names the worst element (or the first bit mismatch) and the reason;
// an N/A cell a <skipped message="reason"/>. Stages become testcases of a testsuite
// "<name> stages" (not built: skipped; failed: failure). Counts (tests, failures, errors,
// skipped) on <testsuites> and each <testsuite>, as GitLab and Jenkins read them. Text is
// escaped and made valid XML 1.0 (invalid UTF-8 and control characters replaced).
std::string junit_xml(const Evidence& evidence, const JunitOptions& options);

// ---- HTML ----

struct HtmlOptions {
  std::string title = "ws1check gate";
  std::vector<GateStage> stages;
  const C8Matrix* c8 = nullptr;  // when given, its rows and counts are shown too
  std::size_t worst_rows = 30;   // rows of the worst-elements table
};

// One self-contained page (inline CSS, SVG and script; nothing fetched): verdict and counts,
// the stages, the matrix as a heat map (rows backend × op; columns judgment × tier for
// accuracy and judgment × transform for invariance; one square per cell: green, red or grey
// for N/A), per-tensor error charts (mean, P99, P99.9 and max |error| on a log scale against
// atol and the worst element's allowance), the worst elements, the bitwise mismatches, the C8
// rows and the environment. Works without script; the script adds filtering and writes the
// counts it finds in the rendered matrix to #rendered-counts.
std::string html_report(const Evidence& evidence, const HtmlOptions& options);

// ---- shared by the writers ----

// `text` with invalid UTF-8 sequences and characters XML 1.0 forbids (controls other than tab,
// newline and carriage return) replaced by U+FFFD, then &, <, >, " and ' escaped.
std::string xml_escape(std::string_view text);

// The message of a red cell: the worst element of its worst tensor (|err|/allowed, index,
// candidate, reference, allowed), or the first bit mismatch, then the reason. For any other
// cell, its reason.
std::string cell_failure_message(const Cell& cell);

}  // namespace ws1

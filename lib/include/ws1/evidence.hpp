// The evidence artifact (spec §10, DESIGN §7): one JSON file per run that says what ran, on
// what, against which contract and fixtures, and what every cell measured. Plain structs that
// the runner and judges fill; summary and verdict are computed from the cells, never stored.
// The JSON layout is described by contracts/evidence.schema.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/contract.hpp"  // Judgment
#include "ws1/dtype.hpp"
#include "ws1/environment.hpp"
#include "ws1/error.hpp"

namespace ws1 {

// The format this build writes. contracts/evidence.schema.json accepts every version so that an
// old artifact validates against the version it claims: v1 the original, v2 adds
// cells[].reference, v3 adds statistics_engine on accuracy tensors (docs/decisions.md D23), v4
// cells[].timing, v5 floor_violations on accuracy tensors, v6 the verdict "vacuous", the
// summary's vacuous count and, on accuracy tensors, reference_max_abs, zeros_pass and bias_ulp
// (docs/decisions.md D29).
// validate() accepts only this one: it checks what this build writes, not old files.
inline constexpr std::string_view kEvidenceSchemaVersion = "ws1check-evidence-v6";

using Dims = std::vector<std::int64_t>;  // a shape or a multi-index (same type as ws1::Shape)

// kVacuous: every tensor passed, but a null candidate (all zeros) passes the row as well, so the
// cell cannot tell a kernel from no kernel: not green evidence (D29).
enum class Verdict { kGreen, kRed, kNa, kVacuous };
enum class Direction { kForward, kBackward };
// How the contract row judges: tolerance (atol/rtol), bitwise (raw bits), or per-metric
// thresholds (chain parity).
enum class ThresholdMode { kTolerance, kBitwise, kMetric };

std::string_view verdict_name(Verdict v);           // "green", "red", "na", "vacuous"
std::string_view judgment_name(Judgment j);         // "forward_accuracy", ..., "chain_parity"
std::string_view direction_name(Direction d);       // "fwd", "bwd"
std::string_view threshold_mode_name(ThresholdMode m);  // "tolerance", "bitwise", "metric"
// Gradient judgments run backward; the others forward.
Direction direction_of(Judgment j);

struct ToolInfo {
  std::string name = "ws1check";
  std::string version;
  std::string source_commit;          // the commit the binary was built from, or "unknown"
  std::optional<bool> source_dirty;   // absent: unknown
};

struct ContractRef {
  std::string path;
  std::string version;  // "ws1-c1-v2"
  std::string sha256;   // of the file's bytes
};

struct WorkloadRef {
  std::string path;
  std::string workload_id;       // "ws1-qwen3-8b-dense-primary-v6"
  std::string manifest_version;  // "ws1-c2-v8"
  std::string identity_sha256;   // the manifest's fixture_identity_sha256
};

struct BackendIds {
  std::string expected;  // the profile asked for, e.g. "cuda_bf16"
  std::string actual;    // the backend that really ran (a fallback shows here)
};

struct FixtureTensor {
  std::string name;
  DType dtype = DType::kBF16;
  Dims shape;
};

struct FixtureRef {
  std::string id;
  std::string hash;  // XXH3-128 hex
  std::uint64_t seed = 0;
  std::vector<FixtureTensor> tensors;
};

struct CellDTypes {
  DType candidate = DType::kBF16;
  DType reference = DType::kF32;
};

// Runtime precision state read back on the cell's path (not assumed from configuration).
struct RuntimeReadback {
  std::optional<bool> tf32_enabled;             // absent: no TF32-capable unit on this path
  std::optional<std::string> cublas_math_mode;  // absent: no cuBLAS on this path
  std::string autocast = std::string(kAutocastNotApplicable);
};

struct CellThreshold {
  ThresholdMode mode = ThresholdMode::kTolerance;
  std::optional<double> atol;  // required for tolerance and bitwise rows
  std::optional<double> rtol;
  std::string source;          // contract row path, e.g. "judgments.forward_accuracy.by_op_class.reduction.bfloat16"
};

struct ErrorStats {
  double max = 0, mean = 0, p99 = 0, p999 = 0;
};

// The element that uses the largest share of its allowance (ws1/judge.hpp): allowed = atol +
// rtol * |reference|, margin = |candidate - reference| / allowed (> 1: a violation; +inf for a
// NaN, a failing infinity, or an error where allowed is 0). violates is the exact decision for
// this element and settles a margin of exactly 1; it is true iff the tensor has a violation.
struct WorstElement {
  Dims index;
  double candidate = 0, reference = 0, allowed = 0, margin = 0;
  bool violates = false;
};

// Candidate against reference, one output or gradient tensor.
// A contract rule (ws1-c1-v3 judgment_rules) that set the tolerance a tensor was judged by,
// instead of its cell's row: the rule's json path and the atol / rtol it gave for this tensor.
struct AppliedRule {
  std::string source;
  double atol = 0, rtol = 0;
};

// The relative criterion of ws1-c1-v3 (judgment_rules.relative_to_naive) on one tensor: the
// naive BF16 engine's largest error against the same reference, the bound it gives
// (factor * naive_max_abs + floor), and whether the candidate's largest error is within it.
struct RelativeCheck {
  double naive_max_abs = 0, factor = 0, floor = 0, bound = 0;
  bool passed = false;
};

// The signs of a tensor's errors, over its finite pairs (ws1-c1-v3's bias rule): q is the
// reference rounded to the candidate's dtype (nearest even), the value a correctly rounded
// candidate holds. above / below: c > q / c < q; away / toward: |c| > |q| / |c| < |q| (farther
// from zero, nearer to it); positive / negative: q > 0 / q < 0 (what an all-zero candidate's
// counts would be).
struct SignCounts {
  std::int64_t finite = 0, above = 0, below = 0, away = 0, toward = 0, positive = 0, negative = 0;
  friend bool operator==(const SignCounts&, const SignCounts&) = default;
  SignCounts& operator+=(const SignCounts& o) {
    finite += o.finite;
    above += o.above;
    below += o.below;
    away += o.away;
    toward += o.toward;
    positive += o.positive;
    negative += o.negative;
    return *this;
  }
};

// ws1-c1-v3's bias rule (judgment_rules.bias) on one tensor. With each pair's signed error
// clamped to one step, s = sign(c - q) (drift) and s = sign(|c| - |q|) (growth: negative where
// the candidate shrinks values, as round-toward-zero does), the mean over the finite pairs is
// within max_mean, or the sum within z standard deviations of a fair coin over the pairs where
// s != 0:  |sum s| <= max(max_mean * finite, z * sqrt(count(s != 0))).
struct BiasCheck {
  SignCounts counts;
  double drift = 0, growth = 0;  // (above - below) / finite, (away - toward) / finite
  double max_mean = 0, z = 0;
  double drift_bound = 0, growth_bound = 0;  // the right-hand side above, divided by finite
  bool passed = false;
};

struct AccuracyTensor {
  std::string name;
  Dims shape;
  DType dtype = DType::kBF16;  // the candidate's
  std::int64_t numel = 0;
  std::int64_t violations = 0;  // elements outside atol + rtol * |reference|
  ErrorStats abs_error, rel_error, ulp_distance;  // ulp in units of the candidate dtype
  std::optional<WorstElement> worst;  // absent for an empty tensor or one not compared
  // false: the pair could not be compared element by element (shapes differ, a dtype the
  // judgment does not accept); notes say why, and the tensor fails whatever its counts.
  bool comparable = true;
  std::int64_t nan_elements = 0;   // elements with a NaN on either side; each is a violation
  std::vector<std::string> notes;  // e.g. why not comparable, how NaNs were treated
  // Where the statistics were computed: "host", or "cuda" (the device judge, same definitions
  // and bits; ws1/accuracy_parts.hpp).
  std::string engine = "host";
  // For a failing bf16/f16 tensor: the elements at which the reference itself, rounded to the
  // candidate's dtype, is outside the row (the row asks more than that dtype holds there: below
  // its floor). Absent where not judged (a passing tensor, an FP32 candidate, not comparable).
  std::optional<std::int64_t> floor_violations;
  // The null candidates (D29), for a comparable tensor (absent otherwise):
  //  - reference_max_abs: the largest |reference| (NaNs left out; +inf where one is infinite);
  //  - zeros_pass: an all-zero candidate would pass this row (no reference NaN, and 0 is within
  //    the row of every element: atol + rtol * |r| >= |r|, decided at reference_max_abs, where
  //    the test is tightest); true makes a passing cell vacuous;
  //  - bias_ulp: the mean signed ulp distance (the candidate dtype's steps from the reference
  //    rounded to it, with the sign of candidate - reference) over the finite pairs, each
  //    clamped to +-2^31; NaN where no pair is finite. A consistent one-ulp shift reads +-1.
  std::optional<double> reference_max_abs;
  std::optional<bool> zeros_pass;
  std::optional<double> bias_ulp;
  // Set when a v3 rule replaced the cell's row for this tensor (absent under ws1-c1-v2).
  std::optional<AppliedRule> rule;
  // Set where ws1-c1-v3's relative criterion judged the tensor (absent under ws1-c1-v2); a
  // failed check fails the tensor.
  std::optional<RelativeCheck> relative;
  // The signs of the errors, counted by every judge (not written on their own: an artifact
  // carries them in `bias`, where the bias rule judged the tensor).
  SignCounts signs;
  // Set where ws1-c1-v3's bias rule judged the tensor (absent under ws1-c1-v2); a failed check
  // fails the tensor.
  std::optional<BiasCheck> bias;
};

struct BitMismatch {
  Dims index;
  std::uint64_t lhs_bits = 0, rhs_bits = 0;  // raw patterns, written as hex of the dtype's width
  double lhs = 0, rhs = 0;
};

// Raw-bit comparison of two tensors (DESIGN §3.3): shapes, dtypes and bit patterns equal.
struct BitwiseTensor {
  std::string name;
  Dims lhs_shape, rhs_shape;
  DType lhs_dtype = DType::kBF16, rhs_dtype = DType::kBF16;
  bool equal_bits = false;
  std::int64_t mismatches = 0;              // elements whose bit patterns differ
  std::vector<BitMismatch> first_mismatches;  // the first few, in index order
  std::int64_t lhs_nans = 0, rhs_nans = 0;
  std::int64_t signed_zero_mismatches = 0;  // +0 against -0 (they differ under raw bits)
  std::vector<std::string> notes;           // e.g. the NaN policy that applied
  // The contract's invariance NaN policy that applied: under kFail any NaN on either side
  // fails the tensor even where both sides hold the same bits (equal_bits stays a statement
  // about the bits alone).
  NanPolicy nan_policy = NanPolicy::kFail;
  std::vector<BitMismatch> first_nans;  // the first elements holding a NaN on either side
};

// Whether a tensor passes its judgment: comparable and no violation; equal bits, and no NaN
// when the NaN policy is kFail.
bool passed(const AccuracyTensor& t);
bool passed(const BitwiseTensor& t);

// A chain-parity metric (max_abs_dlogp, approx_kl0, ...). Passes when value <= threshold;
// a metric without threshold is reported only.
struct MetricResult {
  std::string name;
  double value = 0;
  std::optional<double> threshold;
  std::string source;  // contract path of the threshold, empty when reported only
};

// Where an accuracy cell's FP32 reference came from (ws1/reference.hpp).
struct ReferenceProvenance {
  std::string engine;                    // "cpu_fp32 (lib/ref)", "cuda_fp32 (...)"
  std::optional<std::string> math_mode;  // the cuBLAS math mode read back where cuBLAS ran
};

// One judgment cell: (op, judgment, direction, transform, backend) on a tier.
// Wall time of one stage of a cell's run, so that the next bottleneck is read off the artifact.
// No verdict depends on it. A stage named "shared:..." served several cells (an invariance run
// that several transforms compare against), and each of them lists it.
struct StageTime {
  std::string stage;  // fixture, reference, candidate, judge, ... (contracts/evidence.schema.json)
  double seconds = 0;
};

struct Cell {
  std::string id;
  std::string op;
  std::string op_class;   // elementwise, reduction, attention, logprob
  Judgment judgment = Judgment::kForwardAccuracy;
  std::string tier;       // "short", "primary"
  std::string transform;  // "none" for accuracy; "BN/chunked", "tp2", ... for invariance
  BackendIds backend;
  std::string kernel_id;
  std::optional<FixtureRef> fixture;  // required unless N/A
  CellDTypes dtypes;
  RuntimeReadback readback;
  std::optional<ReferenceProvenance> reference;  // accuracy cells: who computed the gold
  std::optional<CellThreshold> threshold;  // required unless N/A
  Verdict verdict = Verdict::kNa;
  std::string reason;  // required for red and N/A
  std::vector<AccuracyTensor> accuracy;
  std::vector<BitwiseTensor> bitwise;
  std::vector<MetricResult> metrics;
  std::vector<StageTime> timing;  // in run order; empty where not measured
};

struct Summary {
  std::int64_t green = 0, red = 0, na = 0, vacuous = 0, total = 0;
};

struct Evidence {
  std::string schema_version = std::string(kEvidenceSchemaVersion);
  ToolInfo tool;
  std::optional<Checkout> checkout;  // of the working directory; absent outside a checkout
  std::vector<std::string> command;  // argv
  std::string started, finished;     // UTC ISO 8601
  ContractRef contract;
  WorkloadRef workload;
  Environment environment;
  std::vector<Cell> cells;
};

Summary summarize(std::span<const Cell> cells);
// Red if any cell is red; else green if any is green; else vacuous if any is vacuous; else (no
// cells, or all N/A) N/A. A gate that must not pass on vacuous cells asks Summary::vacuous.
Verdict overall_verdict(const Summary& s);

// This binary's identity from build_info().
ToolInfo tool_info();
// An artifact with schema version, tool, checkout of the current directory, environment
// (read_environment()), command and start time filled in.
Evidence begin_evidence(std::vector<std::string> command);

// Checks the artifact is complete and does not contradict itself: red and N/A cells carry a
// reason; green and red cells a fixture and a threshold; a green cell has evidence (tensors or
// metrics), no violation, no bit mismatch, no failed metric and no backend fallback; bitwise
// and accuracy counts are consistent; cell ids are unique. `file` names the artifact in errors;
// `where` is the JSON path, e.g. "cells[2].reason".
Status validate(const Evidence& e, const std::string& file);

// The artifact as JSON text (key order fixed; doubles round-trip exactly; NaN/+Inf/-Inf as
// the strings "nan"/"inf"/"-inf"). Validates first.
Result<std::string> evidence_json(const Evidence& e, const std::string& file = "evidence");

// The run context alone (schema version, tool, checkout, command, contract, workload,
// environment) in the artifact's JSON layout, without cells or verdict: `ws1check env --json`.
std::string evidence_context_json(const Evidence& e);

// Writes `content` to `path` atomically: a temporary file in the same directory, fsync,
// rename over `path`, fsync of the directory. On failure nothing is left behind and the
// error names the path.
Status write_file_atomic(const std::filesystem::path& path, std::string_view content);

// Creates the output directory `dir` (and its parents) unless it exists; an error names it
// (exit 3 for a full disk or an I/O error, exit 2 otherwise, as write_file_atomic).
Status make_out_dir(const std::filesystem::path& dir);

// Validates, then writes `<out_dir>/<name>.json` atomically, creating out_dir if needed.
// Returns the path written.
Result<std::filesystem::path> write_evidence(const Evidence& e,
                                             const std::filesystem::path& out_dir,
                                             std::string_view name);

}  // namespace ws1

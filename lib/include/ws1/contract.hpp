// The WS1 tolerance contract (spec §2, §4, §5, §8): the precision policy, the comparison roles,
// the four judgment tables (op class x dtype -> status, mode, atol, rtol), the chain-level
// logprob metrics, and ws1check's declarations of the spec's open items (DESIGN §3).
//
// The loader reads upstream's format unchanged (versions ws1-c1-v2 and ws1-c1-v3) and fails
// closed: any malformed, unknown or contradictory field is one `file: json.path: problem` error.
// The rules on unknown keys, what is required and which cross-checks run are in
// lib/contract/README.md. Items of the declarations block that a file does not carry are
// recorded as undeclared (std::nullopt), never filled with a default.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ws1/dtype.hpp"
#include "ws1/error.hpp"

namespace ws1 {

// ---- Vocabulary (each with its contract spelling) -------------------------------------------

// The four table judgments of spec §1/§4, plus chain-level parity (§8), which has no
// tolerance table (its thresholds are chain_logprob_aggregates) and is never a key of
// Contract::judgments; all_judgments() lists the four table judgments.
enum class Judgment {
  kForwardAccuracy,
  kForwardInvariance,
  kGradientAccuracy,
  kGradientInvariance,
  kChainParity
};
// spec §2.3 classes, plus upstream's mhc_controller (bitwise everywhere in ws1-c1-v2).
enum class OpClass { kElementwise, kReduction, kAttention, kLogprob, kMhcController };
// The dtype keys of the contract's tables ("float8" has no ws1::DType).
enum class ContractDType { kFloat32, kBFloat16, kFloat16, kFloat8 };
enum class RowStatus { kApplicable, kOptional, kOutOfScope };
enum class CompareMode { kTolerance, kBitwise };
enum class ChainMetric { kMaxAbsDlogp, kApproxKl0, kClipfrac0, kMeanAbsDlogp };
enum class RmsNormOrder { kKernel, kHf };  // spec §9.6
// Invariance NaN handling: kFail = any NaN on either side is red; kCompareBits = NaNs compare
// by their bit patterns like every other value.
enum class NanPolicy { kFail, kCompareBits };
// cuBLAS math mode the FP32 paths run under (DESIGN §3.6).
enum class CublasMathMode { kPedantic, kDefaultTf32Off };

std::span<const Judgment> all_judgments();
std::span<const OpClass> all_op_classes();
std::span<const ContractDType> all_contract_dtypes();
std::span<const ChainMetric> all_chain_metrics();

std::string_view contract_name(Judgment j);        // "forward_accuracy", ...
std::string_view contract_name(OpClass c);         // "elementwise", ...
std::string_view contract_name(ContractDType t);   // "bfloat16", ...
std::string_view contract_name(RowStatus s);       // "applicable", "optional", "out_of_scope"
std::string_view contract_name(CompareMode m);     // "tolerance", "bitwise"
std::string_view contract_name(ChainMetric m);     // "max_abs_dlogp", ...
std::string_view contract_name(RmsNormOrder o);    // "kernel", "hf"
std::string_view contract_name(NanPolicy p);       // "fail", "compare_bits"
std::string_view contract_name(CublasMathMode m);  // "pedantic", "default_tf32_off"

std::optional<Judgment> judgment_from_name(std::string_view name);
std::optional<OpClass> op_class_from_name(std::string_view name);
std::optional<ContractDType> contract_dtype_from_name(std::string_view name);
std::optional<RowStatus> row_status_from_name(std::string_view name);
std::optional<CompareMode> compare_mode_from_name(std::string_view name);
std::optional<ChainMetric> chain_metric_from_name(std::string_view name);
std::optional<RmsNormOrder> rms_norm_order_from_name(std::string_view name);
std::optional<NanPolicy> nan_policy_from_name(std::string_view name);
std::optional<CublasMathMode> cublas_math_mode_from_name(std::string_view name);

bool is_invariance(Judgment j);
std::optional<ContractDType> contract_dtype(DType t);  // BF16, F16, F32; others: nullopt
std::optional<DType> to_dtype(ContractDType t);        // float8: nullopt

// The op -> class partition of spec §2.3, as the op catalogue (ws1/op_catalogue.hpp, the one list
// of the ops) gives it, in catalogue order. For callers that need the spec's table;
// Contract::op_class() answers only from the contract's own declarations.
struct OpClassEntry {
  std::string_view op;
  OpClass op_class;
};
std::span<const OpClassEntry> spec_op_classes();
std::optional<OpClass> spec_op_class(std::string_view op);

// The top-level keys the loader requires (contracts/contract.schema.json lists the same).
std::span<const std::string_view> contract_required_top_level_keys();
// The versions the loader accepts: "ws1-c1-v2", "ws1-c1-v3".
std::span<const std::string_view> contract_known_versions();
// The v3 block of judgment rules, and the format string it must carry.
inline constexpr std::string_view kJudgmentRulesKey = "judgment_rules";
inline constexpr std::string_view kJudgmentRulesFormat = "ws1-judgment-rules-v1";
// The key of ws1check's own block, and the format string it must carry.
inline constexpr std::string_view kDeclarationsKey = "ws1check_declarations";
inline constexpr std::string_view kDeclarationsFormat = "ws1check-declarations-v1";

// ---- Model --------------------------------------------------------------------------------------

struct Tolerance {
  CompareMode mode;
  double atol;
  double rtol;
};

// One table row. `tolerance` is absent only for an out_of_scope row that declares none.
struct ToleranceRow {
  RowStatus status;
  std::optional<Tolerance> tolerance;
};
using DTypeRows = std::map<ContractDType, ToleranceRow>;
using ClassRows = std::map<OpClass, DTypeRows>;

struct JudgmentTable {
  CompareMode default_mode;
  std::optional<std::string> calibration_status;
  std::optional<std::string> calibration_note;
  std::optional<std::string> scope;
  ClassRows by_op_class;
  std::map<std::string, ClassRows> arch_overrides;  // "sm90" -> rows replacing by_op_class rows
};

// What a lookup found, and where: `source` is the json path of the row used (for the evidence).
struct Threshold {
  RowStatus status;
  std::optional<Tolerance> tolerance;
  std::string source;
};

struct BackendProfile {
  std::string name;
  std::string backend_family;
};

struct PrecisionPolicy {
  ContractDType execution_dtype;
  ContractDType accumulation_dtype;
  ContractDType reference_dtype;
  std::string output_dtype_default_spelling;  // "execution" or a dtype name, as written
  ContractDType output_dtype_default;         // resolved ("execution" -> execution_dtype)
  ContractDType logprob_aggregates_dtype;
  std::optional<RowStatus> fp8_status;
  std::optional<RowStatus> fp16_status;
  std::string tf32_reference;            // "disabled" | "enabled"
  std::string tf32_candidate_execution;  // "disabled" | "enabled"
  std::optional<std::string> tf32_policy;
  std::vector<BackendProfile> backend_profiles;  // in backend_profiles order
  bool backend_private_tolerance_relaxation = false;
};

struct RolePair {
  std::string lhs;
  std::string rhs;
};

struct ComparisonRoles {
  std::vector<std::string> allowed;
  std::vector<std::string> forbidden;
  std::map<std::string, RolePair> by_report_kind;  // the 4 judgments + train_infer_logprob_parity
};

struct MetricRule {
  std::string formula;
  std::string pass_rule;  // "value <= threshold"
  std::optional<std::string> threshold_rationale;
  std::map<ContractDType, double> threshold_by_execution_dtype;
};

struct ChainAggregates {
  ContractDType compute_dtype;
  bool require_all;
  std::string nan_inf_policy;          // "hard_fail"
  std::string empty_active_token_set;  // "hard_fail"
  std::string dlogp_definition;        // "comparison_lhs_logp - comparison_rhs_logp"
  std::optional<std::string> active_token_policy;
  std::optional<std::string> clip_interval_field;
  std::pair<double, double> default_clip_interval;
  std::vector<ChainMetric> gated_metrics;  // sole_chain_level_logprob_metrics, in file order
  std::map<ChainMetric, MetricRule> metrics;
};

// The pre-judgment `accuracy` / `batch_invariance` blocks. The loader requires them to agree
// with judgments.forward_accuracy and the bitwise invariance tables (spec §9.2: one description).
struct LegacyTolerance {
  double atol;
  double rtol;
};
using LegacyRows = std::map<OpClass, std::map<ContractDType, LegacyTolerance>>;
struct LegacyBlocks {
  std::optional<LegacyRows> accuracy_default;
  std::map<std::string, LegacyRows> accuracy_arch_overrides;
  std::optional<LegacyTolerance> batch_invariance;
};

// ---- ws1check_declarations (DESIGN §3) ------------------------------------------------------

// A per-op exception to `accumulation_dtype` (spec §2.1, §9.2 Option B): FP32 leaves of
// k_tree_leaf elements, a mid-split tree, merges rounded to merge_dtype.
struct AccumulationException {
  ContractDType leaf_accumulation_dtype;
  std::int64_t k_tree_leaf;
  std::string split;  // "mid = lo + (hi-lo)/2" (the only split understood)
  ContractDType merge_dtype;
  ContractDType output_dtype;
  std::string rationale;
};

// det_gemm's declared K split (DESIGN §3.1 Option A, the K split of a TP-t row-parallel GEMM):
// K is cut into `shards` contiguous shards [r*K/t, (r+1)*K/t); each shard is summed in FP32 from
// zero, the FP32 partials are added in shard order (a left fold) and rounded once. A kernel
// computing TP=1 this way equals t ranks that each contribute their shard's FP32 partial to an
// FP32 all-reduce in rank order, bit for bit. The other fields are fixed words the contract
// writes out (checked when parsed); the kernel's order inside a shard is fixed and independent
// of M and of a row's position, but is the hardware's, not declared.
struct KSplitDeclaration {
  std::int64_t shards = 1;  // t >= 1
  std::string rationale;
};

struct RmsNormRounding {
  RmsNormOrder order;
  std::vector<RmsNormOrder> alternatives;
  std::vector<std::string> applies_to;  // ops
  std::string rationale;
};

// Invariance is a raw-bit comparison: equal shapes, dtypes, bit patterns; +0 != -0.
struct InvariancePolicy {
  NanPolicy nan_policy;
  std::optional<std::string> note;
};

struct Tf32Declaration {
  std::string scope;  // "required_path"
  CublasMathMode cublas_math_mode;
  std::optional<std::string> note;
};

struct Declarations {
  bool block_present = false;
  std::optional<std::string> note;
  // op -> exception; present-and-empty means "no exceptions declared" (Option A everywhere).
  std::optional<std::map<std::string, AccumulationException>> accumulation_exceptions;
  std::optional<KSplitDeclaration> det_gemm_k_split;
  std::optional<RmsNormRounding> rms_norm_rounding;
  std::optional<InvariancePolicy> invariance;
  std::optional<Tf32Declaration> tf32;
  std::optional<std::map<OpClass, ContractDType>> output_dtypes;  // "execution" resolved
  std::optional<std::map<std::string, OpClass>> op_classes;
};

// ---- judgment_rules (ws1-c1-v3 only; docs/contract-v3.md) -----------------------------------

// Where a v3 rule's number comes from, in spec §6's terms: the mode of adoption, the basis, and
// for a measured calibration the command, commit and environment of the measurement.
struct RuleProvenance {
  std::string mode;  // "direct adoption" | "partial reference" | "measured calibration"
  std::string basis;
  std::optional<std::string> command, commit, environment;
};

// Spec §7.1 / §11.2 item 12: gradients judged scale-free. For a gradient tensor whose candidate
// dtype has an entry, the row's atol is replaced by atol_rel * max|reference| of that tensor
// (rtol stays the row's): |c - r| <= atol_rel * max|r| + rtol * |r|.
struct ScaleFreeGradientRule {
  std::map<ContractDType, double> atol_rel_by_dtype;
  RuleProvenance provenance;
};

// Spec §3.2 / §11.2 item 11, FlashAttention's relative criterion: a tensor's largest error is at
// most `factor` (per judgment) times the naive BF16 engine's (ws1/naive.hpp) on the same inputs,
// plus floor_steps BF16 steps at the tensor's peak |reference| (the rounding of a bf16 output):
//   max|c - r| <= factor * max|n - r| + floor_steps * ulp_bf16(max|r|)
// The row (or the scale-free rule) still applies: it is the cap.
struct RelativeToNaiveRule {
  std::map<Judgment, double> factor_by_judgment;  // forward_accuracy, gradient_accuracy
  double floor_steps = 0;
  RuleProvenance provenance;
};

// Spec §7.1's bias (DESIGN §10): a candidate whose errors lean one way — consistently above the
// reference, or consistently nearer zero, as round-toward-zero — fails even where every element
// is within its row. For an accuracy tensor whose candidate dtype has an entry, over its n finite
// pairs, with q the reference rounded to that dtype and s = sign(c - q), then s = sign(|c| - |q|):
//   |sum(s)| <= max(max_mean * n, z * sqrt(count(s != 0)))
// The mean of the signs is each pair's signed ulp error clamped to one step: near-zero elements,
// whose errors are many ulps of their own magnitude, weigh no more than others. The z term is a
// sign test: a tensor too small to tell a lean from chance is not failed by it.
struct BiasRule {
  std::map<ContractDType, double> max_mean_by_dtype;
  double z = 0;
  RuleProvenance provenance;
};

struct JudgmentRules {
  std::optional<ScaleFreeGradientRule> gradient_scale_free;
  std::optional<RelativeToNaiveRule> relative_to_naive;
  std::optional<BiasRule> bias;
};

// ---- The contract -------------------------------------------------------------------------------

struct Contract {
  std::string file;     // as given to the loader; used in every error
  std::string sha256;   // of the exact file bytes
  std::string version;  // "ws1-c1-v2" | "ws1-c1-v3"
  PrecisionPolicy policy;
  ComparisonRoles roles;
  std::map<Judgment, JudgmentTable> judgments;  // all four present
  ChainAggregates chain;
  LegacyBlocks legacy;
  Declarations declarations;
  // ws1-c1-v3's judgment_rules (required there, refused in ws1-c1-v2).
  std::optional<JudgmentRules> rules;

  // The row for (judgment, op class, dtype); an arch override row wins when `arch` names one.
  // Error when the table has no such row.
  Result<Threshold> threshold(Judgment j, OpClass c, ContractDType t,
                              std::string_view arch = {}) const;
  Result<Threshold> threshold(Judgment j, OpClass c, DType t, std::string_view arch = {}) const;

  // Threshold of a chain metric for an execution dtype; error when the contract has none.
  Result<double> chain_threshold(ChainMetric m, ContractDType execution_dtype) const;
  std::pair<double, double> clip_interval() const { return chain.default_clip_interval; }

  RolePair roles_for(Judgment j) const;
  RolePair parity_roles() const;  // train_infer_logprob_parity

  // From ws1check_declarations only; nullopt when undeclared.
  std::optional<OpClass> op_class(std::string_view op) const;
  std::optional<AccumulationException> accumulation_exception(std::string_view op) const;

  // json paths of the declarations this file does not carry (empty when all are declared).
  std::vector<std::string> undeclared() const;
};

// Reads and validates a contract file. The sha256 is taken over the bytes read.
Result<Contract> load_contract(const std::filesystem::path& file);
// The same on text already in memory; `file` names it in errors.
Result<Contract> parse_contract(std::string_view text, std::string file);

}  // namespace ws1

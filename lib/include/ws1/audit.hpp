// The conformance audit (spec §9, §11; DESIGN §3): the §9.1 table for *this* build, every row
// a check run now (never a stored status), and a static scan of a foreign Python / Triton /
// CUDA tree for the patterns §9 found in the standard's origin repository, with SARIF 2.1.0
// output. `ws1check audit` prints these; `--out` writes the audit artifact described by
// contracts/audit.schema.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/backend.hpp"
#include "ws1/build_info.hpp"
#include "ws1/contract.hpp"
#include "ws1/environment.hpp"
#include "ws1/error.hpp"
#include "ws1/evidence.hpp"
#include "ws1/fixture.hpp"
#include "ws1/op.hpp"
#include "ws1/reference.hpp"
#include "ws1/runner.hpp"

namespace ws1 {

inline constexpr std::string_view kAuditSchemaVersion = "ws1check-audit-v1";

// ---- Rows ---------------------------------------------------------------------------------------

// The statuses of spec §9.1. kExceptionDeclared: the implementation departs from a global
// default (accumulation_dtype) exactly as the contract declares, bit for bit. kNotChecked: the
// check could not run here (no GPU, no cuobjdump, no artifact given); never a pass.
enum class AuditStatus { kConformant, kExceptionDeclared, kNonConformant, kNotChecked };
std::string_view audit_status_name(AuditStatus s);  // "conformant", "exception_declared", ...

struct AuditRow {
  std::string id;     // stable key, one of the kRow* below
  std::string title;  // the §9.1 component
  std::string spec;   // sections, e.g. "§3.1, §9.3"
  AuditStatus status = AuditStatus::kNotChecked;
  std::string basis;  // one line: what was run now and what it showed
  std::vector<std::string> details;  // one line per op / backend / case / finding
};

inline constexpr std::string_view kRowGoldProvenance = "gold_provenance";
inline constexpr std::string_view kRowDetGemm = "det_gemm_accumulation";
inline constexpr std::string_view kRowInvarianceComparator = "invariance_comparator";
inline constexpr std::string_view kRowLogprobDtype = "logprob_output_dtype";
inline constexpr std::string_view kRowRmsNormOrder = "rms_norm_rounding_order";
inline constexpr std::string_view kRowTf32 = "tf32";
inline constexpr std::string_view kRowToleranceConvergence = "tolerance_convergence";
inline constexpr std::string_view kRowEvidenceCurrency = "evidence_currency";

struct AuditSummary {
  std::int64_t conformant = 0, exception_declared = 0, non_conformant = 0, not_checked = 0,
               total = 0;
};
AuditSummary summarize(std::span<const AuditRow> rows);

// A backend the audit covers. `backend` null: not present here, `absent` says why (e.g.
// cuda_bf16 before it is built); such a backend is named in the basis, never counted as passed.
struct AuditBackend {
  std::string name;
  Backend* backend = nullptr;
  std::string absent;
};

// ---- The build's rows (each runs its check now) ---------------------------------------------

// Gold provenance (spec §3.1 condition 4, §9.3; DESIGN §3.2): the contract's reference_dtype
// is float32, and each op's FP32 reference from `reference` (the engine accuracy runs use),
// run forward (and backward where the op has gradients) on the op's short fixture of
// `catalogue` (run.lock must pin it), gives every
// declared output with that dtype (ws1::check_reference_dtype). A fixture the lock refuses is
// an Error; a reference that fails, misses an output or has another dtype is non-conformant.
Result<AuditRow> audit_gold_provenance(const RunContext& run,
                                       std::span<const FixtureSpec> catalogue,
                                       std::span<const Op* const> ops, ReferenceEngine& reference);

// det_gemm accumulation (spec §9.2, DESIGN §3.1): what the contract declares, and the
// declared-tree probe (ws1/declared_order.hpp) on every backend present. Declared Option B
// (bf16 merges) and every probe bit-equal: exception_declared; declared FP32 merges (or an
// accumulation_exceptions block without det_gemm: Option A) and bit-equal: conformant; no
// accumulation_exceptions block at all (the §9.2 documentary gap): non_conformant, with the
// backends' bits probed against Option A (the global accumulation_dtype float32) to say what
// the implementation does; any probe red: non_conformant; a probe that cannot tell the
// orders apart: not_checked. `run` supplies the widths and seed (its manifest).
AuditRow audit_det_gemm(const RunContext& run, std::span<const AuditBackend> backends);

// RMSNorm rounding order (spec §9.6, DESIGN §3.5): declared in rms_norm_rounding, and the
// rounding-order probe on rms_norm and qk_norm on every backend present computes it bit for
// bit: conformant. Undeclared: non_conformant (the probe still says which order runs).
AuditRow audit_rms_norm_order(const RunContext& run, std::span<const AuditBackend> backends);

// Invariance comparator self-test (spec §4.2, §9.4; DESIGN §3.3): `compare` (judge_bitwise in
// the build) on fixed cases: +0 against -0 (bf16 and f32) fails and is counted as a signed
// zero mismatch, equal bits pass, NaNs with the same payload fail under nan_policy "fail" and
// pass under "compare_bits", different payloads and NaN against a number fail and list the
// NaN with its payload, a dtype or shape difference fails. The policy is the contract's
// ws1check_declarations.invariance.nan_policy, else DESIGN §3.3's default "fail" (said so).
using BitwiseComparator = std::function<BitwiseTensor(std::string, const Tensor&, const Tensor&,
                                                      NanPolicy, std::size_t)>;
AuditRow audit_invariance_comparator(const Contract& contract, const BitwiseComparator& compare);
AuditRow audit_invariance_comparator(const Contract& contract);  // with ws1::judge_bitwise

// Logprob aggregates FP32 (spec §2.1, §9.5; DESIGN §3.4): the contract's
// logprob_aggregates_dtype (and a declared output_dtypes.logprob) is float32, and every op of
// class logprob, run forward on its short fixture on every backend present, returns float32
// outputs.
Result<AuditRow> audit_logprob_dtype(const RunContext& run, std::span<const FixtureSpec> catalogue,
                                     std::span<const AuditBackend> backends,
                                     std::span<const Op* const> ops);

// ---- TF32 (spec §9.7, DESIGN §3.6) ----

// TF32 tensor-core MMA in a SASS listing (`cuobjdump -sass`): an instruction whose opcode's
// first part contains "MMA" (HMMA: mma.sync / wmma; HGMMA: sm_90 wgmma) and which carries a
// ".TF32" part, e.g. HMMA.1684.F32.TF32, HMMA.1688.F32.TF32, HGMMA.64x64x8.F32.TF32. BF16 and
// FP16 MMAs (HMMA.16816.F32.BF16, HGMMA.64x128x16.F32.BF16) are not TF32.
bool is_tf32_mma(std::string_view opcode);

struct SassTf32Hit {
  std::string function;  // the listing's "Function : <name>"
  std::string arch;      // "sm_90" from "code for sm_90"
  std::int64_t line = 0; // line of the listing
  std::string instruction;
};
struct SassListingScan {
  std::int64_t functions = 0;     // "Function :" headers
  std::int64_t instructions = 0;  // instruction lines read
  std::vector<SassTf32Hit> tf32;
};
SassListingScan scan_sass_listing(std::string_view listing);

struct SassScan {
  bool ran = false;     // cuobjdump ran and its listing was scanned
  std::string not_run;  // why not (no cuobjdump, it failed, ...)
  std::string tool, binary;
  SassListingScan listing;
};
// cuobjdump on PATH, else /usr/local/cuda/bin/cuobjdump; nullopt when neither is executable.
std::optional<std::filesystem::path> find_cuobjdump();
// `cuobjdump -sass binary` (no shell), its listing scanned.
SassScan scan_binary_sass(const std::optional<std::filesystem::path>& cuobjdump,
                          const std::filesystem::path& binary);

struct Tf32Observation {
  bool built_with_cuda = false;      // the binary carries CUDA code (libws1cuda)
  std::optional<GpuEnvironment> gpu; // with the cuBLAS math mode read back; absent: no GPU
  std::string gpu_absent_reason;
  SassScan sass;                     // of the shipped binary
};

// The contract's tf32 policy is disabled for reference and candidates; the cuBLAS handle's
// math mode read back is the declared one (pedantic, or default with TF32 off) with TF32 off;
// the shipped SASS has no TF32 MMA. Any contradiction: non_conformant; a part that could not
// run (no CUDA code, no GPU, no cuobjdump, no device function in the listing): not_checked.
AuditRow audit_tf32(const Contract& contract, const Tf32Observation& observed);

// ---- Tolerance convergence (spec §2.2, §11.2 item 13) ----

// Tolerance literals in the project's test sources: every file under <project_root>/test (not
// test/data, which holds inputs of tests) with a source extension, scanned by the
// hard-coded-tolerance rule of the repository scan (see scan_source_text). The tests read
// their tolerances from the contract, so the count must be 0: conformant at 0, else
// non_conformant with file:line. not_checked when there is no test/ tree (an installed binary).
Result<AuditRow> audit_tolerance_literals(const std::filesystem::path& project_root);

// ---- Evidence currency (spec §10, DESIGN §3.7) ----

// The artifact's tool.source_commit equals this build's source commit and tool.source_dirty is
// false: conformant; else non_conformant naming both commits; no artifact: not_checked. A
// file that is not an evidence artifact (unreadable, not JSON, no tool.source_commit string,
// source_dirty neither boolean nor null) is an Error naming the file and field.
Result<AuditRow> audit_evidence_currency(const std::optional<std::filesystem::path>& evidence,
                                         const BuildInfo& build);

// ---- The whole table ----

struct BuildAuditInputs {
  const RunContext* tiny = nullptr;          // its manifest's short fixtures: gold, logprob
  std::span<const FixtureSpec> tiny_catalogue;
  const RunContext* probe = nullptr;         // its manifest's widths and seed: the probes
  std::vector<AuditBackend> backends;
  std::span<const Op* const> ops;            // empty: all_ops()
  Tf32Observation tf32;
  std::filesystem::path project_root;        // for tolerance convergence
  std::optional<std::filesystem::path> evidence;
};

// The eight rows in table order (gold, det_gemm, comparator, logprob, rmsnorm, tf32,
// tolerance, evidence). Errors: bad input only (a fixture the lock refuses, an unreadable
// artifact).
Result<std::vector<AuditRow>> audit_build(const BuildAuditInputs& in);

// ---- Static scan of a foreign tree (`ws1check audit --repo`) --------------------------------

enum class SourceLanguage { kPython, kCFamily };
// .py -> Python; .c .cc .cpp .cxx .h .hh .hpp .hxx .cu .cuh -> C-family; others: nullopt.
std::optional<SourceLanguage> source_language(const std::filesystem::path& file);

// A test file: a directory component of the relative path is "test" or "tests", or the file
// name starts with "test_", ends with "_test" / "_tests" before its extension, or is
// "conftest.py".
bool is_test_path(std::string_view relative_path);

struct RepoRule {
  std::string_view id;     // "ws1/hardcoded-tolerance", ...
  std::string_view name;   // CamelCase name (SARIF rule name)
  std::string_view level;  // SARIF level: "error" | "warning" | "note"
  std::string_view spec;   // sections of the spec
  std::string_view short_description;
  std::string_view full_description;  // the heuristic, stated precisely
};
std::span<const RepoRule> repo_rules();
inline constexpr std::string_view kRuleHardcodedTolerance = "ws1/hardcoded-tolerance";
inline constexpr std::string_view kRuleTritonDotPrecision = "ws1/triton-dot-precision";
inline constexpr std::string_view kRuleGoldLowPrecisionMatmul = "ws1/gold-low-precision-matmul";
inline constexpr std::string_view kRuleLogprobOutputDtype = "ws1/logprob-output-dtype";

struct RepoFinding {
  std::string rule;     // a RepoRule id
  std::string file;     // relative to the scanned root, '/'-separated
  std::int64_t line = 0;    // 1-based
  std::int64_t column = 0;  // 1-based, in Unicode code points
  std::string message;
  std::string snippet;  // the source line, trimmed
};

// The findings of every rule in one source text (comments are never matched, string contents
// only where a rule reads a value: input_precision="ieee"). The rules, precisely:
//
// ws1/hardcoded-tolerance (test files only): an identifier whose last '_' / camelCase word is
//   "atol" or "rtol" (atol, rtol, ATOL, kAtol, grad_rtol), then optionally a Python
//   annotation (": float"), then "=" (not "==") or a C++ brace "{", then a decimal number
//   literal, optionally signed: `atol=1e-3`, `ATOL = 0.05`, `tol.rtol = 0`, `.atol = 1e-2`,
//   `double atol{1e-3}`. Not counted: a value that is not a literal (`atol=row.atol`), dict /
//   JSON keys (`"atol": 0.1`, data of a contract), positional tolerances
//   (`np.allclose(a, b, 1e-5)`), `abs=` / `rel=` of pytest.approx.
// ws1/triton-dot-precision (Python): a call `tl.dot(` or `triton.language.dot(` whose
//   arguments have neither `input_precision="ieee"` (a string literal) nor `allow_tf32=False`.
// ws1/gold-low-precision-matmul (Python): a call `torch.matmul(` / `torch.mm(` / `torch.bmm(`
//   inside a def or class whose name has a word gold, golden, reference, ref, oracle or
//   native (split at '_' and camelCase: NativeGemmOp, ref_matmul, _gold), where no operand is
//   visibly upcast: an operand is upcast when its text has `.float()`, `.double()`,
//   `torch.float32`, `torch.float64`, `torch.float` or `torch.double`, or it is a name
//   assigned such an expression earlier in the same def. A `.float()` on the product does
//   not upcast the operands and is reported.
// ws1/logprob-output-dtype (Python and C-family): an allocation that takes the logits' dtype,
//   where "logits" is an identifier with the word logit / logits:
//     Python  torch.empty_like / zeros_like / ones_like / full_like(L, ...) and
//             L.new_empty / new_zeros / new_ones / new_full(...) without a dtype= argument;
//             torch.empty / zeros / ones / full(..., dtype=L.dtype);
//     C++     torch:: / at:: empty, zeros, ones, full, empty_strided(..., L.options()) with
//             no .dtype( in that argument; empty_like / zeros_like / ones_like / full_like(L)
//             without options carrying .dtype(; an argument dtype(L.dtype()) or
//             dtype(L.scalar_type()),
//   assigned (`name = <allocation>`) to a logprob output: a name with the word logp, logps,
//   logprob, logprobs or lse (or "log" followed by "prob"/"probs"), or out / output / result
//   inside a function whose name has a logprob word and none of backward, bwd, grad. The
//   function is the innermost def (Python) or the nearest line above that starts in column 1
//   with an identifier and contains '(' (C-family). Gradients (dlogits = empty_like(logits))
//   keep the logits' dtype rightly and are not reported.
std::vector<RepoFinding> scan_source_text(std::string_view text, std::string_view relative_path,
                                          SourceLanguage language, bool test_file);

struct ToleranceCount {
  std::int64_t atol = 0, rtol = 0;
  std::int64_t total() const { return atol + rtol; }
};

struct RepoScanOptions {
  std::uintmax_t max_file_bytes = 8u << 20;  // larger files are skipped (and listed)
  bool all_test_files = false;               // every file counts as a test file
  std::vector<std::string> excluded;         // directories (relative to root) not walked
};

struct RepoScan {
  std::string root;                  // as given
  std::int64_t files_scanned = 0;    // source files read
  std::vector<std::string> skipped;  // "path: why"
  std::vector<RepoFinding> findings; // by file, then line, then column
  std::map<std::string, ToleranceCount> tolerance_by_file;
  ToleranceCount tolerance_total;
};

// Walks `root` (not following symbolic links; directories whose name starts with '.' are
// skipped, and so are __pycache__ and node_modules) and scans every source file. Error: root
// is not a readable directory.
Result<RepoScan> scan_repo(const std::filesystem::path& root, const RepoScanOptions& options = {});

// SARIF 2.1.0: one run; tool.driver with name "ws1check", version and the rules; one result
// per finding with ruleId, ruleIndex, level, message.text and a physicalLocation
// (artifactLocation.uri relative to the SRCROOT base, region.startLine / startColumn).
std::string sarif_json(const RepoScan& scan, std::string_view tool_version);

// ---- The audit artifact (contracts/audit.schema.json) ----

struct AuditArtifact {
  std::string schema_version = std::string(kAuditSchemaVersion);
  ToolInfo tool;
  std::optional<Checkout> checkout;
  std::vector<std::string> command;
  std::string started, finished;
  std::string mode;                    // "build" or "repo"
  std::optional<ContractRef> contract; // build mode
  std::optional<WorkloadRef> tiny_workload, probe_workload;  // build mode
  std::vector<AuditRow> rows;          // build mode
  std::optional<RepoScan> repo;        // repo mode
};

// The artifact as JSON text (key order fixed, 2-space indent, trailing newline); summary and
// verdict ("conformant" or "non_conformant") are computed from rows / findings.
std::string audit_json(const AuditArtifact& a);

}  // namespace ws1

// Declared-order probes: does a backend compute in the rounding / reduction order the contract
// declares (ws1check_declarations), bit for bit? Accuracy against the FP32 reference cannot
// tell (both RMSNorm orders and both det_gemm merge dtypes can be within tolerance), and
// invariance compares the backend with itself; these probes compare it with an implementation
// of the declared order on inputs chosen so that the orders disagree on many elements, and say
// which order the backend's bits are.
//
// The result is its own record, not a ws1::Cell: none of the four judgments of spec §4 (nor
// chain parity) is "conformance to a declared order", so a Cell would have to carry a
// judgment that misnames it. The audit command turns these records into its report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ws1/backend.hpp"
#include "ws1/error.hpp"
#include "ws1/evidence.hpp"
#include "ws1/op.hpp"
#include "ws1/runner.hpp"

namespace ws1 {

// Order names: rms_norm / qk_norm "kernel", "hf" (contract_name(RmsNormOrder)); det_gemm
// "option_b" (FP32 leaves rounded to bf16, bf16 merges: spec §9.2 Option B) and "option_a"
// (the same tree in FP32, one rounding at the output).
inline constexpr std::string_view kOrderNeither = "neither";

struct DeclaredOrderResult {
  std::string op;
  std::string declared;     // the order the contract declares (or the run assumed)
  std::string declaration;  // where it comes from: the contract's json path, or the assumption
  // The order whose bits the backend produced on every probed tensor: the declared one, the
  // alternative, or "neither".
  std::string observed;
  std::string kernel_id;    // the backend's kernel(s) that ran
  FixtureRef probe;         // the probe inputs: id "probe/<op>/declared_order", hash, seed
  // Elements of the probe outputs on which the declared order and its alternative give
  // different bits: how much the probe can tell them apart (> 0, or the probe is an error).
  std::int64_t discriminating = 0;
  std::int64_t probed = 0;  // elements compared in all
  // The backend's outputs against the declared order, bit for bit (+0 != -0, NaN fails).
  std::vector<BitwiseTensor> tensors;
  // green: the declared order's bits everywhere; red: anything else (other bits, a failure, a
  // missing output; reason says which); N/A: the contract declares nothing to probe here.
  Verdict verdict = Verdict::kNa;
  std::string reason;
};

// RMSNorm rounding order (spec §9.6, ws1check_declarations.rms_norm_rounding), for rms_norm and
// qk_norm: the backend's forward on a probe at the model's width (rms_norm x [2, hidden],
// qk_norm x [2, heads, head_dim]; x and weight standard normal) against the declared order as
// lib/ops implements it, and against the other order to name what the backend does. An op
// other than those two, or a run without a manifest, is an Error.
Result<DeclaredOrderResult> probe_rms_norm_order(const RunContext& run, Backend& backend,
                                                 const Op& op);

// det_gemm's declared tree (spec §9.2, ws1check_declarations.accumulation_exceptions.det_gemm:
// FP32 fma leaves of k_tree_leaf, mid split, merges in merge_dtype): the backend's forward c
// and backward da, db on a probe with K = the model's hidden size (a [64, K], b [K, 64],
// dy.c [64, 64], standard normal: partial sums large enough that bf16 and FP32 merges differ)
// against a literal recursive implementation of the tree written here (independent of the
// blocked kernel in lib/ops), and against the other merge dtype. N/A when the contract declares
// no det_gemm exception; an Error for another op, a declaration this probe cannot implement
// (leaves not FP32, an unknown split), or a run without a manifest.
Result<DeclaredOrderResult> probe_det_gemm_tree(const RunContext& run, Backend& backend,
                                                const Op& op);

// det_gemm under Option A (no accumulation exception: FP32 throughout, one rounding), whose
// order inside a shard is the hardware's and so cannot be matched bit for bit; what Option A
// promises can be: (1) the cancellation probe: small-integer inputs (c over K, da over N, db
// over M, each of length the model's hidden size) whose partial sums are integers bf16 cannot
// hold and FP32 holds exactly, cancelling to a remainder bf16 holds: an FP32 sum in any order
// is exact, one that rounds any partial to bf16 is not; (2) batch rows: the rows of calls with
// M = 1, 7, 59, 512 equal the same rows of an M = 8192 call (c on near-cancelling normal
// inputs, on which any change of association shows in the bf16 bits; da on normal inputs).
// green: every tensor exact / equal; red otherwise (observed "neither"). An Error for another op
// or a run without a manifest.
Result<DeclaredOrderResult> probe_det_gemm_option_a(const RunContext& run, Backend& backend,
                                                    const Op& op);

}  // namespace ws1

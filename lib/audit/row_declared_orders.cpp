// The rows that hold a contract declaration against the implementation's bits: det_gemm's
// accumulation tree (spec §9.2) and the RMSNorm rounding order (§9.6), through the
// declared-order probes of ws1/declared_order.hpp on every backend present.
#include <fmt/format.h>

#include "audit_support.hpp"
#include "ws1/declared_order.hpp"

namespace ws1 {
namespace {

struct ProbeTally {
  std::vector<std::string> red, unchecked, green, absent;
  std::vector<std::string> unserved;  // "exec:w serves no rms_norm forward"
  std::vector<std::string> observed;  // "cpu_bf16 rms_norm: kernel"
};

enum class Probe { kRmsNormOrder, kDetGemmTree, kDetGemmOptionA };

void probe_all(const RunContext& run, std::span<const AuditBackend> backends, const Op& op,
               Probe probe, AuditRow& row, ProbeTally& t) {
  for (const auto& b : backends) {
    if (b.backend == nullptr) continue;
    // A backend without the kernel the probe calls (an external worker serving a few ops) is
    // not probed, and says so; it is not a wrong order.
    std::vector<std::string> missing;
    if (!b.backend->serves(op, Direction::kForward)) missing.push_back("forward");
    if (probe != Probe::kRmsNormOrder && !b.backend->serves(op, Direction::kBackward)) missing.push_back("backward");
    if (!missing.empty()) {
      t.unserved.push_back(fmt::format("{} serves no {} {}", b.name, op.name(), fmt::join(missing, " or ")));
      row.details.push_back(fmt::format("{} {}: not probed: the backend serves no {} {}", b.name, op.name(),
                                        op.name(), fmt::join(missing, " or ")));
      continue;
    }
    auto r = probe == Probe::kDetGemmTree      ? probe_det_gemm_tree(run, *b.backend, op)
             : probe == Probe::kDetGemmOptionA ? probe_det_gemm_option_a(run, *b.backend, op)
                                               : probe_rms_norm_order(run, *b.backend, op);
    const std::string who = fmt::format("{} {}", b.name, op.name());
    if (!r) {
      t.unchecked.push_back(fmt::format("{}: probe not run: {}", who, r.error().message()));
      row.details.push_back(t.unchecked.back());
      continue;
    }
    row.details.push_back(fmt::format(
        "{}: {}; declared {} ({}), observed {}; probe {} ({}), {} of {} elements tell the orders "
        "apart; kernel {}{}",
        who, verdict_name(r->verdict), r->declared, r->declaration, r->observed, r->probe.id,
        r->probe.hash.substr(0, 12), r->discriminating, r->probed, r->kernel_id,
        r->reason.empty() ? "" : "; " + r->reason));
    t.observed.push_back(fmt::format("{}: {}", who, r->observed));
    if (r->verdict == Verdict::kRed) t.red.push_back(who);
    else if (r->verdict == Verdict::kGreen) t.green.push_back(who);
  }
}

std::string absent_text(std::span<const AuditBackend> backends, const ProbeTally& t) {
  std::vector<std::string> a;
  for (const auto& b : backends)
    if (b.backend == nullptr) a.push_back(fmt::format("{} not present ({})", b.name, b.absent));
  for (const auto& u : t.unserved) a.push_back(fmt::format("{} (not probed)", u));
  return a.empty() ? std::string() : fmt::format("; {}", fmt::join(a, "; "));
}

}  // namespace

AuditRow audit_det_gemm(const RunContext& run, std::span<const AuditBackend> backends) {
  AuditRow row = audit_detail::make_row(kRowDetGemm);
  const Contract& contract = *run.contract;
  const Op* op = find_op_impl("det_gemm");
  if (op == nullptr) {
    row.basis = "det_gemm has no implementation in this build: nothing to probe";
    return row;
  }
  const std::optional<AccumulationException> ex = contract.accumulation_exception("det_gemm");
  const bool block = contract.declarations.accumulation_exceptions.has_value();
  ProbeTally t;
  std::string declared, probed;
  if (ex) {
    // Option B (or another tree) as written: the declared tree, bit for bit.
    declared = fmt::format("ws1check_declarations.accumulation_exceptions.det_gemm: {} leaves of "
                           "k_tree_leaf {}, split \"{}\", {} merges, {} output",
                           contract_name(ex->leaf_accumulation_dtype), ex->k_tree_leaf, ex->split,
                           contract_name(ex->merge_dtype), contract_name(ex->output_dtype));
    probe_all(run, backends, *op, Probe::kDetGemmTree, row, t);
    probed = fmt::format("declared-tree probe (c, da, db, bit for bit): {}",
                         t.observed.empty() ? std::string("no backend probed") : fmt::format("{}", fmt::join(t.observed, ", ")));
    if (ex->merge_dtype != ContractDType::kFloat32)
      probed += fmt::format("; what the tree costs: its {} nodes round partial sums before they "
                            "cancel, so its outputs are red against the FP32 gold where sums "
                            "cancel (docs/decisions.md D11: the outlier-channel forward at 1.86x "
                            "and db at 20.9x the bf16 reduction allowance)",
                            contract_name(ex->merge_dtype));
  } else {
    // Option A: FP32 throughout, one rounding; the kernel's order is the hardware's, so the
    // check is what Option A promises: exact on cancelling integer sums, rows independent of M.
    declared = fmt::format("{} accumulation_dtype {} with no det_gemm exception (Option A){}",
                           block ? "ws1check_declarations.accumulation_exceptions lists no det_gemm entry:"
                                 : "no ws1check_declarations.accumulation_exceptions:",
                           contract_name(contract.policy.accumulation_dtype),
                           contract.declarations.det_gemm_k_split
                               ? fmt::format(", K split into {} FP32 shards (det_gemm_k_split)",
                                             contract.declarations.det_gemm_k_split->shards)
                               : std::string());
    probe_all(run, backends, *op, Probe::kDetGemmOptionA, row, t);
    probed = fmt::format("Option A probe (cancelling integer sums exact in c, da, db; rows at M = "
                         "1, 7, 59, 512 equal to M = 8192): {}",
                         t.observed.empty() ? std::string("no backend probed") : fmt::format("{}", fmt::join(t.observed, ", ")));
  }
  probed += absent_text(backends, t);
  if (contract.policy.accumulation_dtype != ContractDType::kFloat32 && !ex) {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("the contract declares {}; spec §2.1 asks for FP32 accumulation; {}",
                            declared, probed);
  } else if (!t.red.empty()) {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("the contract declares {}; {}: the bits are not what is declared",
                            declared, probed);
  } else if (!t.unchecked.empty() || t.green.empty()) {
    row.status = AuditStatus::kNotChecked;
    row.basis = fmt::format("the contract declares {}; {}", declared, probed);
  } else {
    const bool exception = ex && ex->merge_dtype != contract.policy.accumulation_dtype;
    row.status = exception ? AuditStatus::kExceptionDeclared : AuditStatus::kConformant;
    row.basis = fmt::format("the contract declares {}; {}: as declared", declared, probed);
  }
  return row;
}

AuditRow audit_rms_norm_order(const RunContext& run, std::span<const AuditBackend> backends) {
  AuditRow row = audit_detail::make_row(kRowRmsNormOrder);
  const Contract& contract = *run.contract;
  const auto& d = contract.declarations.rms_norm_rounding;
  ProbeTally t;
  std::vector<std::string> missing;
  for (std::string_view name : {"rms_norm", "qk_norm"}) {
    const Op* op = find_op_impl(name);
    if (op == nullptr) {
      missing.push_back(std::string(name));
      continue;
    }
    probe_all(run, backends, *op, Probe::kRmsNormOrder, row, t);
  }
  const std::string probed = fmt::format("rounding-order probe (y bit for bit): {}{}",
                                         t.observed.empty() ? std::string("no backend probed")
                                                            : fmt::format("{}", fmt::join(t.observed, ", ")),
                                         absent_text(backends, t));
  if (!d) {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("ws1check_declarations.rms_norm_rounding is absent: the contract does not "
                            "pin the RMSNorm rounding order (spec §9.6); {}",
                            probed);
  } else {
    const std::string declared = fmt::format("rms_norm_rounding.order {}", contract_name(d->order));
    if (!t.red.empty()) {
      row.status = AuditStatus::kNonConformant;
      row.basis = fmt::format("the contract declares {}; {}: not the declared order", declared, probed);
    } else if (!t.unchecked.empty() || t.green.empty()) {
      row.status = AuditStatus::kNotChecked;
      row.basis = fmt::format("the contract declares {}; {}", declared, probed);
    } else {
      row.status = AuditStatus::kConformant;
      row.basis = fmt::format("the contract declares {}; {}: the declared order", declared, probed);
    }
  }
  for (const auto& m : missing) row.details.push_back(m + ": no implementation in this build");
  return row;
}

}  // namespace ws1

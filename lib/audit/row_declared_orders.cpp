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
  std::vector<std::string> observed;  // "cpu_bf16 rms_norm: kernel"
};

void probe_all(const RunContext& run, std::span<const AuditBackend> backends, const Op& op,
               bool det_gemm, AuditRow& row, ProbeTally& t) {
  for (const auto& b : backends) {
    if (b.backend == nullptr) continue;
    auto r = det_gemm ? probe_det_gemm_tree(run, *b.backend, op)
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

std::string absent_text(std::span<const AuditBackend> backends) {
  std::vector<std::string> a;
  for (const auto& b : backends)
    if (b.backend == nullptr) a.push_back(fmt::format("{} not present ({})", b.name, b.absent));
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
  // Without a det_gemm exception the contract asserts Option A (FP32 accumulation throughout,
  // accumulation_dtype): the probe runs against that tree, with FP32 merges, to show which
  // one the implementation computes.
  Contract option_a;
  RunContext probe_run = run;
  std::string declared;
  if (ex) {
    declared = fmt::format("ws1check_declarations.accumulation_exceptions.det_gemm: {} leaves of "
                           "k_tree_leaf {}, split \"{}\", {} merges, {} output",
                           contract_name(ex->leaf_accumulation_dtype), ex->k_tree_leaf, ex->split,
                           contract_name(ex->merge_dtype), contract_name(ex->output_dtype));
  } else {
    option_a = contract;
    AccumulationException a;
    a.leaf_accumulation_dtype = contract.policy.accumulation_dtype;
    a.k_tree_leaf = run.op_context.k_tree_leaf;
    a.split = "mid = lo + (hi-lo)/2";
    a.merge_dtype = contract.policy.accumulation_dtype;
    a.output_dtype = contract.policy.execution_dtype;
    a.rationale = "audit: Option A, the contract's global accumulation_dtype";
    option_a.declarations.accumulation_exceptions =
        std::map<std::string, AccumulationException>{{"det_gemm", a}};
    probe_run.contract = &option_a;
    declared = block ? fmt::format("no det_gemm exception (accumulation_exceptions without det_gemm: "
                                   "Option A, accumulation_dtype {})",
                                   contract_name(contract.policy.accumulation_dtype))
                     : fmt::format("nothing: ws1check_declarations.accumulation_exceptions is absent, "
                                   "so only the global accumulation_dtype {} (Option A) is asserted",
                                   contract_name(contract.policy.accumulation_dtype));
  }
  ProbeTally t;
  probe_all(probe_run, backends, *op, true, row, t);
  const std::string probed = fmt::format("declared-tree probe (c, da, db, bit for bit): {}{}",
                                         t.observed.empty() ? std::string("no backend probed")
                                                            : fmt::format("{}", fmt::join(t.observed, ", ")),
                                         absent_text(backends));
  if (!ex && !block) {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("the contract declares {} (spec §9.2: the exception must be declared); "
                            "{} (option_b = bf16 merges)",
                            declared, probed);
  } else if (!t.red.empty()) {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("the contract declares {}; {}: the bits are not the declared tree",
                            declared, probed);
  } else if (!t.unchecked.empty() || t.green.empty()) {
    row.status = AuditStatus::kNotChecked;
    row.basis = fmt::format("the contract declares {}; {}", declared, probed);
  } else {
    const bool exception = ex && ex->merge_dtype != contract.policy.accumulation_dtype;
    row.status = exception ? AuditStatus::kExceptionDeclared : AuditStatus::kConformant;
    row.basis = fmt::format("the contract declares {}; {}: bit-equal to the declared tree", declared,
                            probed);
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
    probe_all(run, backends, *op, false, row, t);
  }
  const std::string probed = fmt::format("rounding-order probe (y bit for bit): {}{}",
                                         t.observed.empty() ? std::string("no backend probed")
                                                            : fmt::format("{}", fmt::join(t.observed, ", ")),
                                         absent_text(backends));
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

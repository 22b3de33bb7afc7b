// Lookups on a loaded contract. A missing row is an error naming the path it was looked for at.
#include "parse.hpp"

namespace ws1 {
namespace {

std::string judgment_path(Judgment j) { return "judgments." + std::string(contract_name(j)); }

std::string row_path(std::string prefix, OpClass c, ContractDType t) {
  return prefix + "." + std::string(contract_name(c)) + "." + std::string(contract_name(t));
}

const ToleranceRow* find_row(const ClassRows& rows, OpClass c, ContractDType t) {
  const auto by_dtype = rows.find(c);
  if (by_dtype == rows.end()) return nullptr;
  const auto row = by_dtype->second.find(t);
  return row == by_dtype->second.end() ? nullptr : &row->second;
}

std::string declarations_path(std::string_view item) {
  return std::string(kDeclarationsKey) + "." + std::string(item);
}

}  // namespace

Result<Threshold> Contract::threshold(Judgment j, OpClass c, ContractDType t,
                                      std::string_view arch) const {
  const auto table = judgments.find(j);
  if (table == judgments.end()) return bad_input(file, judgment_path(j), "no such judgment");
  if (!arch.empty()) {
    const auto over = table->second.arch_overrides.find(std::string(arch));
    if (over != table->second.arch_overrides.end()) {
      if (const ToleranceRow* row = find_row(over->second, c, t))
        return Threshold{row->status, row->tolerance,
                         row_path(judgment_path(j) + ".arch_overrides." + std::string(arch), c, t)};
    }
  }
  const std::string path = row_path(judgment_path(j) + ".by_op_class", c, t);
  if (const ToleranceRow* row = find_row(table->second.by_op_class, c, t))
    return Threshold{row->status, row->tolerance, path};
  return bad_input(file, path, "the contract has no row for this op class and dtype");
}

Result<Threshold> Contract::threshold(Judgment j, OpClass c, DType t, std::string_view arch) const {
  const auto ct = contract_dtype(t);
  if (!ct)
    return bad_input(file, judgment_path(j),
                     "dtype " + std::string(dtype_contract_name(t)) + " has no contract rows");
  return threshold(j, c, *ct, arch);
}

Result<double> Contract::chain_threshold(ChainMetric m, ContractDType execution_dtype) const {
  const std::string path = "chain_logprob_aggregates.metrics." + std::string(contract_name(m));
  const auto rule = chain.metrics.find(m);
  if (rule == chain.metrics.end()) return bad_input(file, path, "the contract has no such metric");
  const auto th = rule->second.threshold_by_execution_dtype.find(execution_dtype);
  if (th == rule->second.threshold_by_execution_dtype.end())
    return bad_input(file,
                     path + ".by_execution_dtype." + std::string(contract_name(execution_dtype)),
                     "the contract has no threshold for this execution dtype");
  return th->second;
}

RolePair Contract::roles_for(Judgment j) const {
  const auto it = roles.by_report_kind.find(std::string(contract_name(j)));
  return it == roles.by_report_kind.end() ? RolePair{} : it->second;
}

RolePair Contract::parity_roles() const {
  const auto it = roles.by_report_kind.find(std::string(contract_detail::kParityReportKind));
  return it == roles.by_report_kind.end() ? RolePair{} : it->second;
}

std::optional<OpClass> Contract::op_class(std::string_view op) const {
  if (!declarations.op_classes) return std::nullopt;
  const auto it = declarations.op_classes->find(std::string(op));
  if (it == declarations.op_classes->end()) return std::nullopt;
  return it->second;
}

std::optional<AccumulationException> Contract::accumulation_exception(std::string_view op) const {
  if (!declarations.accumulation_exceptions) return std::nullopt;
  const auto it = declarations.accumulation_exceptions->find(std::string(op));
  if (it == declarations.accumulation_exceptions->end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Contract::undeclared() const {
  std::vector<std::string> out;
  const Declarations& d = declarations;
  // An accumulation_exceptions block without det_gemm is a declaration too (no exception,
  // Option A); only the block's absence leaves the spec §9.2 question open.
  if (!d.accumulation_exceptions) out.push_back(declarations_path("accumulation_exceptions"));
  if (!d.det_gemm_k_split) out.push_back(declarations_path("det_gemm_k_split"));
  if (!d.rms_norm_rounding) out.push_back(declarations_path("rms_norm_rounding"));
  if (!d.invariance) out.push_back(declarations_path("invariance"));
  if (!d.tf32) out.push_back(declarations_path("tf32"));
  if (!d.output_dtypes) {
    out.push_back(declarations_path("output_dtypes"));
  } else {
    for (OpClass c :
         {OpClass::kElementwise, OpClass::kReduction, OpClass::kAttention, OpClass::kLogprob})
      if (!d.output_dtypes->count(c))
        out.push_back(declarations_path("output_dtypes." + std::string(contract_name(c))));
  }
  if (!d.op_classes) {
    out.push_back(declarations_path("op_classes"));
  } else {
    for (const auto& e : spec_op_classes())
      if (!d.op_classes->count(std::string(e.op)))
        out.push_back(declarations_path("op_classes." + std::string(e.op)));
  }
  return out;
}

}  // namespace ws1

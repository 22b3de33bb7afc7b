// Row vocabulary, the table's rows and their summary.
#include <array>
#include <stdexcept>
#include <string>

#include "audit_support.hpp"

namespace ws1 {
namespace audit_detail {
namespace {

constexpr std::array<RowInfo, 8> kRows{{
    {kRowGoldProvenance, "FP32 references: output dtype = reference_dtype (gold provenance)",
     "§3.1, §9.3"},
    {kRowDetGemm, "Deterministic GEMM accumulation (det_gemm tree) declared and matched", "§2.1, §9.2"},
    {kRowInvarianceComparator, "Invariance comparator: raw bits, ±0 and NaN semantics", "§4.2, §9.4"},
    {kRowLogprobDtype, "Logprob aggregates FP32 on every backend", "§2.1, §9.5"},
    {kRowRmsNormOrder, "RMSNorm rounding order declared and matched", "§9.6"},
    {kRowTf32, "TF32 off: cuBLAS math mode and shipped SASS", "§2.1, §9.7"},
    {kRowToleranceConvergence, "Test tolerances come from the contract (no literals in test/)",
     "§2.2, §11.2 item 13"},
    {kRowEvidenceCurrency, "Evidence produced at this build's commit on a clean tree", "§10, §11.1 item 7"},
}};

}  // namespace

std::span<const RowInfo> row_infos() { return kRows; }

AuditRow make_row(std::string_view id) {
  for (const auto& r : kRows)
    if (r.id == id) {
      AuditRow row;
      row.id = std::string(r.id);
      row.title = std::string(r.title);
      row.spec = std::string(r.spec);
      return row;
    }
  throw std::logic_error("unknown audit row " + std::string(id));
}

}  // namespace audit_detail

std::string_view audit_status_name(AuditStatus s) {
  switch (s) {
    case AuditStatus::kConformant: return "conformant";
    case AuditStatus::kExceptionDeclared: return "exception_declared";
    case AuditStatus::kNonConformant: return "non_conformant";
    case AuditStatus::kNotChecked: return "not_checked";
  }
  return "not_checked";
}

AuditSummary summarize(std::span<const AuditRow> rows) {
  AuditSummary s;
  for (const auto& r : rows) {
    ++s.total;
    switch (r.status) {
      case AuditStatus::kConformant: ++s.conformant; break;
      case AuditStatus::kExceptionDeclared: ++s.exception_declared; break;
      case AuditStatus::kNonConformant: ++s.non_conformant; break;
      case AuditStatus::kNotChecked: ++s.not_checked; break;
    }
  }
  return s;
}

}  // namespace ws1

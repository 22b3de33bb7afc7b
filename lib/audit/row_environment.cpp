// The rows that read this build and its surroundings rather than run ops: TF32 (cuBLAS math
// mode read back, shipped SASS), tolerance literals in test/, and the evidence's commit.
#include <fmt/format.h>

#include <memory>

#include "audit_support.hpp"
#include "json_node.hpp"

namespace ws1 {
namespace fs = std::filesystem;

AuditRow audit_tf32(const Contract& contract, const Tf32Observation& o) {
  AuditRow row = audit_detail::make_row(kRowTf32);
  std::vector<std::string> problems, unchecked, ok;
  const PrecisionPolicy& p = contract.policy;
  if (p.tf32_reference != "disabled")
    problems.push_back(fmt::format("policy tf32 reference is \"{}\"", p.tf32_reference));
  if (p.tf32_candidate_execution != "disabled")
    problems.push_back(fmt::format("policy tf32 candidate_execution is \"{}\"", p.tf32_candidate_execution));
  if (problems.empty()) ok.push_back("contract: TF32 disabled for reference and candidates");
  const CublasMathMode declared =
      contract.declarations.tf32 ? contract.declarations.tf32->cublas_math_mode : CublasMathMode::kPedantic;
  const std::string declared_text = fmt::format(
      "{} ({})", contract_name(declared),
      contract.declarations.tf32 ? "ws1check_declarations.tf32.cublas_math_mode" : "undeclared: DESIGN §3.6");

  if (!o.built_with_cuda) {
    unchecked.push_back(fmt::format("built without CUDA: no cuBLAS handle to read back and no shipped "
                                    "CUDA code whose SASS could be scanned (cuobjdump: {})",
                                    o.sass.tool.empty() ? std::string("not found") : o.sass.tool));
  } else {
    // cuBLAS math mode, read back from a handle configured as the FP32 paths configure theirs.
    if (!o.gpu) {
      unchecked.push_back(fmt::format("cuBLAS math mode not read back: {}", o.gpu_absent_reason.empty() ? std::string("no GPU") : o.gpu_absent_reason));
    } else {
      const std::string& mode = o.gpu->cublas_math_mode;
      const bool pedantic = mode.rfind("CUBLAS_PEDANTIC_MATH", 0) == 0;
      const bool default_math = mode.rfind("CUBLAS_DEFAULT_MATH", 0) == 0;
      if (mode.empty() || mode.rfind("unreadable", 0) == 0) {
        unchecked.push_back(fmt::format("cuBLAS math mode not read back ({})", mode.empty() ? "empty" : mode));
      } else if (o.gpu->tf32_enabled) {
        problems.push_back(fmt::format("cuBLAS math mode read back {}: TF32 enabled", mode));
      } else if (!(pedantic || (declared == CublasMathMode::kDefaultTf32Off && default_math))) {
        problems.push_back(fmt::format("cuBLAS math mode read back {}, declared {}", mode, declared_text));
      } else {
        ok.push_back(fmt::format("cuBLAS math mode read back {} on {} (TF32 off; declared {})", mode,
                                 o.gpu->name, declared_text));
      }
    }
    // The shipped kernels' SASS.
    const SassScan& s = o.sass;
    if (!s.ran) {
      unchecked.push_back(fmt::format("SASS not scanned: {}", s.not_run));
    } else if (s.listing.functions == 0) {
      unchecked.push_back(fmt::format("{} -sass {}: no device function in the listing (no kernels "
                                      "shipped yet), nothing to scan",
                                      s.tool, s.binary));
    } else if (!s.listing.tf32.empty()) {
      const SassTf32Hit& h = s.listing.tf32.front();
      problems.push_back(fmt::format("{} TF32 MMA instruction(s) in the SASS of {}; first: {} in {} "
                                     "({}, listing line {})",
                                     s.listing.tf32.size(), s.binary, h.instruction, h.function,
                                     h.arch, h.line));
      for (const auto& x : s.listing.tf32)
        row.details.push_back(fmt::format("TF32 MMA: {} in {} ({}, listing line {})", x.instruction,
                                          x.function, x.arch, x.line));
    } else {
      ok.push_back(fmt::format("{} -sass {}: {} functions, {} instructions, no TF32 MMA (HMMA/HGMMA .TF32)",
                               s.tool, s.binary, s.listing.functions, s.listing.instructions));
    }
  }
  for (const auto& x : ok) row.details.push_back(x);
  for (const auto& x : unchecked) row.details.push_back("not checked: " + x);
  for (const auto& x : problems) row.details.push_back("non-conformant: " + x);
  if (!problems.empty()) {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("{}", fmt::join(problems, "; "));
  } else if (!unchecked.empty()) {
    row.status = AuditStatus::kNotChecked;
    row.basis = fmt::format("{}", fmt::join(unchecked, "; "));
  } else {
    row.status = AuditStatus::kConformant;
    row.basis = fmt::format("{}", fmt::join(ok, "; "));
  }
  return row;
}

Result<AuditRow> audit_tolerance_literals(const fs::path& project_root) {
  AuditRow row = audit_detail::make_row(kRowToleranceConvergence);
  const fs::path test = project_root / "test";
  std::error_code ec;
  if (!fs::is_directory(test, ec)) {
    row.status = AuditStatus::kNotChecked;
    row.basis = fmt::format("no test/ tree at {} (an installed binary): nothing to scan", project_root.string());
    return row;
  }
  RepoScanOptions options;
  options.all_test_files = true;
  options.excluded = {"data"};
  auto scan = scan_repo(test, options);
  if (!scan) return scan.error();
  std::int64_t found = 0;
  for (const auto& f : scan->findings) {
    if (f.rule != kRuleHardcodedTolerance) continue;
    ++found;
    row.details.push_back(fmt::format("test/{}:{}: {}", f.file, f.line, f.snippet));
  }
  for (const auto& s : scan->skipped) row.details.push_back("skipped: test/" + s);
  const std::string ran = fmt::format(
      "{} source files under {} (test/data excluded) scanned for atol/rtol literals ({} pattern)",
      scan->files_scanned, test.string(), kRuleHardcodedTolerance);
  if (found > 0) {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("{}: {} found (atol {}, rtol {}), first: {}", ran, found,
                            scan->tolerance_total.atol, scan->tolerance_total.rtol, row.details.front());
  } else if (scan->files_scanned == 0) {
    row.status = AuditStatus::kNotChecked;
    row.basis = ran + ": no source file found";
  } else {
    row.status = AuditStatus::kConformant;
    row.basis = ran + ": 0 found";
  }
  return row;
}

Result<AuditRow> audit_evidence_currency(const std::optional<fs::path>& evidence,
                                         const BuildInfo& build) {
  AuditRow row = audit_detail::make_row(kRowEvidenceCurrency);
  if (!evidence) {
    row.status = AuditStatus::kNotChecked;
    row.basis = fmt::format("no evidence artifact given (--evidence FILE); this build: source {} ({})",
                            build.source_commit, build.source_state);
    return row;
  }
  const std::string file = evidence->string();
  auto text = json::read_text_file(*evidence, std::uintmax_t{1} << 31);
  if (!text) return text.error();
  std::string commit;
  std::optional<bool> dirty;
  try {
    simdjson::dom::parser parser;
    const json::Node root = json::parse_document(parser, *text, file);
    const json::Node tool = root.at("tool");
    commit = std::string(tool.at("source_commit").nonempty_string());
    const json::Node d = tool.at("source_dirty");
    if (d.type_name() != "null") dirty = d.boolean();
  } catch (const json::Failure& f) {
    return f.error;
  }
  const bool same = commit == build.source_commit && build.source_commit != "unknown";
  row.details.push_back(fmt::format("artifact {}: tool.source_commit {}, tool.source_dirty {}", file,
                                    commit, dirty ? (*dirty ? "true" : "false") : "null (unknown)"));
  row.details.push_back(fmt::format("this build: source {} ({})", build.source_commit, build.source_state));
  std::vector<std::string> wrong;
  if (!same)
    wrong.push_back(fmt::format("produced at commit {}, this build is commit {}", commit, build.source_commit));
  if (!dirty)
    wrong.push_back("the artifact does not know whether its tree was clean (source_dirty null)");
  else if (*dirty)
    wrong.push_back("produced from a dirty tree (source_dirty true)");
  if (wrong.empty()) {
    row.status = AuditStatus::kConformant;
    row.basis = fmt::format("{}: tool.source_commit {} = this build's commit, source_dirty false", file, commit);
  } else {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("{}: {} (artifact commit {}, build commit {})", file, fmt::join(wrong, "; "),
                            commit, build.source_commit);
  }
  return row;
}

Result<std::vector<AuditRow>> audit_build(const BuildAuditInputs& in) {
  std::vector<AuditRow> rows;
  std::span<const Op* const> ops = in.ops.empty() ? all_ops() : in.ops;
  const std::unique_ptr<ReferenceEngine> reference = make_cpu_reference();
  auto gold = audit_gold_provenance(*in.tiny, in.tiny_catalogue, ops, *reference);
  if (!gold) return gold.error();
  rows.push_back(std::move(gold).value());
  rows.push_back(audit_det_gemm(*in.probe, in.backends));
  rows.push_back(audit_invariance_comparator(*in.tiny->contract));
  auto logprob = audit_logprob_dtype(*in.tiny, in.tiny_catalogue, in.backends, ops);
  if (!logprob) return logprob.error();
  rows.push_back(std::move(logprob).value());
  rows.push_back(audit_rms_norm_order(*in.probe, in.backends));
  rows.push_back(audit_tf32(*in.tiny->contract, in.tf32));
  auto tol = audit_tolerance_literals(in.project_root);
  if (!tol) return tol.error();
  rows.push_back(std::move(tol).value());
  auto ev = audit_evidence_currency(in.evidence, build_info());
  if (!ev) return ev.error();
  rows.push_back(std::move(ev).value());
  return rows;
}

}  // namespace ws1

// `policy` (spec §2.1) and `comparison_roles` (spec §1, §8).
#include <algorithm>

#include "parse.hpp"

namespace ws1::contract_detail {
namespace {

constexpr std::string_view kDTypeNames = "float32, bfloat16, float16, float8";
constexpr std::string_view kStatusNames = "applicable, optional, out_of_scope";

ContractDType dtype_word(const Node& n) {
  return n.word(contract_dtype_from_name, "dtype", kDTypeNames);
}

// fp8 / fp16 are either a status string or an object with a `status` (and a free `note`).
RowStatus precision_status(const Node& n) {
  if (n.element().is_string()) return n.word(row_status_from_name, "status", kStatusNames);
  if (!n.element().is_object()) n.fail("must be a status string or an object with a status");
  return n.at("status").word(row_status_from_name, "status", kStatusNames);
}

std::string on_off(const Node& n) {
  const std::string_view s = n.string();
  if (s != "disabled" && s != "enabled")
    n.fail("unknown TF32 setting \"" + std::string(s) + "\" (known: disabled, enabled)");
  return std::string(s);
}

std::vector<std::string> unique_strings(const Node& n) {
  std::vector<std::string> out;
  const auto items = n.items();
  for (const auto& item : items) {
    std::string s(item.nonempty_string());
    if (std::find(out.begin(), out.end(), s) != out.end()) item.fail("repeats \"" + s + "\"");
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

PrecisionPolicy parse_policy(const Node& n) {
  PrecisionPolicy p;
  p.execution_dtype = dtype_word(n.at("execution_dtype"));
  p.accumulation_dtype = dtype_word(n.at("accumulation_dtype"));
  p.reference_dtype = dtype_word(n.at("reference_dtype"));
  // The standard fixes these (spec §2.1, §3.1): a contract that says otherwise is not a WS1
  // contract, and a BF16 gold is exactly the §9.3 defect.
  if (p.reference_dtype != ContractDType::kFloat32)
    n.at("reference_dtype").fail("must be float32 (spec §3.1: the reference is computed and kept in FP32)");
  if (p.accumulation_dtype != ContractDType::kFloat32)
    n.at("accumulation_dtype").fail("must be float32 (spec §2.1; per-op exceptions are declared, not global)");

  // output_dtype changes what a candidate must produce: strict, no unknown keys.
  const Node out = n.at("output_dtype");
  out.allow_only({"default", "logprob_aggregates"});
  const Node def = out.at("default");
  p.output_dtype_default_spelling = std::string(def.string());
  if (p.output_dtype_default_spelling == "execution") {
    p.output_dtype_default = p.execution_dtype;
  } else {
    p.output_dtype_default = def.word(contract_dtype_from_name, "output dtype",
                                      "execution, float32, bfloat16, float16, float8");
  }
  p.logprob_aggregates_dtype = dtype_word(out.at("logprob_aggregates"));
  if (p.logprob_aggregates_dtype != ContractDType::kFloat32)
    out.at("logprob_aggregates").fail("must be float32 (spec §2.1, §9.5)");

  if (auto fp8 = n.find("fp8")) p.fp8_status = precision_status(*fp8);
  if (auto fp16 = n.find("fp16")) p.fp16_status = precision_status(*fp16);

  const Node tf32 = n.at("tf32");
  tf32.allow_only({"reference", "candidate_execution", "policy"});
  p.tf32_reference = on_off(tf32.at("reference"));
  p.tf32_candidate_execution = on_off(tf32.at("candidate_execution"));
  if (auto text = tf32.find("policy")) p.tf32_policy = std::string(text->string());

  const Node profiles = n.at("backend_profiles");
  const auto names = unique_strings(profiles);
  if (names.empty()) profiles.fail("must list at least one backend profile");
  const Node contracts = n.at("backend_profile_contracts");
  for (const auto& [name, entry] : contracts.fields())
    if (std::find(names.begin(), names.end(), name) == names.end())
      entry.fail("profile not listed in policy.backend_profiles");
  for (const auto& name : names) {
    auto entry = contracts.find(name);
    if (!entry)
      contracts.fail_at(name, "missing contract for a profile in policy.backend_profiles");
    // Further keys of a profile contract are upstream's to add; backend_family is what we use.
    p.backend_profiles.push_back(
        {name, std::string(entry->at("backend_family").nonempty_string())});
  }

  const Node relax = n.at("backend_private_tolerance_relaxation");
  p.backend_private_tolerance_relaxation = relax.boolean();
  if (p.backend_private_tolerance_relaxation)
    relax.fail("must be false: spec §2.1 permits no backend-private tolerance relaxation");
  return p;
}

ComparisonRoles parse_roles(const Node& n) {
  ComparisonRoles r;
  r.allowed = unique_strings(n.at("allowed"));
  const Node forbidden = n.at("forbidden");
  r.forbidden = unique_strings(forbidden);
  const auto forbidden_items = forbidden.items();
  for (std::size_t i = 0; i < r.forbidden.size(); ++i)
    if (std::find(r.allowed.begin(), r.allowed.end(), r.forbidden[i]) != r.allowed.end())
      forbidden_items[i].fail("role \"" + r.forbidden[i] +
                              "\" is also in comparison_roles.allowed");

  const Node kinds = n.at("by_report_kind");
  for (const auto& [kind, entry] : kinds.fields()) {
    if (!judgment_from_name(kind) && kind != kParityReportKind)
      entry.fail(
          "unknown report kind (known: forward_accuracy, forward_invariance, "
          "gradient_accuracy, gradient_invariance, train_infer_logprob_parity)");
    entry.allow_only({"comparison_lhs_role", "comparison_rhs_role"});
    RolePair pair;
    for (auto [key, slot] : {std::pair{"comparison_lhs_role", &pair.lhs},
                             std::pair{"comparison_rhs_role", &pair.rhs}}) {
      const Node role = entry.at(key);
      *slot = std::string(role.string());
      if (std::find(r.forbidden.begin(), r.forbidden.end(), *slot) != r.forbidden.end())
        role.fail("role \"" + *slot + "\" is forbidden by comparison_roles.forbidden");
      if (std::find(r.allowed.begin(), r.allowed.end(), *slot) == r.allowed.end())
        role.fail("role \"" + *slot + "\" is not in comparison_roles.allowed");
    }
    r.by_report_kind[kind] = pair;
  }
  std::vector<std::string_view> required{kParityReportKind};
  for (Judgment j : all_judgments()) required.push_back(contract_name(j));
  for (auto kind : required)
    if (!r.by_report_kind.count(std::string(kind)))
      kinds.fail_at(kind, "missing required report kind");
  return r;
}

}  // namespace ws1::contract_detail

// Malformed contracts fail closed with one `file: json.path: problem` line. Each case takes our
// contract, applies one edit, writes it under the case's name and checks the exact json path.
// Values used in edits are read from the contract itself (no tolerance literals).
#include <catch2/catch.hpp>
#include <functional>

#include "contract_test_support.hpp"
#include "ws1/contract.hpp"

namespace {

using ws1::test::ojson;
using Ptr = ojson::json_pointer;

const std::string& pristine_text() {
  static const std::string text = ws1::test::read_text(ws1::test::our_contract());
  return text;
}
const ojson& pristine() {
  static const ojson doc = ojson::parse(pristine_text());
  return doc;
}
const ojson& val(const std::string& ptr) { return pristine()[Ptr(ptr)]; }
double num(const std::string& ptr) { return val(ptr).get<double>(); }

using Make = std::function<std::string()>;

Make edit(std::function<void(ojson&)> f) {
  return [f] {
    ojson d = pristine();
    f(d);
    return d.dump(2);
  };
}
Make set(std::string ptr, ojson v) {
  return edit([ptr, v](ojson& d) { d[Ptr(ptr)] = v; });
}
Make erase(std::string ptr) {
  return edit([ptr](ojson& d) {
    const Ptr p(ptr);
    d[p.parent_pointer()].erase(p.back());
  });
}
// Text edits, for what a JSON library cannot produce (duplicates, bad literals).
Make replace_first(std::string from, std::string to) {
  return [from, to] {
    std::string t = pristine_text();
    const auto at = t.find(from);
    REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
}

struct Case {
  std::string name;
  Make make;
  std::string where;
  std::string problem;  // a substring of the problem
};

const std::string FA = "/judgments/forward_accuracy/by_op_class";
const std::string FI = "/judgments/forward_invariance/by_op_class";
const std::string GA = "/judgments/gradient_accuracy/by_op_class";
const std::string GI = "/judgments/gradient_invariance/by_op_class";
const std::string CH = "/chain_logprob_aggregates";
const std::string DE = "/ws1check_declarations";

const ojson& v3_pristine();

std::vector<Case> cases() {
  std::vector<Case> c;
  // -- Not JSON / not one document.
  c.push_back({"not_json", [] { return pristine_text().substr(0, pristine_text().size() / 2); },
               "$", "not valid JSON"});
  c.push_back(
      {"trailing_content", [] { return pristine_text() + "\n{}\n"; }, "$", "not valid JSON"});
  c.push_back({"number_out_of_range", replace_first("\"atol\": ", "\"atol\": 1e999, \"x\": "), "$",
               "not valid JSON"});
  c.push_back({"root_array", [] { return std::string("[]"); }, "$", "must be a JSON object"});
  // -- Duplicate keys at any depth.
  c.push_back({"duplicate_in_row",
               replace_first("\"status\": \"applicable\", ",
                             "\"status\": \"applicable\", \"status\": \"applicable\", "),
               "judgments.forward_accuracy.by_op_class.elementwise.float32.status",
               "duplicate key"});
  c.push_back({"duplicate_top_level", replace_first("{\n", "{\n  \"policy\": {},\n"), "policy",
               "duplicate key"});
  // -- Top level and version.
  c.push_back({"missing_policy", erase("/policy"), "policy", "missing required key"});
  c.push_back(
      {"unknown_version", set("/version", "ws1-c1-v9"), "version", "unknown contract version"});
  c.push_back({"version_number", set("/version", 2), "version", "must be a string"});
  c.push_back({"ws1check_namespace_typo", set("/ws1check_declaration", ojson::object()),
               "ws1check_declaration", "unknown key in ws1check's namespace"});
  // -- Judgment tables.
  c.push_back({"missing_judgment", erase("/judgments/gradient_invariance"),
               "judgments.gradient_invariance", "missing required judgment"});
  c.push_back({"unknown_judgment",
               set("/judgments/forward_accurracy", val("/judgments/forward_accuracy")),
               "judgments.forward_accurracy", "unknown judgment"});
  c.push_back({"unknown_op_class", set(FA + "/softmax", val(FA + "/attention")),
               "judgments.forward_accuracy.by_op_class.softmax", "unknown op class"});
  c.push_back({"unknown_dtype", set(FA + "/reduction/float64", val(FA + "/reduction/float32")),
               "judgments.forward_accuracy.by_op_class.reduction.float64", "unknown dtype"});
  c.push_back({"unknown_status", set(GA + "/logprob/float16/status", "maybe"),
               "judgments.gradient_accuracy.by_op_class.logprob.float16.status", "unknown status"});
  c.push_back({"unknown_mode", set(FA + "/attention/bfloat16/mode", "ulp"),
               "judgments.forward_accuracy.by_op_class.attention.bfloat16.mode", "unknown mode"});
  c.push_back({"atol_as_string",
               set(FA + "/reduction/bfloat16/atol", val(FA + "/reduction/bfloat16/atol").dump()),
               "judgments.forward_accuracy.by_op_class.reduction.bfloat16.atol",
               "must be a number"});
  c.push_back({"negative_rtol",
               set(GA + "/elementwise/bfloat16/rtol", -num(GA + "/elementwise/bfloat16/rtol")),
               "judgments.gradient_accuracy.by_op_class.elementwise.bfloat16.rtol",
               "must be >= 0"});
  c.push_back({"atol_null", set(FA + "/logprob/float32/atol", nullptr),
               "judgments.forward_accuracy.by_op_class.logprob.float32.atol",
               "must be a number, got null"});
  c.push_back({"bitwise_row_with_rtol",
               set(FI + "/elementwise/float32/rtol", val(FA + "/elementwise/float32/rtol")),
               "judgments.forward_invariance.by_op_class.elementwise.float32.rtol",
               "a bitwise row must have rtol 0"});
  c.push_back({"accuracy_row_bitwise_with_atol", set(FA + "/reduction/bfloat16/mode", "bitwise"),
               "judgments.forward_accuracy.by_op_class.reduction.bfloat16.atol",
               "a bitwise row must have atol 0"});
  c.push_back({"invariance_row_tolerance", set(GI + "/logprob/bfloat16/mode", "tolerance"),
               "judgments.gradient_invariance.by_op_class.logprob.bfloat16.mode",
               "an invariance row must be \"bitwise\""});
  c.push_back({"invariance_default_tolerance",
               set("/judgments/forward_invariance/default_mode", "tolerance"),
               "judgments.forward_invariance.default_mode", "must default to \"bitwise\""});
  c.push_back({"missing_required_row", erase(FA + "/attention/bfloat16"),
               "judgments.forward_accuracy.by_op_class.attention.bfloat16",
               "missing required row"});
  c.push_back({"required_row_optional", set(GA + "/reduction/float32/status", "optional"),
               "judgments.gradient_accuracy.by_op_class.reduction.float32.status",
               "a required row must be \"applicable\""});
  c.push_back({"missing_required_class", erase(GA + "/logprob"),
               "judgments.gradient_accuracy.by_op_class.logprob", "missing required op class"});
  c.push_back({"unknown_key_in_row",
               set(FA + "/elementwise/bfloat16/atoll", val(FA + "/elementwise/bfloat16/atol")),
               "judgments.forward_accuracy.by_op_class.elementwise.bfloat16.atoll", "unknown key"});
  c.push_back({"out_of_scope_partial_tolerance",
               set(FA + "/elementwise/float8/atol", val(FA + "/elementwise/float32/atol")),
               "judgments.forward_accuracy.by_op_class.elementwise.float8.mode",
               "missing required key"});
  c.push_back({"row_not_object", set(FA + "/elementwise/float32", "applicable"),
               "judgments.forward_accuracy.by_op_class.elementwise.float32",
               "must be an object, got string"});
  c.push_back({"unknown_arch",
               set("/judgments/forward_accuracy/arch_overrides/hopper", ojson::object()),
               "judgments.forward_accuracy.arch_overrides.hopper", "unknown architecture name"});
  c.push_back({"arch_override_invariance_tolerance",
               set("/judgments/gradient_invariance/arch_overrides/sm90/reduction/bfloat16",
                   val(GA + "/reduction/bfloat16")),
               "judgments.gradient_invariance.arch_overrides.sm90.reduction.bfloat16.mode",
               "an invariance row must be \"bitwise\""});
  c.push_back({"note_not_string", set("/judgments/forward_accuracy/calibration_note", 1),
               "judgments.forward_accuracy.calibration_note", "must be a string"});
  // -- Chain-level parity.
  c.push_back(
      {"clip_decreasing",
       set(CH + "/default_clip_interval", ojson::array({val(CH + "/default_clip_interval/1"),
                                                        val(CH + "/default_clip_interval/0")})),
       "chain_logprob_aggregates.default_clip_interval[1]", "must be greater than the low end"});
  c.push_back(
      {"clip_excludes_one",
       set(CH + "/default_clip_interval", ojson::array({val(CH + "/default_clip_interval/1"),
                                                        2 * num(CH + "/default_clip_interval/1")})),
       "chain_logprob_aggregates.default_clip_interval", "must contain 1"});
  c.push_back({"clip_equal_ends",
               set(CH + "/default_clip_interval/1", val(CH + "/default_clip_interval/0")),
               "chain_logprob_aggregates.default_clip_interval[1]",
               "must be greater than the low end"});
  c.push_back({"clip_three_values", edit([](ojson& d) {
                 d[Ptr(CH + "/default_clip_interval")].push_back(
                     val(CH + "/default_clip_interval/1"));
               }),
               "chain_logprob_aggregates.default_clip_interval", "must be a pair"});
  c.push_back({"clip_negative",
               set(CH + "/default_clip_interval/0", -num(CH + "/default_clip_interval/0")),
               "chain_logprob_aggregates.default_clip_interval[0]", "must be > 0"});
  c.push_back({"clip_string",
               set(CH + "/default_clip_interval/1", val(CH + "/default_clip_interval/1").dump()),
               "chain_logprob_aggregates.default_clip_interval[1]", "must be a number"});
  c.push_back({"metric_threshold_negative",
               set(CH + "/metrics/approx_kl0/by_execution_dtype/bfloat16/threshold",
                   -num(CH + "/metrics/approx_kl0/by_execution_dtype/bfloat16/threshold")),
               "chain_logprob_aggregates.metrics.approx_kl0.by_execution_dtype.bfloat16.threshold",
               "must be >= 0"});
  c.push_back({"metric_missing", erase(CH + "/metrics/clipfrac0"),
               "chain_logprob_aggregates.metrics.clipfrac0", "missing required chain metric"});
  c.push_back({"metric_unknown", set(CH + "/metrics/p99_dlogp", val(CH + "/metrics/max_abs_dlogp")),
               "chain_logprob_aggregates.metrics.p99_dlogp", "unknown chain metric"});
  c.push_back({"metric_formula_changed", set(CH + "/metrics/approx_kl0/formula", "mean(dlogp)"),
               "chain_logprob_aggregates.metrics.approx_kl0.formula",
               "not the one ws1check implements"});
  c.push_back({"metric_threshold_missing_dtype",
               erase(CH + "/metrics/max_abs_dlogp/by_execution_dtype/bfloat16"),
               "chain_logprob_aggregates.metrics.max_abs_dlogp.by_execution_dtype.bfloat16",
               "missing required threshold"});
  c.push_back({"gated_metric_without_entry", edit([](ojson& d) {
                 d[Ptr(CH + "/sole_chain_level_logprob_metrics")].push_back("mean_abs_dlogp");
               }),
               "chain_logprob_aggregates.sole_chain_level_logprob_metrics[3]",
               "has no entry in metrics"});
  c.push_back({"dlogp_reversed",
               set(CH + "/dlogp_definition", "comparison_rhs_logp - comparison_lhs_logp"),
               "chain_logprob_aggregates.dlogp_definition", "unknown dlogp definition"});
  c.push_back({"nan_policy_chain", set(CH + "/nan_inf_policy", "ignore"),
               "chain_logprob_aggregates.nan_inf_policy", "unknown NaN/Inf policy"});
  // -- Policy and roles.
  c.push_back({"relaxation_true", set("/policy/backend_private_tolerance_relaxation", true),
               "policy.backend_private_tolerance_relaxation", "must be false"});
  c.push_back({"profile_without_contract",
               edit([](ojson& d) { d[Ptr("/policy/backend_profiles")].push_back("rocm_bf16"); }),
               "policy.backend_profile_contracts.rocm_bf16", "missing contract"});
  c.push_back({"output_dtype_unknown_key", set("/policy/output_dtype/attention_lse", "float32"),
               "policy.output_dtype.attention_lse", "unknown key"});
  c.push_back({"execution_dtype_unknown", set("/policy/execution_dtype", "bf16"),
               "policy.execution_dtype", "unknown dtype"});
  c.push_back(
      {"role_forbidden",
       set("/comparison_roles/by_report_kind/forward_accuracy/comparison_rhs_role", "baseline"),
       "comparison_roles.by_report_kind.forward_accuracy.comparison_rhs_role", "forbidden"});
  c.push_back({"missing_report_kind",
               erase("/comparison_roles/by_report_kind/train_infer_logprob_parity"),
               "comparison_roles.by_report_kind.train_infer_logprob_parity",
               "missing required report kind"});
  // -- Legacy blocks must not contradict the judgments (spec §9.2).
  c.push_back(
      {"legacy_accuracy_disagrees",
       set("/accuracy/default/reduction/bfloat16/atol", val(GA + "/reduction/bfloat16/atol")),
       "accuracy.default.reduction.bfloat16.atol",
       "contradicts judgments.forward_accuracy.by_op_class.reduction.bfloat16.atol"});
  c.push_back({"legacy_batch_invariance_nonzero",
               set("/batch_invariance/rtol", val(FA + "/elementwise/float32/rtol")),
               "batch_invariance.rtol", "must be 0"});
  // -- ws1check_declarations.
  c.push_back({"decl_format", set(DE + "/format", "v0"), "ws1check_declarations.format",
               "unknown declarations format"});
  c.push_back(
      {"decl_unknown_key", set(DE + "/extra", true), "ws1check_declarations.extra", "unknown key"});
  // An Option B exception (a user's choice; the shipped contract declares none) with one field
  // broken at a time.
  const auto with_exception = [](const std::string& field, ojson v) {
    return edit([field, v](ojson& d) {
      ojson e = {{"leaf_accumulation_dtype", "float32"}, {"k_tree_leaf", 32},
                 {"split", "mid = lo + (hi-lo)/2"}, {"merge_dtype", "bfloat16"},
                 {"output_dtype", "bfloat16"}, {"rationale", "spec 9.2 Option B"}};
      if (field == "rename") {
        d[Ptr(DE + "/accumulation_exceptions/gemm")] = e;
        return;
      }
      e[field] = v;
      d[Ptr(DE + "/accumulation_exceptions/det_gemm")] = e;
    });
  };
  const std::string EX = "ws1check_declarations.accumulation_exceptions.det_gemm";
  c.push_back({"k_tree_leaf_zero", with_exception("k_tree_leaf", 0), EX + ".k_tree_leaf", "positive integer"});
  c.push_back({"k_tree_leaf_fraction", with_exception("k_tree_leaf", 32.5), EX + ".k_tree_leaf", "must be an integer"});
  c.push_back({"k_tree_leaf_string", with_exception("k_tree_leaf", "32"), EX + ".k_tree_leaf",
               "must be an integer, got string"});
  c.push_back({"split_unknown", with_exception("split", "left fold"), EX + ".split", "unknown split"});
  c.push_back({"exception_unknown_op", with_exception("rename", nullptr),
               "ws1check_declarations.accumulation_exceptions.gemm", "unknown op"});
  c.push_back({"exception_output_contradicts", with_exception("output_dtype", "float32"), EX + ".output_dtype",
               "contradicts policy.output_dtype.default"});
  // det_gemm_k_split.
  const std::string KS = DE + "/det_gemm_k_split";
  c.push_back({"k_shards_zero", set(KS + "/shards", 0), "ws1check_declarations.det_gemm_k_split.shards",
               "from 1 to 64"});
  c.push_back({"k_shards_fraction", set(KS + "/shards", 2.5), "ws1check_declarations.det_gemm_k_split.shards",
               "must be an integer"});
  c.push_back({"k_split_layout", set(KS + "/shard_layout", "strided"),
               "ws1check_declarations.det_gemm_k_split.shard_layout", "unknown shard layout"});
  c.push_back({"k_split_bf16_partials", set(KS + "/partial_dtype", "bfloat16"),
               "ws1check_declarations.det_gemm_k_split.partial_dtype", "unknown partial dtype"});
  c.push_back({"k_split_missing_rationale", erase(KS + "/rationale"),
               "ws1check_declarations.det_gemm_k_split.rationale", "missing required key"});
  c.push_back({"rounding_order_unknown", set(DE + "/rms_norm_rounding/order", "fast"),
               "ws1check_declarations.rms_norm_rounding.order", "unknown rounding order"});
  c.push_back({"rounding_alternative_repeats_order",
               set(DE + "/rms_norm_rounding/alternatives/0", "kernel"),
               "ws1check_declarations.rms_norm_rounding.alternatives[0]", "repeats \"kernel\""});
  c.push_back({"rounding_applies_to_unknown_op",
               set(DE + "/rms_norm_rounding/applies_to/1", "layer_norm"),
               "ws1check_declarations.rms_norm_rounding.applies_to[1]", "unknown op"});
  c.push_back({"nan_policy_unknown", set(DE + "/invariance/nan_policy", "ignore"),
               "ws1check_declarations.invariance.nan_policy", "unknown NaN policy"});
  c.push_back({"signed_zero_equal", set(DE + "/invariance/signed_zero", "equal"),
               "ws1check_declarations.invariance.signed_zero", "unknown signed-zero rule"});
  c.push_back({"math_mode_unknown", set(DE + "/tf32/cublas_math_mode", "tf32"),
               "ws1check_declarations.tf32.cublas_math_mode", "unknown cuBLAS math mode"});
  c.push_back({"tf32_declared_but_policy_enables",
               set("/policy/tf32/candidate_execution", "enabled"),
               "ws1check_declarations.tf32.scope", "policy.tf32 enables it"});
  c.push_back({"logprob_output_contradicts", set(DE + "/output_dtypes/logprob", "bfloat16"),
               "ws1check_declarations.output_dtypes.logprob",
               "contradicts policy.output_dtype.logprob_aggregates"});
  c.push_back({"op_map_unknown_op", set(DE + "/op_classes/rmsnorm", "reduction"),
               "ws1check_declarations.op_classes.rmsnorm", "unknown op"});
  c.push_back({"op_map_unknown_class", set(DE + "/op_classes/det_gemm", "gemm"),
               "ws1check_declarations.op_classes.det_gemm", "unknown op class"});
  // -- judgment_rules belongs to ws1-c1-v3 only.
  c.push_back({"v2_with_judgment_rules", set("/judgment_rules", v3_pristine()["judgment_rules"]), "judgment_rules",
               "a ws1-c1-v3 block"});
  return c;
}

// Malformed ws1-c1-v3 judgment rules: the same, starting from the shipped v3 contract.
const ojson& v3_pristine() {
  static const ojson doc = ojson::parse(ws1::test::read_text(ws1::test::source_root() / "contracts" / "ws1-c1-v3.json"));
  return doc;
}
Make edit_v3(std::function<void(ojson&)> f) {
  return [f] {
    ojson d = v3_pristine();
    f(d);
    return d.dump(2);
  };
}
Make set_v3(std::string ptr, ojson v) {
  return edit_v3([ptr, v](ojson& d) { d[Ptr(ptr)] = v; });
}

std::vector<Case> v3_cases() {
  const std::string SF = "/judgment_rules/gradient_scale_free";
  const std::string sf = "judgment_rules.gradient_scale_free";
  std::vector<Case> c;
  c.push_back({"v3_without_rules", edit_v3([](ojson& d) { d.erase("judgment_rules"); }), "judgment_rules",
               "required in ws1-c1-v3"});
  c.push_back({"v3_rules_format", set_v3("/judgment_rules/format", "ws1-judgment-rules-v9"), "judgment_rules.format",
               "unknown format"});
  c.push_back({"v3_unknown_rule", set_v3("/judgment_rules/forward_relative", ojson::object()),
               "judgment_rules.forward_relative", "unknown key"});
  c.push_back({"v3_scale_free_definition", set_v3(SF + "/definition", "|c - r| <= atol_rel * rms(r)"),
               sf + ".definition", "not the one ws1check implements"});
  c.push_back({"v3_scale_free_unknown_key", set_v3(SF + "/atol_rel", 0.5), sf + ".atol_rel", "unknown key"});
  c.push_back({"v3_scale_free_no_dtype", set_v3(SF + "/atol_rel_by_dtype", ojson::object()),
               sf + ".atol_rel_by_dtype", "at least one dtype"});
  c.push_back({"v3_scale_free_unknown_dtype", set_v3(SF + "/atol_rel_by_dtype/bfloat8", 0.5),
               sf + ".atol_rel_by_dtype.bfloat8", "unknown dtype"});
  c.push_back({"v3_scale_free_vacuous", set_v3(SF + "/atol_rel_by_dtype/bfloat16", 1), sf + ".atol_rel_by_dtype.bfloat16",
               "an all-zero candidate would pass"});
  c.push_back({"v3_scale_free_negative", set_v3(SF + "/atol_rel_by_dtype/bfloat16", -0.5),
               sf + ".atol_rel_by_dtype.bfloat16", "must be >= 0"});
  c.push_back({"v3_provenance_mode", set_v3(SF + "/provenance/mode", "guess"), sf + ".provenance.mode",
               "unknown mode of adoption"});
  const std::string RN = "/judgment_rules/relative_to_naive";
  const std::string rn = "judgment_rules.relative_to_naive";
  c.push_back({"v3_relative_definition", set_v3(RN + "/definition", "max|c - r| <= factor * max|n - r|"),
               rn + ".definition", "not the one ws1check implements"});
  c.push_back({"v3_relative_engine", set_v3(RN + "/engine", "torch_eager"), rn + ".engine", "unknown engine"});
  c.push_back({"v3_relative_factor_below_one", set_v3(RN + "/factor_by_judgment/forward_accuracy", 0.5),
               rn + ".factor_by_judgment.forward_accuracy", "must be >= 1"});
  c.push_back({"v3_relative_invariance_factor", set_v3(RN + "/factor_by_judgment/forward_invariance", 2),
               rn + ".factor_by_judgment.forward_invariance", "not an accuracy judgment"});
  c.push_back({"v3_relative_no_floor", edit_v3([RN](ojson& d) { d[Ptr(RN)].erase("floor_steps"); }), rn + ".floor_steps",
               "missing required key"});
  const std::string BI = "/judgment_rules/bias";
  const std::string bi = "judgment_rules.bias";
  c.push_back({"v3_bias_definition", set_v3(BI + "/definition", "|mean(c - r)| <= max_mean"), bi + ".definition",
               "not the one ws1check implements"});
  c.push_back({"v3_bias_cannot_fail", set_v3(BI + "/max_mean_by_dtype/bfloat16", 1), bi + ".max_mean_by_dtype.bfloat16",
               "a mean of signs never exceeds 1"});
  c.push_back({"v3_bias_no_dtype", set_v3(BI + "/max_mean_by_dtype", ojson::object()), bi + ".max_mean_by_dtype",
               "at least one dtype"});
  c.push_back({"v3_bias_small_z", set_v3(BI + "/z", 0.5), bi + ".z", "must be >= 1"});
  c.push_back({"v3_bias_no_z", edit_v3([BI](ojson& d) { d[Ptr(BI)].erase("z"); }), bi + ".z", "missing required key"});
  c.push_back({"v3_bias_unknown_key", set_v3(BI + "/judgments", ojson::array()), bi + ".judgments", "unknown key"});
  c.push_back({"v3_measured_without_commit", edit_v3([SF](ojson& d) { d[Ptr(SF + "/provenance")].erase("commit"); }),
               sf + ".provenance.commit", "a measured calibration names its commit"});
  return c;
}

void check_error(const ws1::Result<ws1::Contract>& r, const std::string& file,
                 const std::string& where, const std::string& problem) {
  REQUIRE_FALSE(r.ok());
  const ws1::Error& e = r.error();
  INFO(e.message());
  CHECK(e.code == ws1::ExitCode::kBadInput);
  CHECK(e.file == file);
  CHECK(e.where == where);
  CHECK(e.problem.find(problem) != std::string::npos);
  CHECK(e.message() == file + ": " + where + ": " + e.problem);
  CHECK(e.message().find('\n') == std::string::npos);
}

}  // namespace

TEST_CASE("the unedited contract loads (baseline of the malformed cases)", "[contract][bad]") {
  const auto p = ws1::test::write_scratch("baseline", pristine().dump(2));
  const auto r = ws1::load_contract(p);
  INFO((r.ok() ? std::string() : r.error().message()));
  CHECK(r.ok());
}

TEST_CASE("malformed contracts: one error naming the file and the json path", "[contract][bad]") {
  const auto all = cases();
  CHECK(all.size() >= 20);
  for (const auto& c : all) {
    DYNAMIC_SECTION(c.name) {
      const auto p = ws1::test::write_scratch(c.name, c.make());
      check_error(ws1::load_contract(p), p.string(), c.where, c.problem);
    }
  }
}

TEST_CASE("malformed ws1-c1-v3 judgment rules: one error naming the file and the json path", "[contract][bad]") {
  const auto baseline = ws1::test::write_scratch("v3_baseline", v3_pristine().dump(2));
  const auto ok = ws1::load_contract(baseline);
  INFO((ok.ok() ? std::string() : ok.error().message()));
  REQUIRE(ok.ok());
  for (const auto& c : v3_cases()) {
    DYNAMIC_SECTION(c.name) {
      const auto p = ws1::test::write_scratch(c.name, c.make());
      check_error(ws1::load_contract(p), p.string(), c.where, c.problem);
    }
  }
}

TEST_CASE("malformed contract files in test/data/contracts/bad", "[contract][bad]") {
  struct Static {
    const char* file;
    const char* where;
    const char* problem;
  };
  const Static files[] = {
      {"empty.json", "$", "not valid JSON"},
      {"truncated.json", "$", "not valid JSON"},
      {"duplicate_version.json", "version", "duplicate key"},
      {"array_root.json", "$", "must be a JSON object"},
      {"only_version.json", "policy", "missing required key"},
      {"invalid_utf8.json", "$", "not valid JSON"},
  };
  for (const auto& s : files) {
    DYNAMIC_SECTION(s.file) {
      const auto p = ws1::test::test_data() / "contracts" / "bad" / s.file;
      REQUIRE(std::filesystem::exists(p));
      check_error(ws1::load_contract(p), p.string(), s.where, s.problem);
    }
  }
}

TEST_CASE("unreadable contract paths", "[contract][bad]") {
  const auto missing = ws1::test::scratch_dir() / "does-not-exist.json";
  const auto r = ws1::load_contract(missing);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().file == missing.string());
  CHECK(r.error().problem.find("cannot open") != std::string::npos);

  const auto dir = ws1::load_contract(ws1::test::scratch_dir());
  REQUIRE_FALSE(dir.ok());
  CHECK(dir.error().file == ws1::test::scratch_dir().string());
  CHECK(dir.error().problem.find("not a regular file") != std::string::npos);
}

TEST_CASE("unknown keys are accepted where upstream extends the format", "[contract]") {
  // Top level, policy, judgment tables, metric objects and profile contracts are extensible.
  ojson d = pristine();
  d["release_notes"] = "free text";
  d["policy"]["fp4"] = "out_of_scope";
  d["judgments"]["forward_accuracy"]["calibration_run"] = "h20-2026-09";
  d["chain_logprob_aggregates"]["metrics"]["clipfrac0"]["note"] = "free text";
  d["policy"]["backend_profile_contracts"]["cuda_bf16"]["min_sm"] = "sm80";
  const auto p = ws1::test::write_scratch("extensible_keys", d.dump(2));
  const auto r = ws1::load_contract(p);
  INFO((r.ok() ? std::string() : r.error().message()));
  CHECK(r.ok());
}

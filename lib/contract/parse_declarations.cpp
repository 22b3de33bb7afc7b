// `ws1check_declarations`: ws1check's answers to the spec's open items (DESIGN §3), carried in
// the contract so the evidence and the audit can cite them. Our own format, so strict: every
// sub-block is optional (absent = undeclared), but a sub-block that is present is complete and
// has no unknown keys.
#include <algorithm>
#include <limits>

#include "parse.hpp"

namespace ws1::contract_detail {
namespace {

constexpr std::string_view kDTypeNames = "float32, bfloat16, float16, float8";
constexpr std::string_view kMidSplit = "mid = lo + (hi-lo)/2";

ContractDType dtype_word(const Node& n) {
  return n.word(contract_dtype_from_name, "dtype", kDTypeNames);
}

std::string known_op(const Node& n) {
  std::string op(n.string());
  if (!spec_op_class(op))
    n.fail("unknown op \"" + op + "\" (known: the 13 ops of spec §2.3, e.g. rms_norm, det_gemm)");
  return op;
}

void expect_word(const Node& n, std::string_view only, std::string_view what) {
  if (n.string() != only)
    n.fail("unknown " + std::string(what) + " \"" + std::string(n.string()) +
           "\" (known: " + std::string(only) + ")");
}

std::optional<std::string> optional_note(const Node& n) {
  if (auto v = n.find("note")) return std::string(v->string());
  return std::nullopt;
}

std::map<std::string, OpClass> parse_op_classes(const Node& n) {
  std::map<std::string, OpClass> out;
  for (const auto& [op, cls] : n.fields()) {
    if (!spec_op_class(op)) cls.fail("unknown op (known: the 13 ops of spec §2.3)");
    out[op] = cls.word(op_class_from_name, "op class",
                       "elementwise, reduction, attention, logprob, mhc_controller");
  }
  return out;
}

ContractDType policy_output(const PrecisionPolicy& p, OpClass c) {
  return c == OpClass::kLogprob ? p.logprob_aggregates_dtype : p.output_dtype_default;
}

std::string policy_output_source(OpClass c) {
  return c == OpClass::kLogprob ? "policy.output_dtype.logprob_aggregates"
                                : "policy.output_dtype.default";
}

std::map<OpClass, ContractDType> parse_output_dtypes(const Node& n, const PrecisionPolicy& p) {
  std::map<OpClass, ContractDType> out;
  for (const auto& [class_name, value] : n.fields()) {
    const auto c = op_class_from_name(class_name);
    if (!c)
      value.fail(
          "unknown op class (known: elementwise, reduction, attention, logprob, mhc_controller)");
    const ContractDType t = value.string() == "execution"
                                ? p.execution_dtype
                                : value.word(contract_dtype_from_name, "output dtype",
                                             "execution, float32, bfloat16, float16, float8");
    // Two places state an output dtype; they must agree (spec §9.2, §9.5).
    if (t != policy_output(p, *c))
      value.fail(std::string(contract_name(t)) + " contradicts " + policy_output_source(*c) +
                 " = " + std::string(contract_name(policy_output(p, *c))));
    out[*c] = t;
  }
  return out;
}

AccumulationException parse_exception(const Node& n, OpClass op_class, const PrecisionPolicy& p) {
  n.allow_only({"leaf_accumulation_dtype", "k_tree_leaf", "split", "merge_dtype", "output_dtype",
                "rationale"});
  AccumulationException e;
  e.leaf_accumulation_dtype = dtype_word(n.at("leaf_accumulation_dtype"));
  const Node leaf = n.at("k_tree_leaf");
  e.k_tree_leaf = leaf.integer();
  if (e.k_tree_leaf <= 0 || e.k_tree_leaf > std::numeric_limits<std::int32_t>::max())
    leaf.fail("must be a positive integer below 2^31, got " + std::to_string(e.k_tree_leaf));
  const Node split = n.at("split");
  e.split = std::string(split.string());
  if (!same_ignoring_spaces(e.split, kMidSplit))
    split.fail("unknown split \"" + e.split + "\" (known: \"" + std::string(kMidSplit) + "\")");
  e.merge_dtype = dtype_word(n.at("merge_dtype"));
  const Node output = n.at("output_dtype");
  e.output_dtype = dtype_word(output);
  if (e.output_dtype != policy_output(p, op_class))
    output.fail(std::string(contract_name(e.output_dtype)) + " contradicts " +
                policy_output_source(op_class) + " = " +
                std::string(contract_name(policy_output(p, op_class))));
  e.rationale = std::string(n.at("rationale").nonempty_string());
  return e;
}

KSplitDeclaration parse_k_split(const Node& n) {
  n.allow_only({"shards", "shard_layout", "partial_dtype", "partial_reduction", "output_rounding",
                "rationale"});
  KSplitDeclaration k;
  const Node shards = n.at("shards");
  k.shards = shards.integer();
  if (k.shards < 1 || k.shards > 64)
    shards.fail("must be an integer from 1 to 64, got " + std::to_string(k.shards));
  // Written out so the contract says it; ws1check implements exactly this and nothing else.
  expect_word(n.at("shard_layout"), "contiguous", "shard layout");
  expect_word(n.at("partial_dtype"), "float32", "partial dtype");
  expect_word(n.at("partial_reduction"), "fp32_fold_in_shard_order", "partial reduction");
  expect_word(n.at("output_rounding"), "once", "output rounding");
  k.rationale = std::string(n.at("rationale").nonempty_string());
  return k;
}

RmsNormRounding parse_rms_norm(const Node& n) {
  n.allow_only({"order", "alternatives", "applies_to", "rationale"});
  RmsNormRounding r;
  constexpr std::string_view kOrders = "kernel, hf";
  r.order = n.at("order").word(rms_norm_order_from_name, "rounding order", kOrders);
  for (const auto& item : n.at("alternatives").items()) {
    const RmsNormOrder o = item.word(rms_norm_order_from_name, "rounding order", kOrders);
    if (o == r.order ||
        std::find(r.alternatives.begin(), r.alternatives.end(), o) != r.alternatives.end())
      item.fail("repeats \"" + std::string(contract_name(o)) + "\"");
    r.alternatives.push_back(o);
  }
  const Node applies = n.at("applies_to");
  for (const auto& item : applies.items()) {
    std::string op = known_op(item);
    if (std::find(r.applies_to.begin(), r.applies_to.end(), op) != r.applies_to.end())
      item.fail("repeats \"" + op + "\"");
    r.applies_to.push_back(std::move(op));
  }
  if (r.applies_to.empty()) applies.fail("must name at least one op");
  r.rationale = std::string(n.at("rationale").nonempty_string());
  return r;
}

InvariancePolicy parse_invariance(const Node& n) {
  n.allow_only({"comparison", "signed_zero", "nan_policy", "note"});
  // spec §4.2 leaves no choice on these two; they are written out so the contract says it.
  expect_word(n.at("comparison"), "raw_bits", "comparison");
  expect_word(n.at("signed_zero"), "distinct", "signed-zero rule");
  InvariancePolicy p;
  p.nan_policy = n.at("nan_policy").word(nan_policy_from_name, "NaN policy", "fail, compare_bits");
  p.note = optional_note(n);
  return p;
}

Tf32Declaration parse_tf32(const Node& n, const PrecisionPolicy& p) {
  n.allow_only({"scope", "cublas_math_mode", "note"});
  Tf32Declaration d;
  const Node scope = n.at("scope");
  expect_word(scope, "required_path", "TF32 scope");
  d.scope = std::string(scope.string());
  d.cublas_math_mode =
      n.at("cublas_math_mode")
          .word(cublas_math_mode_from_name, "cuBLAS math mode", "pedantic, default_tf32_off");
  d.note = optional_note(n);
  if (p.tf32_reference != "disabled" || p.tf32_candidate_execution != "disabled")
    scope.fail("declares TF32 off on the required path, but policy.tf32 enables it");
  return d;
}

}  // namespace

Declarations parse_declarations(const Node& n, const PrecisionPolicy& policy) {
  n.allow_only({"format", "note", "accumulation_exceptions", "det_gemm_k_split",
                "rms_norm_rounding", "invariance", "tf32", "output_dtypes", "op_classes"});
  Declarations d;
  d.block_present = true;
  const Node format = n.at("format");
  if (format.string() != kDeclarationsFormat)
    format.fail("unknown declarations format \"" + std::string(format.string()) +
                "\" (known: " + std::string(kDeclarationsFormat) + ")");
  d.note = optional_note(n);

  if (auto v = n.find("op_classes")) d.op_classes = parse_op_classes(*v);
  if (auto v = n.find("output_dtypes")) d.output_dtypes = parse_output_dtypes(*v, policy);
  if (auto v = n.find("accumulation_exceptions")) {
    d.accumulation_exceptions.emplace();
    for (const auto& [op, entry] : v->fields()) {
      if (!spec_op_class(op)) entry.fail("unknown op (known: the 13 ops of spec §2.3)");
      // The op's class decides which output dtype the exception must agree with: the
      // declared class where the contract maps the op, else the spec's.
      OpClass cls = *spec_op_class(op);
      if (d.op_classes && d.op_classes->count(op)) cls = d.op_classes->at(op);
      (*d.accumulation_exceptions)[op] = parse_exception(entry, cls, policy);
    }
  }
  if (auto v = n.find("det_gemm_k_split")) d.det_gemm_k_split = parse_k_split(*v);
  if (auto v = n.find("rms_norm_rounding")) d.rms_norm_rounding = parse_rms_norm(*v);
  if (auto v = n.find("invariance")) d.invariance = parse_invariance(*v);
  if (auto v = n.find("tf32")) d.tf32 = parse_tf32(*v, policy);
  return d;
}

}  // namespace ws1::contract_detail

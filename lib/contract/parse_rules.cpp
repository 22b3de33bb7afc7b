// `judgment_rules` (ws1-c1-v3): the rules that change how an accuracy tensor is judged beyond
// the table rows. Strict everywhere: an unknown key here could change a verdict.
#include <array>
#include <map>
#include <string>

#include "parse.hpp"

namespace ws1::contract_detail {
namespace {

constexpr std::array<std::string_view, 3> kModes = {"direct adoption", "partial reference",
                                                   "measured calibration"};

RuleProvenance parse_provenance(const Node& n) {
  n.allow_only({"mode", "basis", "command", "commit", "environment"});
  RuleProvenance p;
  const Node mode = n.at("mode");
  p.mode = std::string(mode.string());
  bool known = false;
  for (auto m : kModes) known = known || m == p.mode;
  if (!known) mode.fail("unknown mode of adoption \"" + p.mode + "\" (known: direct adoption, partial reference, measured calibration)");
  p.basis = std::string(n.at("basis").nonempty_string());
  if (auto v = n.find("command")) p.command = std::string(v->nonempty_string());
  if (auto v = n.find("commit")) p.commit = std::string(v->nonempty_string());
  if (auto v = n.find("environment")) p.environment = std::string(v->nonempty_string());
  // Spec §6: a measured number names the measurement that gave it.
  if (p.mode == "measured calibration")
    for (const char* key : {"command", "commit", "environment"})
      if (!n.has(key)) n.fail_at(key, "a measured calibration names its " + std::string(key));
  return p;
}

void check_definition(const Node& n, std::string_view implemented) {
  if (!same_ignoring_spaces(n.string(), implemented))
    n.fail("definition \"" + std::string(n.string()) + "\" is not the one ws1check implements: \"" +
           std::string(implemented) + "\"");
}

// A rule's numbers per dtype: at least one, each in [0, 1); `why` says what 1 or more would mean.
std::map<ContractDType, double> below_one_by_dtype(const Node& by_dtype, std::string_view why) {
  std::map<ContractDType, double> out;
  for (const auto& [name, value] : by_dtype.fields()) {
    const auto t = contract_dtype_from_name(name);
    if (!t) value.fail("unknown dtype (known: float32, bfloat16, float16, float8)");
    const double v = value.nonnegative();
    if (!(v < 1.0)) value.fail("must be < 1 (" + std::string(why) + "), got " + format_number(v));
    out[*t] = v;
  }
  if (out.empty()) by_dtype.fail("must give at least one dtype");
  return out;
}

ScaleFreeGradientRule parse_scale_free(const Node& n) {
  n.allow_only({"definition", "atol_rel_by_dtype", "provenance", "rationale"});
  ScaleFreeGradientRule r;
  check_definition(n.at("definition"), kScaleFreeDefinition);
  if (auto v = n.find("rationale")) (void)v->nonempty_string();
  // atol_rel >= 1 would pass an all-zero candidate at the peak: a rule that cannot fail.
  r.atol_rel_by_dtype = below_one_by_dtype(n.at("atol_rel_by_dtype"), "an all-zero candidate would pass");
  r.provenance = parse_provenance(n.at("provenance"));
  return r;
}

RelativeToNaiveRule parse_relative(const Node& n) {
  n.allow_only({"definition", "engine", "factor_by_judgment", "floor_steps", "provenance", "rationale"});
  RelativeToNaiveRule r;
  check_definition(n.at("definition"), kRelativeDefinition);
  const Node engine = n.at("engine");
  if (engine.string() != "naive_bf16")
    engine.fail("unknown engine \"" + std::string(engine.string()) + "\" (known: naive_bf16)");
  if (auto v = n.find("rationale")) (void)v->nonempty_string();
  const Node factors = n.at("factor_by_judgment");
  for (const auto& [name, value] : factors.fields()) {
    const auto j = judgment_from_name(name);
    if (!j || (*j != Judgment::kForwardAccuracy && *j != Judgment::kGradientAccuracy))
      value.fail("not an accuracy judgment (known: forward_accuracy, gradient_accuracy)");
    const double f = value.nonnegative();
    if (!(f >= 1.0)) value.fail("must be >= 1 (below 1 asks more than the naive engine can give), got " + format_number(f));
    r.factor_by_judgment[*j] = f;
  }
  if (r.factor_by_judgment.empty()) factors.fail("must give at least one judgment");
  r.floor_steps = n.at("floor_steps").nonnegative();
  r.provenance = parse_provenance(n.at("provenance"));
  return r;
}

BiasRule parse_bias(const Node& n) {
  n.allow_only({"definition", "max_mean_by_dtype", "z", "provenance", "rationale"});
  BiasRule r;
  check_definition(n.at("definition"), kBiasDefinition);
  if (auto v = n.find("rationale")) (void)v->nonempty_string();
  // A mean of signs lies in [-1, 1]: a bound of 1 or more cannot fail.
  r.max_mean_by_dtype = below_one_by_dtype(n.at("max_mean_by_dtype"), "a mean of signs never exceeds 1");
  const Node z = n.at("z");
  r.z = z.nonnegative();
  if (!(r.z >= 1.0)) z.fail("must be >= 1 (a sign test below one standard deviation fails fair candidates), got " + format_number(r.z));
  r.provenance = parse_provenance(n.at("provenance"));
  return r;
}

}  // namespace

JudgmentRules parse_rules(const Node& n) {
  n.allow_only({"format", "note", "gradient_scale_free", "relative_to_naive", "bias"});
  const Node format = n.at("format");
  if (format.string() != kJudgmentRulesFormat)
    format.fail("unknown format \"" + std::string(format.string()) + "\" (known: " +
                std::string(kJudgmentRulesFormat) + ")");
  if (auto v = n.find("note")) (void)v->string();
  JudgmentRules r;
  if (auto v = n.find("gradient_scale_free")) r.gradient_scale_free = parse_scale_free(*v);
  if (auto v = n.find("relative_to_naive")) r.relative_to_naive = parse_relative(*v);
  if (auto v = n.find("bias")) r.bias = parse_bias(*v);
  return r;
}

}  // namespace ws1::contract_detail

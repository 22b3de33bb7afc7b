// `chain_logprob_aggregates` (spec §8): the chain-level parity metrics and their thresholds.
#include <algorithm>

#include "parse.hpp"

namespace ws1::contract_detail {
namespace {

constexpr std::string_view kMetricNames = "max_abs_dlogp, approx_kl0, clipfrac0, mean_abs_dlogp";

// ws1check computes each metric by its own code; a contract whose formula says something else
// would be judged by a formula it does not state, so the formula must be the one implemented.
std::string_view implemented_formula(ChainMetric m) {
  switch (m) {
    case ChainMetric::kMaxAbsDlogp:
      return "max(abs(dlogp))";
    case ChainMetric::kApproxKl0:
      return "mean(exp(dlogp) - 1 - dlogp)";
    case ChainMetric::kClipfrac0:
      return "mean(1[exp(dlogp) outside clip_interval])";
    case ChainMetric::kMeanAbsDlogp:
      return "mean(abs(dlogp))";
  }
  return "";
}

constexpr std::string_view kPassRule = "value <= threshold";
constexpr std::string_view kDlogpDefinition = "comparison_lhs_logp - comparison_rhs_logp";

std::string one_of(const Node& n, std::initializer_list<std::string_view> known,
                   std::string_view what) {
  const std::string_view s = n.string();
  for (auto k : known)
    if (k == s) return std::string(s);
  n.fail("unknown " + std::string(what) + " \"" + std::string(s) +
         "\" (known: " + join_names(known) + ")");
}

MetricRule parse_metric(const Node& n, ChainMetric m) {
  // Extensible (rationales, notes); formula, rule and thresholds are checked.
  MetricRule r;
  const Node formula = n.at("formula");
  r.formula = std::string(formula.string());
  if (!same_ignoring_spaces(r.formula, implemented_formula(m)))
    formula.fail("formula \"" + r.formula + "\" is not the one ws1check implements for " +
                 std::string(contract_name(m)) + ": \"" + std::string(implemented_formula(m)) +
                 "\"");
  const Node rule = n.at("pass_rule");
  r.pass_rule = std::string(rule.string());
  if (!same_ignoring_spaces(r.pass_rule, kPassRule))
    rule.fail("unknown pass rule (known: \"" + std::string(kPassRule) + "\")");
  if (auto text = n.find("threshold_rationale"))
    r.threshold_rationale = std::string(text->string());

  const Node by_dtype = n.at("by_execution_dtype");
  for (const auto& [dtype_name, entry] : by_dtype.fields()) {
    const auto t = contract_dtype_from_name(dtype_name);
    if (!t) entry.fail("unknown dtype (known: float32, bfloat16, float16, float8)");
    entry.allow_only({"threshold"});
    r.threshold_by_execution_dtype[*t] = entry.at("threshold").nonnegative();
  }
  for (ContractDType t : {ContractDType::kBFloat16, ContractDType::kFloat32})
    if (!r.threshold_by_execution_dtype.count(t))
      by_dtype.fail_at(contract_name(t), "missing required threshold");
  return r;
}

std::pair<double, double> parse_clip_interval(const Node& n) {
  const auto items = n.items();
  if (items.size() != 2)
    n.fail("must be a pair [low, high], got " + std::to_string(items.size()) + " values");
  const double lo = items[0].number();
  const double hi = items[1].number();
  if (!(lo > 0)) items[0].fail("must be > 0, got " + format_number(lo));
  if (!(hi > lo))
    items[1].fail("must be greater than the low end " + format_number(lo) + ", got " +
                  format_number(hi));
  // A PPO ratio interval contains 1: identical logprobs must never count as clipped.
  if (!(lo < 1.0 && hi > 1.0)) n.fail("must contain 1 strictly inside (a ratio interval)");
  return {lo, hi};
}

}  // namespace

ChainAggregates parse_chain(const Node& n) {
  ChainAggregates c;
  c.compute_dtype =
      n.at("compute_dtype")
          .word(contract_dtype_from_name, "dtype", "float32, bfloat16, float16, float8");
  c.require_all = n.at("require_all").boolean();
  c.nan_inf_policy = one_of(n.at("nan_inf_policy"), {"hard_fail"}, "NaN/Inf policy");
  c.empty_active_token_set =
      one_of(n.at("empty_active_token_set"), {"hard_fail"}, "empty-set policy");
  const Node dlogp = n.at("dlogp_definition");
  c.dlogp_definition = std::string(dlogp.string());
  if (!same_ignoring_spaces(c.dlogp_definition, kDlogpDefinition))
    dlogp.fail("unknown dlogp definition (known: \"" + std::string(kDlogpDefinition) + "\")");
  if (auto v = n.find("active_token_policy")) c.active_token_policy = std::string(v->string());
  if (auto v = n.find("clip_interval_field"))
    c.clip_interval_field = std::string(v->nonempty_string());
  c.default_clip_interval = parse_clip_interval(n.at("default_clip_interval"));

  const Node metrics = n.at("metrics");
  for (const auto& [name, metric] : metrics.fields()) {
    const auto m = chain_metric_from_name(name);
    if (!m) metric.fail("unknown chain metric (known: " + std::string(kMetricNames) + ")");
    c.metrics[*m] = parse_metric(metric, *m);
  }
  for (ChainMetric m :
       {ChainMetric::kMaxAbsDlogp, ChainMetric::kApproxKl0, ChainMetric::kClipfrac0})
    if (!c.metrics.count(m)) metrics.fail_at(contract_name(m), "missing required chain metric");

  const Node gated = n.at("sole_chain_level_logprob_metrics");
  const auto gated_items = gated.items();
  if (gated_items.empty()) gated.fail("must list at least one metric");
  for (const auto& item : gated_items) {
    const ChainMetric m = item.word(chain_metric_from_name, "chain metric", kMetricNames);
    if (std::find(c.gated_metrics.begin(), c.gated_metrics.end(), m) != c.gated_metrics.end())
      item.fail("repeats \"" + std::string(contract_name(m)) + "\"");
    if (!c.metrics.count(m))
      item.fail("metric \"" + std::string(contract_name(m)) + "\" has no entry in metrics");
    c.gated_metrics.push_back(m);
  }
  return c;
}

}  // namespace ws1::contract_detail

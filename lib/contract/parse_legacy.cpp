// The legacy blocks `accuracy` (forward accuracy before the judgments table existed) and
// `batch_invariance`. They carry no information of their own; a contract that says one thing
// there and another in `judgments` has two contradicting descriptions (spec §9.2), so any
// disagreement is an error, reported at the legacy field.
#include <tuple>

#include "parse.hpp"

namespace ws1::contract_detail {
namespace {

LegacyRows parse_rows(const Node& n) {
  LegacyRows rows;
  for (const auto& [class_name, by_dtype] : n.fields()) {
    const auto c = op_class_from_name(class_name);
    if (!c)
      by_dtype.fail(
          "unknown op class (known: elementwise, reduction, attention, logprob, mhc_controller)");
    for (const auto& [dtype_name, row] : by_dtype.fields()) {
      const auto t = contract_dtype_from_name(dtype_name);
      if (!t) row.fail("unknown dtype (known: float32, bfloat16, float16, float8)");
      row.allow_only({"atol", "rtol"});
      rows[*c][*t] = LegacyTolerance{row.at("atol").nonnegative(), row.at("rtol").nonnegative()};
    }
  }
  return rows;
}

// Each legacy row must equal the forward_accuracy row that applies on the same arch.
void check_against_judgments(const Node& n, const LegacyRows& rows, const Contract& contract,
                             std::string_view arch) {
  for (const auto& [c, by_dtype] : rows) {
    const Node class_node = n.at(contract_name(c));
    for (const auto& [t, legacy] : by_dtype) {
      const Node row = class_node.at(contract_name(t));
      const auto th = contract.threshold(Judgment::kForwardAccuracy, c, t, arch);
      if (!th.ok()) row.fail("has no counterpart row in judgments.forward_accuracy.by_op_class");
      if (!th->tolerance)
        row.fail("its counterpart " + th->source + " is out_of_scope and declares no tolerance");
      for (auto [key, mine, theirs] : {std::tuple{"atol", legacy.atol, th->tolerance->atol},
                                       std::tuple{"rtol", legacy.rtol, th->tolerance->rtol}}) {
        if (mine != theirs)
          row.at(key).fail(format_number(mine) + " contradicts " + th->source + "." + key + " = " +
                           format_number(theirs) + " (one description only, spec §9.2)");
      }
    }
  }
}

}  // namespace

LegacyBlocks parse_legacy(const std::optional<Node>& accuracy,
                          const std::optional<Node>& batch_invariance, const Contract& contract) {
  LegacyBlocks out;
  if (accuracy) {
    accuracy->allow_only({"default", "arch_overrides"});
    const Node def = accuracy->at("default");
    out.accuracy_default = parse_rows(def);
    check_against_judgments(def, *out.accuracy_default, contract, {});
    if (auto overrides = accuracy->find("arch_overrides")) {
      for (const auto& [arch, rows] : overrides->fields()) {
        out.accuracy_arch_overrides[arch] = parse_rows(rows);
        check_against_judgments(rows, out.accuracy_arch_overrides[arch], contract, arch);
      }
    }
  }
  if (batch_invariance) {
    batch_invariance->allow_only({"atol", "rtol"});
    LegacyTolerance t{};
    for (auto [key, slot] : {std::pair{"atol", &t.atol}, std::pair{"rtol", &t.rtol}}) {
      const Node v = batch_invariance->at(key);
      *slot = v.nonnegative();
      if (*slot != 0)
        v.fail("must be 0: it contradicts the bitwise invariance judgments (spec §4.2, §9.2)");
    }
    out.batch_invariance = t;
  }
  return out;
}

}  // namespace ws1::contract_detail

// `judgments` (spec §4, §5): four tables op class -> dtype -> row, plus per-arch overrides.
#include <cctype>

#include "parse.hpp"

namespace ws1::contract_detail {
namespace {

constexpr std::string_view kOpClassNames =
    "elementwise, reduction, attention, logprob, mhc_controller";
constexpr std::string_view kDTypeNames = "float32, bfloat16, float16, float8";

// A row decides a verdict, so it is strict: only these keys, every value checked.
ToleranceRow parse_row(const Node& n, Judgment j) {
  n.allow_only({"status", "mode", "atol", "rtol"});
  ToleranceRow row;
  row.status =
      n.at("status").word(row_status_from_name, "status", "applicable, optional, out_of_scope");
  const bool any = n.find("mode") || n.find("atol") || n.find("rtol");
  // An out_of_scope row may omit its tolerance; if it gives one, it gives all of it.
  if (row.status == RowStatus::kOutOfScope && !any) return row;

  const Node mode_node = n.at("mode");
  Tolerance t;
  t.mode = mode_node.word(compare_mode_from_name, "mode", "tolerance, bitwise");
  const Node atol = n.at("atol");
  const Node rtol = n.at("rtol");
  t.atol = atol.nonnegative();
  t.rtol = rtol.nonnegative();
  if (is_invariance(j) && t.mode != CompareMode::kBitwise)
    mode_node.fail("an invariance row must be \"bitwise\" (spec §4.2)");
  if (t.mode == CompareMode::kBitwise) {
    if (t.atol != 0) atol.fail("a bitwise row must have atol 0, got " + format_number(t.atol));
    if (t.rtol != 0) rtol.fail("a bitwise row must have rtol 0, got " + format_number(t.rtol));
  }
  row.tolerance = t;
  return row;
}

ClassRows parse_class_rows(const Node& n, Judgment j) {
  ClassRows rows;
  for (const auto& [class_name, by_dtype] : n.fields()) {
    const auto c = op_class_from_name(class_name);
    if (!c) by_dtype.fail("unknown op class (known: " + std::string(kOpClassNames) + ")");
    DTypeRows& dtype_rows = rows[*c];
    for (const auto& [dtype_name, row] : by_dtype.fields()) {
      const auto t = contract_dtype_from_name(dtype_name);
      if (!t) row.fail("unknown dtype (known: " + std::string(kDTypeNames) + ")");
      dtype_rows[*t] = parse_row(row, j);
    }
  }
  return rows;
}

// Every judgment judges the four spec classes in FP32 and BF16 (spec §5).
void require_core_rows(const Node& by_op_class, const ClassRows& rows) {
  for (OpClass c :
       {OpClass::kElementwise, OpClass::kReduction, OpClass::kLogprob, OpClass::kAttention}) {
    const auto it = rows.find(c);
    if (it == rows.end()) by_op_class.fail_at(contract_name(c), "missing required op class");
    const Node class_node = by_op_class.at(contract_name(c));
    for (ContractDType t : {ContractDType::kFloat32, ContractDType::kBFloat16}) {
      const auto row = it->second.find(t);
      if (row == it->second.end()) class_node.fail_at(contract_name(t), "missing required row");
      if (row->second.status != RowStatus::kApplicable)
        class_node.at(contract_name(t))
            .at("status")
            .fail("a required row must be \"applicable\", got \"" +
                  std::string(contract_name(row->second.status)) + "\"");
    }
  }
}

bool arch_name(std::string_view s) {
  // sm90, sm100, sm90a: "sm", digits, at most one trailing letter.
  if (s.size() < 3 || s.substr(0, 2) != "sm") return false;
  std::size_t i = 2;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == 2) return false;
  if (i < s.size() && std::islower(static_cast<unsigned char>(s[i]))) ++i;
  return i == s.size();
}

std::optional<std::string> optional_text(const Node& n, std::string_view key) {
  if (auto v = n.find(key)) return std::string(v->string());
  return std::nullopt;
}

JudgmentTable parse_table(const Node& n, Judgment j) {
  // Extensible: upstream adds notes (calibration_note, scope, ...) over time. The keys that
  // decide a verdict are below; others must at least not be malformed where we know them.
  JudgmentTable t;
  const Node mode = n.at("default_mode");
  t.default_mode = mode.word(compare_mode_from_name, "mode", "tolerance, bitwise");
  if (is_invariance(j) && t.default_mode != CompareMode::kBitwise)
    mode.fail("an invariance judgment must default to \"bitwise\" (spec §4.2)");
  t.calibration_status = optional_text(n, "calibration_status");
  t.calibration_note = optional_text(n, "calibration_note");
  t.scope = optional_text(n, "scope");

  const Node by_op_class = n.at("by_op_class");
  t.by_op_class = parse_class_rows(by_op_class, j);
  require_core_rows(by_op_class, t.by_op_class);

  if (auto overrides = n.find("arch_overrides")) {
    for (const auto& [arch, rows] : overrides->fields()) {
      if (!arch_name(arch)) rows.fail("unknown architecture name (expected sm<digits>, e.g. sm90)");
      t.arch_overrides[arch] = parse_class_rows(rows, j);
    }
  }
  return t;
}

}  // namespace

std::map<Judgment, JudgmentTable> parse_judgments(const Node& n) {
  std::map<Judgment, JudgmentTable> out;
  for (const auto& [name, table] : n.fields()) {
    const auto j = judgment_from_name(name);
    if (!j)
      table.fail(
          "unknown judgment (known: forward_accuracy, forward_invariance, "
          "gradient_accuracy, gradient_invariance)");
    out[*j] = parse_table(table, *j);
  }
  for (Judgment j : all_judgments())
    if (!out.count(j)) n.fail_at(contract_name(j), "missing required judgment");
  return out;
}

}  // namespace ws1::contract_detail

// ws1/gold-low-precision-matmul: a reference ("gold") path that multiplies the inputs as they
// come, so bf16 inputs give a bf16 gold (spec §3.1 condition 4, §9.3). The heuristic is stated
// with scan_source_text in ws1/audit.hpp; it is conservative: only names that say "reference"
// are looked at, and one visibly upcast operand clears the call.
#include <fmt/format.h>

#include "rules.hpp"

namespace ws1::audit_detail {
namespace {

bool reference_scope(const PythonScope& s, std::string* which) {
  for (const auto& n : s.names)
    if (has_word(identifier_words(n), {"gold", "golden", "reference", "ref", "oracle", "native"})) {
      *which = n;
      return true;
    }
  return false;
}

// `.float()`, `.double()`, or one of torch.float32 / float64 / float / double as a whole name.
bool upcast_text(std::string_view s) {
  for (std::string_view method : {".float", ".double"}) {
    std::size_t p = 0;
    while ((p = s.find(method, p)) != std::string_view::npos) {
      p += method.size();
      if (p < s.size() && is_ident_char(s[p])) continue;
      const std::size_t q = skip_blanks(s, p);
      if (q < s.size() && s[q] == '(') return true;
    }
  }
  for (std::string_view dtype : {"torch.float32", "torch.float64", "torch.float", "torch.double"}) {
    std::size_t p = 0;
    while ((p = s.find(dtype, p)) != std::string_view::npos) {
      const std::size_t end = p + dtype.size();
      const bool starts = p == 0 || (!is_ident_char(s[p - 1]) && s[p - 1] != '.');
      p = end;
      if (starts && (end == s.size() || !is_ident_char(s[end]))) return true;
    }
  }
  return false;
}

bool is_identifier(std::string_view s) {
  if (s.empty() || !is_ident_start(s.front())) return false;
  for (char c : s)
    if (!is_ident_char(c)) return false;
  return true;
}

// `name` is assigned an upcast expression in [from, to) of the code: a line whose targets
// (before a single '=') include `name` and whose value is upcast.
bool assigned_upcast(const SourceFile& f, std::string_view name, std::size_t from, std::size_t to) {
  const std::string_view code = std::string_view(f.code).substr(0, to);
  std::size_t p = from;
  while ((p = code.find(name, p)) != std::string_view::npos) {
    const std::size_t at = p;
    p += name.size();
    if ((at > 0 && (is_ident_char(code[at - 1]) || code[at - 1] == '.')) ||
        (p < code.size() && is_ident_char(code[p])))
      continue;
    // Targets: from the line start to the '=' only names, commas, attributes, subscripts and
    // an annotation (no call: `f(a, x=...)` is not an assignment to a).
    const std::size_t line_begin = f.lines.line_start(f.lines.line(at));
    std::size_t eq = code.find('=', p);
    const std::size_t line_end = code.find('\n', at);
    if (eq == std::string_view::npos || (line_end != std::string_view::npos && eq > line_end))
      continue;
    if (eq + 1 < code.size() && code[eq + 1] == '=') continue;
    bool targets = true;
    for (std::size_t i = line_begin; i < eq; ++i) {
      const char c = code[i];
      if (!(is_ident_char(c) || c == ',' || c == ' ' || c == '\t' || c == '.' || c == ':' ||
            c == '[' || c == ']'))
        targets = false;
    }
    if (!targets) continue;
    // The value: to the end of the logical line (brackets may continue it).
    std::size_t end = eq + 1;
    int depth = 0;
    while (end < code.size() && !(code[end] == '\n' && depth == 0)) {
      if (code[end] == '(' || code[end] == '[' || code[end] == '{') ++depth;
      if (code[end] == ')' || code[end] == ']' || code[end] == '}') --depth;
      ++end;
    }
    if (upcast_text(code.substr(eq + 1, end - eq - 1))) return true;
  }
  return false;
}

}  // namespace

void rule_gold_low_precision_matmul(const SourceFile& f, const std::vector<PythonScope>& scopes,
                                    std::vector<RepoFinding>& out) {
  if (f.language != SourceLanguage::kPython) return;
  for (std::string_view callee : {"torch.matmul", "torch.mm", "torch.bmm"}) {
    for (const auto& [at, open] : find_calls(f.code, callee)) {
      const PythonScope& scope = scopes[static_cast<std::size_t>(f.lines.line(at) - 1)];
      std::string which;
      if (!reference_scope(scope, &which)) continue;
      const std::size_t close = matching_close(f.code, open);
      if (close == std::string::npos) continue;
      bool upcast = false;
      std::vector<std::string> operands;
      for (const auto& [b, e] : split_arguments(f.code, open, close)) {
        const KeywordArg k = keyword_argument(f.code, b, e);
        if (k.name == "out") continue;
        const std::size_t vb = k.name.empty() ? b : k.value_begin;
        const std::string_view operand = f.code_at(vb, e);
        operands.emplace_back(operand);
        if (upcast_text(operand) ||
            (is_identifier(operand) && scope.def_begin != std::string::npos &&
             assigned_upcast(f, operand, scope.def_begin, at)))
          upcast = true;
      }
      if (upcast) continue;
      std::string where;
      for (const auto& n : scope.names) where += (where.empty() ? "" : ".") + n;
      out.push_back(f.finding(
          kRuleGoldLowPrecisionMatmul, at,
          fmt::format("{}({}) in reference path {} (\"{}\") on operands not upcast to float32: "
                      "with bf16 inputs the gold is bf16, not an FP32 reference (spec §3.1 "
                      "condition 4, §9.3)",
                      callee, fmt::join(operands, ", "), where, which)));
    }
  }
}

}  // namespace ws1::audit_detail

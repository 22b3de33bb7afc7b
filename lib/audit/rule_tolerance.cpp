// ws1/hardcoded-tolerance: `atol=1e-3`-style literals in tests (spec §2.2, §9.1, §11.2 item 13).
// The precise pattern is stated with scan_source_text in ws1/audit.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "rules.hpp"

namespace ws1::audit_detail {
namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// Length of a decimal number literal at `i` (optional sign, digits with an optional fraction
// or a fraction alone, optional exponent, optional C suffix f/F/l/L, C++ digit separators),
// 0 when there is none or when it runs into an identifier character.
std::size_t number_literal(std::string_view s, std::size_t i) {
  const std::size_t b = i;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) i = skip_blanks(s, i + 1);
  const std::size_t digits_begin = i;
  bool digits = false;
  while (i < s.size() && (is_digit(s[i]) || (s[i] == '\'' && digits) || (s[i] == '_' && digits))) {
    digits = digits || is_digit(s[i]);
    ++i;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) {
      digits = true;
      ++i;
    }
  }
  if (!digits || i == digits_begin) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    if (j < s.size() && is_digit(s[j])) {
      while (j < s.size() && is_digit(s[j])) ++j;
      i = j;
    }
  }
  if (i < s.size() && (s[i] == 'f' || s[i] == 'F' || s[i] == 'l' || s[i] == 'L')) ++i;
  if (i < s.size() && is_ident_char(s[i])) return 0;  // 0x1F, 1e3j, 10abc: not a plain literal
  return i - b;
}

// Python annotation after a name: ": float", ": Optional[float]". Returns the offset after it
// (or `i` unchanged when there is none).
std::size_t skip_annotation(std::string_view s, std::size_t i) {
  if (i >= s.size() || s[i] != ':' || (i + 1 < s.size() && s[i + 1] == ':')) return i;
  std::size_t j = skip_blanks(s, i + 1);
  const std::size_t b = j;
  int depth = 0;
  while (j < s.size() && (is_ident_char(s[j]) || s[j] == '.' || s[j] == '[' || s[j] == ']' ||
                          s[j] == ',' || (depth > 0 && s[j] == ' '))) {
    if (s[j] == '[') ++depth;
    if (s[j] == ']') --depth;
    ++j;
  }
  return j == b ? i : skip_blanks(s, j);
}

}  // namespace

void rule_hardcoded_tolerance(const SourceFile& f, std::vector<RepoFinding>& out,
                              ToleranceCount& counts) {
  const std::string_view code = f.code;
  std::size_t i = 0;
  while (i < code.size()) {
    if (!is_ident_start(code[i]) || (i > 0 && is_ident_char(code[i - 1]))) {
      ++i;
      continue;
    }
    std::size_t e = i;
    while (e < code.size() && is_ident_char(code[e])) ++e;
    const std::string_view name = code.substr(i, e - i);
    const std::size_t name_at = i;
    i = e;
    const auto words = identifier_words(name);
    if (words.empty() || (words.back() != "atol" && words.back() != "rtol")) continue;
    std::size_t j = skip_blanks(code, e);
    if (f.language == SourceLanguage::kPython) j = skip_annotation(code, j);
    if (j >= code.size()) continue;
    if (code[j] == '=') {
      if (j + 1 < code.size() && code[j + 1] == '=') continue;  // a comparison
    } else if (!(code[j] == '{' && f.language == SourceLanguage::kCFamily)) {
      continue;
    }
    const std::size_t v = skip_blanks(code, j + 1);
    const std::size_t len = number_literal(code, v);
    if (len == 0) continue;
    const std::string literal(f.text_at(v, v + len));
    ++(words.back() == "atol" ? counts.atol : counts.rtol);
    out.push_back(f.finding(
        kRuleHardcodedTolerance, name_at,
        fmt::format("hard-coded tolerance {} {} {} in a test: tolerances come from the contract "
                    "(spec §2.2, §11.2 item 13)",
                    name, code[j] == '{' ? "{" : "=", literal)));
  }
}

}  // namespace ws1::audit_detail

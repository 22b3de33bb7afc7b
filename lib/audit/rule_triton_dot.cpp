// ws1/triton-dot-precision: Triton `tl.dot` calls that leave the input precision to Triton's
// default, which may be TF32 for FP32 operands on NVIDIA GPUs (spec §9.7).
#include <fmt/format.h>

#include "rules.hpp"

namespace ws1::audit_detail {
namespace {

// The string literal's contents at [b, e) of the text, when the code there is one quoted
// literal (quotes kept in the code view); nullopt otherwise.
std::optional<std::string_view> string_literal(const SourceFile& f, std::size_t b, std::size_t e) {
  const std::string_view c = f.code_at(b, e);
  if (c.size() < 2 || (c.front() != '"' && c.front() != '\'') || c.back() != c.front())
    return std::nullopt;
  return f.text_at(b + 1, e - 1);
}

}  // namespace

void rule_triton_dot_precision(const SourceFile& f, std::vector<RepoFinding>& out) {
  if (f.language != SourceLanguage::kPython) return;
  for (std::string_view callee : {"tl.dot", "triton.language.dot"}) {
    for (const auto& [at, open] : find_calls(f.code, callee)) {
      const std::size_t close = matching_close(f.code, open);
      if (close == std::string::npos) continue;
      std::string problem;  // empty: precision pinned to IEEE FP32
      bool pinned = false;
      std::string seen;
      for (const auto& [b, e] : split_arguments(f.code, open, close)) {
        const KeywordArg k = keyword_argument(f.code, b, e);
        if (k.name == "input_precision") {
          const auto s = string_literal(f, k.value_begin, k.value_end);
          if (s && *s == "ieee") {
            pinned = true;
          } else {
            seen = fmt::format("input_precision={}", f.text_at(k.value_begin, k.value_end));
          }
        } else if (k.name == "allow_tf32") {
          if (f.code_at(k.value_begin, k.value_end) == "False")
            pinned = true;
          else
            seen = fmt::format("allow_tf32={}", f.code_at(k.value_begin, k.value_end));
        } else if (k.name.empty() && f.code_at(b, e).substr(0, 2) == "**") {
          seen = fmt::format("{} (not visible statically)", f.code_at(b, e));
        }
      }
      if (pinned) continue;
      out.push_back(f.finding(
          kRuleTritonDotPrecision, at,
          fmt::format("{}(...) {}: neither input_precision=\"ieee\" nor allow_tf32=False, so FP32 "
                      "operands may run as TF32 (spec §9.7)",
                      callee, seen.empty() ? std::string("sets no precision") : "has " + seen)));
    }
  }
}

}  // namespace ws1::audit_detail

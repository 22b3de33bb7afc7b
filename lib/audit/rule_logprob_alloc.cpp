// ws1/logprob-output-dtype: a logprob output allocated with the logits' dtype / options, so
// bf16 logits give a bf16 logprob (spec §2.1 "Logprob aggregate output = FP32", §9.5). The
// heuristic is stated with scan_source_text in ws1/audit.hpp.
#include <fmt/format.h>

#include <optional>

#include "rules.hpp"

namespace ws1::audit_detail {
namespace {

bool logit_name(std::string_view dotted) {
  if (dotted.empty()) return false;
  const std::size_t dot = dotted.find_last_of('.');
  const std::string_view last = dot == std::string_view::npos ? dotted : dotted.substr(dot + 1);
  return has_word(identifier_words(last), {"logit", "logits"});
}

bool dotted_name(std::string_view s) {
  if (s.empty() || !is_ident_start(s.front())) return false;
  for (char c : s)
    if (!is_ident_char(c) && c != '.') return false;
  return true;
}

// The dotted name ending just before `end` ("self.logits" before ".new_empty").
std::string_view dotted_before(std::string_view code, std::size_t end) {
  std::size_t b = end;
  while (b > 0 && (is_ident_char(code[b - 1]) || code[b - 1] == '.')) --b;
  while (b < end && code[b] == '.') ++b;
  return code.substr(b, end - b);
}

// `name = <expression starting at start>`: the assigned name, or empty.
std::string assigned_name(const SourceFile& f, std::size_t start) {
  const std::string_view code = f.code;
  const std::size_t eq = last_nonblank_before(code, start);
  if (eq == std::string_view::npos || code[eq] != '=') return {};
  if (eq > 0 && std::string_view("=!<>+-*/%&|^:@").find(code[eq - 1]) != std::string_view::npos)
    return {};
  std::string_view lhs = code.substr(0, eq);
  const std::size_t line_begin = f.lines.line_start(f.lines.line(eq));
  lhs = lhs.substr(line_begin);
  if (f.language == SourceLanguage::kPython) {
    const std::size_t colon = lhs.find(':');  // `logp: torch.Tensor = ...`
    if (colon != std::string_view::npos) lhs = lhs.substr(0, colon);
  }
  std::size_t e = lhs.size();
  while (e > 0 && (lhs[e - 1] == ' ' || lhs[e - 1] == '\t' || lhs[e - 1] == '&')) --e;
  return std::string(identifier_before(lhs, e));
}

bool logprob_output(std::string_view name, std::string_view function) {
  if (name.empty()) return false;
  if (has_logprob_word(identifier_words(name))) return true;
  if (name != "out" && name != "output" && name != "result") return false;
  const auto fw = identifier_words(function);
  return has_logprob_word(fw) && !has_word(fw, {"backward", "bwd", "grad", "grads"});
}

struct Alloc {
  std::size_t at;      // start of the allocation expression
  std::string what;    // what takes the logits' dtype
};

bool has_dtype_keyword(const SourceFile& f, std::size_t open, std::size_t close) {
  for (const auto& [b, e] : split_arguments(f.code, open, close))
    if (keyword_argument(f.code, b, e).name == "dtype") return true;
  return false;
}

std::vector<Alloc> python_allocs(const SourceFile& f) {
  std::vector<Alloc> out;
  const std::string_view code = f.code;
  for (std::string_view fn : {"torch.empty_like", "torch.zeros_like", "torch.ones_like", "torch.full_like"}) {
    for (const auto& [at, open] : find_calls(code, fn)) {
      const std::size_t close = matching_close(code, open);
      if (close == std::string::npos) continue;
      const auto args = split_arguments(code, open, close);
      if (args.empty()) continue;
      const KeywordArg k = keyword_argument(code, args[0].first, args[0].second);
      const std::string_view first = k.name.empty() ? f.code_at(args[0].first, args[0].second)
                                                    : f.code_at(k.value_begin, k.value_end);
      if ((k.name.empty() || k.name == "input") && dotted_name(first) && logit_name(first) &&
          !has_dtype_keyword(f, open, close))
        out.push_back({at, fmt::format("{}({}) without dtype=", fn, first)});
    }
  }
  for (std::string_view method : {".new_empty", ".new_zeros", ".new_ones", ".new_full"}) {
    std::size_t p = 0;
    while ((p = code.find(method, p)) != std::string_view::npos) {
      const std::size_t dot = p;
      p += method.size();
      if (p < code.size() && is_ident_char(code[p])) continue;
      const std::size_t open = skip_blanks(code, p);
      if (open >= code.size() || code[open] != '(') continue;
      const std::string_view receiver = dotted_before(code, dot);
      if (!logit_name(receiver)) continue;
      const std::size_t close = matching_close(code, open);
      if (close == std::string::npos || has_dtype_keyword(f, open, close)) continue;
      out.push_back({dot - receiver.size(), fmt::format("{}{}(...) without dtype=", receiver, method)});
    }
  }
  for (std::string_view fn : {"torch.empty", "torch.zeros", "torch.ones", "torch.full", "torch.empty_strided"}) {
    for (const auto& [at, open] : find_calls(code, fn)) {
      const std::size_t close = matching_close(code, open);
      if (close == std::string::npos) continue;
      for (const auto& [b, e] : split_arguments(code, open, close)) {
        const KeywordArg k = keyword_argument(code, b, e);
        const std::string_view v = f.code_at(k.value_begin, k.value_end);
        if (k.name == "dtype" && v.size() > 6 && v.substr(v.size() - 6) == ".dtype" &&
            logit_name(v.substr(0, v.size() - 6)))
          out.push_back({at, fmt::format("{}(..., dtype={})", fn, v)});
      }
    }
  }
  return out;
}

// In one C++ argument: `X.options()` (X a logits name) not followed by `.dtype(`, or
// `dtype(X.dtype())` / `dtype(X.scalar_type())`. Returns what was found.
std::optional<std::string> c_argument_takes_logits_dtype(std::string_view arg) {
  for (std::string_view getter : {".dtype", ".scalar_type"}) {
    std::size_t p = 0;
    while ((p = arg.find(getter, p)) != std::string_view::npos) {
      const std::size_t g = p;
      p += getter.size();
      const std::string_view x = dotted_before(arg, g);
      const std::size_t open = skip_blanks(arg, p);
      if (!logit_name(x) || open >= arg.size() || arg[open] != '(') continue;
      // Inside a dtype(...) option: the text before X ends with "dtype(".
      const std::size_t before = last_nonblank_before(arg, g - x.size());
      if (before != std::string_view::npos && arg[before] == '(' &&
          identifier_before(arg, before) == "dtype")
        return fmt::format("dtype({}{}())", x, getter);
    }
  }
  std::size_t p = 0;
  while ((p = arg.find(".options", p)) != std::string_view::npos) {
    const std::size_t g = p;
    p += 8;
    const std::string_view x = dotted_before(arg, g);
    if (!logit_name(x) || (p < arg.size() && is_ident_char(arg[p]))) continue;
    if (arg.find(".dtype", p) != std::string_view::npos) continue;  // options().dtype(kFloat)
    return fmt::format("{}.options()", x);
  }
  return std::nullopt;
}

std::vector<Alloc> c_allocs(const SourceFile& f) {
  std::vector<Alloc> out;
  const std::string_view code = f.code;
  for (std::string_view ns : {"torch::", "at::"}) {
    for (std::string_view fn : {"empty", "zeros", "ones", "full", "empty_strided", "empty_like",
                                "zeros_like", "ones_like", "full_like"}) {
      const std::string callee = std::string(ns) + std::string(fn);
      const bool like = fn.size() > 5 && fn.substr(fn.size() - 5) == "_like";
      for (const auto& [at, open] : find_calls(code, callee)) {
        const std::size_t close = matching_close(code, open);
        if (close == std::string::npos) continue;
        const auto args = split_arguments(code, open, close);
        std::optional<std::string> found;
        bool other_dtype = false;  // a _like call given options with another dtype
        for (std::size_t i = 0; i < args.size(); ++i) {
          const std::string_view a = f.code_at(args[i].first, args[i].second);
          if (auto w = c_argument_takes_logits_dtype(a)) {
            found = *w;
          } else if (like && i > 0 && a.find("dtype") != std::string_view::npos) {
            other_dtype = true;
          }
        }
        if (!found && like && !args.empty() && !other_dtype) {
          const std::string_view first = f.code_at(args[0].first, args[0].second);
          if (dotted_name(first) && logit_name(first)) found = std::string(first);
        }
        if (found) out.push_back({at, fmt::format("{}({})", callee, *found)});
      }
    }
  }
  return out;
}

}  // namespace

void rule_logprob_output_dtype(const SourceFile& f, const std::vector<PythonScope>& scopes,
                               std::vector<RepoFinding>& out) {
  const bool py = f.language == SourceLanguage::kPython;
  for (const Alloc& a : py ? python_allocs(f) : c_allocs(f)) {
    const std::int64_t line = f.lines.line(a.at);
    const std::string function = py ? scopes[static_cast<std::size_t>(line - 1)].innermost_def
                                    : c_function_name(f, line);
    const std::string name = assigned_name(f, a.at);
    if (!logprob_output(name, function)) continue;
    out.push_back(f.finding(
        kRuleLogprobOutputDtype, a.at,
        fmt::format("logprob output '{}'{} allocated with the logits' dtype: {}; bf16 logits give a "
                    "bf16 logprob where the policy requires FP32 (spec §2.1, §9.5)",
                    name, function.empty() ? "" : " in " + function, a.what)));
  }
}

}  // namespace ws1::audit_detail

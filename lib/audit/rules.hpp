// Internal: the rules of the repository scan, one file each (rule_*.cpp), over one source file
// prepared once (text, code view, line index, Python scopes).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "source_text.hpp"
#include "ws1/audit.hpp"

namespace ws1::audit_detail {

struct SourceFile {
  SourceFile(std::string_view text, std::string_view path, SourceLanguage language);
  std::string_view text;
  std::string code;  // code_view(text)
  LineIndex lines;
  std::string path;
  SourceLanguage language;

  std::string_view code_at(std::size_t b, std::size_t e) const {
    return std::string_view(code).substr(b, e - b);
  }
  std::string_view text_at(std::size_t b, std::size_t e) const { return text.substr(b, e - b); }
  RepoFinding finding(std::string_view rule, std::size_t offset, std::string message) const;
};

// The def / class names enclosing each line of a Python file (outermost first), and the
// offset where the innermost def starts (npos at module level).
struct PythonScope {
  std::vector<std::string> names;
  std::string innermost_def;
  std::size_t def_begin = std::string::npos;
};
std::vector<PythonScope> python_scopes(const SourceFile& f);  // index: line - 1

// The function a C-family line belongs to, by the heuristic of ws1/audit.hpp: the nearest
// line above (or the line itself) that starts in column 1 with an identifier and contains '('.
std::string c_function_name(const SourceFile& f, std::int64_t line);

// Words of an identifier (identifier_words) contain a logprob word: logp, logps, logprob,
// logprobs, lse, or "log" followed by "prob" / "probs" / "p".
bool has_logprob_word(const std::vector<std::string>& words);
bool has_word(const std::vector<std::string>& words, std::initializer_list<std::string_view> any);

// Adds each literal to `counts` (atol or rtol by the name's last word).
void rule_hardcoded_tolerance(const SourceFile& f, std::vector<RepoFinding>& out,
                              ToleranceCount& counts);
void rule_triton_dot_precision(const SourceFile& f, std::vector<RepoFinding>& out);
void rule_gold_low_precision_matmul(const SourceFile& f, const std::vector<PythonScope>& scopes,
                                    std::vector<RepoFinding>& out);
void rule_logprob_output_dtype(const SourceFile& f, const std::vector<PythonScope>& scopes,
                               std::vector<RepoFinding>& out);

}  // namespace ws1::audit_detail

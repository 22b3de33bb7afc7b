// Internal: the small lexing the repository scan needs. A "code view" of a source text has
// the same length and the same line breaks as the text, with comments and the contents of
// string / character literals replaced by spaces (the quotes stay), so the rules can search
// code without matching prose, and read a literal's value at the same offsets of the text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ws1/audit.hpp"

namespace ws1::audit_detail {

std::string code_view(std::string_view text, SourceLanguage language);

// 1-based line and column of byte offsets.
class LineIndex {
 public:
  explicit LineIndex(std::string_view text);
  std::int64_t line(std::size_t offset) const;
  std::int64_t column(std::size_t offset) const;
  std::size_t line_start(std::int64_t line) const;
  std::int64_t lines() const { return static_cast<std::int64_t>(starts_.size()); }
  // The line's text without its line break, trimmed of surrounding blanks.
  std::string_view trimmed_line(std::string_view text, std::int64_t line) const;

 private:
  std::vector<std::size_t> starts_;
};

bool is_ident_char(char c);
bool is_ident_start(char c);

// The identifier that ends just before `end` (exclusive), or empty.
std::string_view identifier_before(std::string_view code, std::size_t end);
// Offset after skipping blanks (spaces, tabs, line breaks; with `backslash_newlines`, also a
// backslash line continuation) from `pos`.
std::size_t skip_blanks(std::string_view code, std::size_t pos);
// Offset of the last non-blank character before `end`, or npos.
std::size_t last_nonblank_before(std::string_view code, std::size_t end);

// The ')' matching the '(' at `open` in a code view (brackets of all kinds nest), or npos.
std::size_t matching_close(std::string_view code, std::size_t open);
// The top-level arguments strictly inside (open, close), as [begin, end) offsets, trimmed.
std::vector<std::pair<std::size_t, std::size_t>> split_arguments(std::string_view code,
                                                                 std::size_t open,
                                                                 std::size_t close);
// "name = value" keyword argument: the name, and the value's [begin, end); empty name when the
// argument is positional.
struct KeywordArg {
  std::string_view name;
  std::size_t value_begin = 0, value_end = 0;
};
KeywordArg keyword_argument(std::string_view code, std::size_t begin, std::size_t end);

// The words of an identifier, lower case, split at '_' and at camelCase boundaries:
// "NativeGemmOp" -> native, gemm, op; "grad_ATOL" -> grad, atol; "kAtol" -> k, atol.
std::vector<std::string> identifier_words(std::string_view identifier);

// Calls in a code view: the offset of each occurrence of `dotted` (e.g. "torch.matmul",
// "tl.dot", "torch::empty") that stands as a whole name (no identifier character or '.'
// or ':' before it) and is followed by blanks and '('. Returns (name offset, '(' offset).
std::vector<std::pair<std::size_t, std::size_t>> find_calls(std::string_view code,
                                                            std::string_view dotted);

}  // namespace ws1::audit_detail

// The code view and the small parsing helpers of the repository scan (source_text.hpp).
#include "source_text.hpp"

#include <algorithm>
#include <cctype>

namespace ws1::audit_detail {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Replaces text[from, to) by spaces in `out`, keeping line breaks.
void blank(std::string& out, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to && i < out.size(); ++i)
    if (out[i] != '\n' && out[i] != '\r') out[i] = ' ';
}

// A quoted literal starting at `i` (the opening quote `q`), ending at the closing quote on the
// same line (backslash escapes the next character), or at the line's end for an unterminated
// one. Returns the offset just past it; the contents are blanked.
std::size_t quoted(std::string_view t, std::string& out, std::size_t i, char q) {
  std::size_t j = i + 1;
  while (j < t.size() && t[j] != q && t[j] != '\n') {
    if (t[j] == '\\' && j + 1 < t.size()) ++j;
    ++j;
  }
  blank(out, i + 1, j);
  return j < t.size() && t[j] == q ? j + 1 : j;
}

std::string python_view(std::string_view t) {
  std::string out(t);
  std::size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if (c == '#') {
      std::size_t j = t.find('\n', i);
      if (j == std::string_view::npos) j = t.size();
      blank(out, i, j);
      i = j;
    } else if (c == '"' || c == '\'') {
      if (t.substr(i, 3) == std::string(3, c)) {  // triple-quoted, may span lines
        const std::string close(3, c);
        std::size_t j = i + 3;
        while (j < t.size() && t.substr(j, 3) != close) {
          if (t[j] == '\\' && j + 1 < t.size()) ++j;
          ++j;
        }
        blank(out, i + 3, std::min(j, t.size()));
        i = j < t.size() ? j + 3 : t.size();
      } else {
        i = quoted(t, out, i, c);
      }
    } else {
      ++i;
    }
  }
  return out;
}

// A C++ digit separator: a quote inside a number token (1'000'000, 0xFF'FF).
bool digit_separator(std::string_view t, std::size_t i) {
  if (i == 0 || i + 1 >= t.size() || !std::isxdigit(static_cast<unsigned char>(t[i - 1])) ||
      !std::isxdigit(static_cast<unsigned char>(t[i + 1])))
    return false;
  std::size_t b = i;
  while (b > 0 && (is_ident_char(t[b - 1]) || t[b - 1] == '\'' || t[b - 1] == '.')) --b;
  return std::isdigit(static_cast<unsigned char>(t[b])) != 0;
}

std::string c_family_view(std::string_view t) {
  std::string out(t);
  std::size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if (c == '/' && i + 1 < t.size() && t[i + 1] == '/') {
      std::size_t j = t.find('\n', i);
      if (j == std::string_view::npos) j = t.size();
      blank(out, i, j);
      i = j;
    } else if (c == '/' && i + 1 < t.size() && t[i + 1] == '*') {
      std::size_t j = t.find("*/", i + 2);
      j = j == std::string_view::npos ? t.size() : j + 2;
      blank(out, i, j);
      i = j;
    } else if (c == '"') {
      // Raw string R"delim( ... )delim" (with an optional u8 / u / U / L prefix before R).
      const bool raw = i > 0 && t[i - 1] == 'R' &&
                       (i < 2 || !is_ident_char(t[i - 2]) || t[i - 2] == '8' ||
                        t[i - 2] == 'u' || t[i - 2] == 'U' || t[i - 2] == 'L');
      if (raw) {
        const std::size_t paren = t.find('(', i + 1);
        if (paren != std::string_view::npos && paren - i - 1 <= 16) {
          const std::string close = ")" + std::string(t.substr(i + 1, paren - i - 1)) + "\"";
          std::size_t j = t.find(close, paren + 1);
          const std::size_t end = j == std::string_view::npos ? t.size() : j + close.size();
          blank(out, i + 1, end == t.size() ? end : end - 1);
          i = end;
          continue;
        }
      }
      i = quoted(t, out, i, '"');
    } else if (c == '\'' && !digit_separator(t, i)) {
      i = quoted(t, out, i, '\'');
    } else {
      ++i;
    }
  }
  return out;
}

}  // namespace

bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}
bool is_ident_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0 || c == '_';
}

std::string code_view(std::string_view text, SourceLanguage language) {
  return language == SourceLanguage::kPython ? python_view(text) : c_family_view(text);
}

LineIndex::LineIndex(std::string_view text) {
  starts_.push_back(0);
  for (std::size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') starts_.push_back(i + 1);
}

std::int64_t LineIndex::line(std::size_t offset) const {
  auto it = std::upper_bound(starts_.begin(), starts_.end(), offset);
  return static_cast<std::int64_t>(it - starts_.begin());
}

std::int64_t LineIndex::column(std::size_t offset) const {
  return static_cast<std::int64_t>(offset - line_start(line(offset))) + 1;
}

std::size_t LineIndex::line_start(std::int64_t line) const {
  return starts_[static_cast<std::size_t>(std::clamp<std::int64_t>(line, 1, lines()) - 1)];
}

std::string_view LineIndex::trimmed_line(std::string_view text, std::int64_t line) const {
  const std::size_t b = line_start(line);
  std::size_t e = text.find('\n', b);
  if (e == std::string_view::npos) e = text.size();
  std::string_view s = text.substr(b, e - b);
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view identifier_before(std::string_view code, std::size_t end) {
  std::size_t b = end;
  while (b > 0 && is_ident_char(code[b - 1])) --b;
  if (b == end || !is_ident_start(code[b])) return {};
  return code.substr(b, end - b);
}

std::size_t skip_blanks(std::string_view code, std::size_t pos) {
  while (pos < code.size()) {
    if (is_blank(code[pos])) {
      ++pos;
    } else if (code[pos] == '\\' && pos + 1 < code.size() && code[pos + 1] == '\n') {
      pos += 2;
    } else {
      break;
    }
  }
  return pos;
}

std::size_t last_nonblank_before(std::string_view code, std::size_t end) {
  while (end > 0) {
    --end;
    if (!is_blank(code[end]) && !(code[end] == '\\' && end + 1 < code.size() && code[end + 1] == '\n'))
      return end;
  }
  return std::string_view::npos;
}

std::size_t matching_close(std::string_view code, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < code.size(); ++i) {
    const char c = code[i];
    if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      if (--depth == 0) return c == ')' ? i : std::string_view::npos;
    }
  }
  return std::string_view::npos;
}

std::vector<std::pair<std::size_t, std::size_t>> split_arguments(std::string_view code,
                                                                 std::size_t open,
                                                                 std::size_t close) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  auto push = [&](std::size_t b, std::size_t e) {
    b = skip_blanks(code, b);
    while (e > b && is_blank(code[e - 1])) --e;
    if (e > b) out.emplace_back(b, e);
  };
  int depth = 0;
  std::size_t start = open + 1;
  for (std::size_t i = open + 1; i < close; ++i) {
    const char c = code[i];
    if (c == '(' || c == '[' || c == '{') {
      ++depth;
    } else if (c == ')' || c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      push(start, i);
      start = i + 1;
    }
  }
  push(start, close);
  return out;
}

KeywordArg keyword_argument(std::string_view code, std::size_t begin, std::size_t end) {
  KeywordArg k;
  std::size_t i = begin;
  while (i < end && is_ident_char(code[i])) ++i;
  if (i == begin || !is_ident_start(code[begin])) return k;
  const std::size_t name_end = i;
  i = skip_blanks(code, i);
  if (i >= end || code[i] != '=' || (i + 1 < end && code[i + 1] == '=')) return k;
  k.name = code.substr(begin, name_end - begin);
  k.value_begin = skip_blanks(code, i + 1);
  k.value_end = end;
  return k;
}

std::vector<std::string> identifier_words(std::string_view id) {
  std::vector<std::string> words;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) words.push_back(cur);
    cur.clear();
  };
  for (std::size_t i = 0; i < id.size(); ++i) {
    const char c = id[i];
    if (c == '_' || !is_ident_char(c)) {
      flush();
      continue;
    }
    const bool upper = std::isupper(static_cast<unsigned char>(c)) != 0;
    if (upper && i > 0) {
      const char p = id[i - 1];
      const bool prev_lower = std::islower(static_cast<unsigned char>(p)) != 0 ||
                              std::isdigit(static_cast<unsigned char>(p)) != 0;
      // "GemmOp": split before O; "HTTPServer": split before the S of "Server".
      const bool next_lower = i + 1 < id.size() && std::islower(static_cast<unsigned char>(id[i + 1])) != 0;
      const bool prev_upper = std::isupper(static_cast<unsigned char>(p)) != 0;
      if (prev_lower || (prev_upper && next_lower)) flush();
    }
    cur.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  flush();
  return words;
}

std::vector<std::pair<std::size_t, std::size_t>> find_calls(std::string_view code,
                                                            std::string_view dotted) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t pos = 0;
  while ((pos = code.find(dotted, pos)) != std::string_view::npos) {
    const std::size_t at = pos;
    pos += dotted.size();
    if (at > 0) {
      const char p = code[at - 1];
      if (is_ident_char(p) || p == '.' || p == ':') continue;
    }
    if (pos < code.size() && is_ident_char(code[pos])) continue;
    const std::size_t paren = skip_blanks(code, pos);
    if (paren < code.size() && code[paren] == '(') out.emplace_back(at, paren);
  }
  return out;
}

}  // namespace ws1::audit_detail

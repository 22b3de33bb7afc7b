// `ws1check audit --repo`: walks a foreign tree and runs the rules of rule_*.cpp on each
// source file (ws1/audit.hpp states each rule's pattern).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>
#include <system_error>
#include <tuple>

#include "rules.hpp"

namespace ws1 {
namespace fs = std::filesystem;

namespace audit_detail {

SourceFile::SourceFile(std::string_view t, std::string_view p, SourceLanguage l)
    : text(t), code(code_view(t, l)), lines(t), path(p), language(l) {}

RepoFinding SourceFile::finding(std::string_view rule, std::size_t offset, std::string message) const {
  RepoFinding r;
  r.rule = std::string(rule);
  r.file = path;
  r.line = lines.line(offset);
  // Column in code points (SARIF columnKind unicodeCodePoints): UTF-8 continuation bytes
  // do not start a character.
  r.column = 1;
  for (std::size_t i = lines.line_start(r.line); i < offset; ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++r.column;
  r.message = std::move(message);
  r.snippet = std::string(lines.trimmed_line(text, r.line));
  return r;
}

std::vector<PythonScope> python_scopes(const SourceFile& f) {
  struct Open {
    std::int64_t indent;
    std::string name;
    bool is_def;
    std::size_t begin;
  };
  std::vector<PythonScope> out(static_cast<std::size_t>(f.lines.lines()));
  std::vector<Open> stack;
  int depth = 0;  // bracket depth at the start of the line
  const std::string_view code = f.code;
  for (std::int64_t ln = 1; ln <= f.lines.lines(); ++ln) {
    const std::size_t b = f.lines.line_start(ln);
    std::size_t e = code.find('\n', b);
    if (e == std::string_view::npos) e = code.size();
    const std::string_view line = code.substr(b, e - b);
    const std::size_t first = line.find_first_not_of(" \t\r\f");
    const bool continuation = depth > 0 || (b >= 2 && code[b - 2] == '\\');
    if (first != std::string_view::npos && !continuation) {
      std::int64_t indent = 0;
      for (std::size_t i = 0; i < first; ++i) indent = line[i] == '\t' ? (indent / 8 + 1) * 8 : indent + 1;
      while (!stack.empty() && stack.back().indent >= indent) stack.pop_back();
      std::string_view rest = line.substr(first);
      if (rest.substr(0, 6) == "async ") {
        const std::size_t k = rest.find_first_not_of(" \t", 6);
        rest = k == std::string_view::npos ? std::string_view() : rest.substr(k);
      }
      for (std::string_view kw : {"def ", "class "}) {
        if (rest.substr(0, kw.size()) != kw) continue;
        std::size_t i = rest.find_first_not_of(" \t", kw.size());
        std::size_t j = i;
        while (j < rest.size() && is_ident_char(rest[j])) ++j;
        if (i != std::string_view::npos && j > i)
          stack.push_back({indent, std::string(rest.substr(i, j - i)), kw == "def ", b});
      }
    }
    PythonScope& s = out[static_cast<std::size_t>(ln - 1)];
    for (const Open& o : stack) {
      s.names.push_back(o.name);
      if (o.is_def) {
        s.innermost_def = o.name;
        s.def_begin = o.begin;
      }
    }
    for (char c : line) {
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    }
  }
  return out;
}

std::string c_function_name(const SourceFile& f, std::int64_t line) {
  const std::string_view code = f.code;
  for (std::int64_t ln = line; ln >= 1; --ln) {
    const std::size_t b = f.lines.line_start(ln);
    std::size_t e = code.find('\n', b);
    if (e == std::string_view::npos) e = code.size();
    const std::string_view l = code.substr(b, e - b);
    if (l.empty() || !is_ident_start(l.front())) continue;
    const std::size_t paren = l.find('(');
    if (paren == std::string_view::npos) continue;
    std::size_t end = paren;
    while (end > 0 && (l[end - 1] == ' ' || l[end - 1] == '\t')) --end;
    const std::string_view name = identifier_before(l, end);
    if (name.empty() || name == "if" || name == "for" || name == "while" || name == "switch" ||
        name == "return")
      continue;
    return std::string(name);
  }
  return {};
}

bool has_word(const std::vector<std::string>& words, std::initializer_list<std::string_view> any) {
  for (const auto& w : words)
    for (std::string_view a : any)
      if (w == a) return true;
  return false;
}

bool has_logprob_word(const std::vector<std::string>& words) {
  if (has_word(words, {"logp", "logps", "logprob", "logprobs", "lse"})) return true;
  for (std::size_t i = 0; i + 1 < words.size(); ++i)
    if (words[i] == "log" && (words[i + 1] == "prob" || words[i + 1] == "probs" || words[i + 1] == "p"))
      return true;
  return false;
}

}  // namespace audit_detail

namespace {

constexpr std::array<RepoRule, 4> kRules{{
    {kRuleHardcodedTolerance, "HardcodedTestTolerance", "warning", "§2.2, §9.1, §11.2 item 13",
     "Hard-coded atol/rtol literal in a test",
     "A test sets an atol or rtol from a number literal instead of reading the tolerance "
     "contract (pattern: an identifier whose last word is atol or rtol, an optional Python "
     "annotation, then '=' (not '==') or a C++ brace, then a decimal literal; test files only: a "
     "test/ or tests/ directory, test_*.py, *_test.*, conftest.py). Dict/JSON keys and "
     "positional tolerances are not counted."},
    {kRuleTritonDotPrecision, "TritonDotWithoutIeeePrecision", "error", "§2.1, §9.7",
     "Triton tl.dot without input_precision=\"ieee\" or allow_tf32=False",
     "A Triton tl.dot (or triton.language.dot) call whose arguments have neither "
     "input_precision=\"ieee\" (a string literal) nor allow_tf32=False: on NVIDIA GPUs FP32 "
     "operands may then run as TF32."},
    {kRuleGoldLowPrecisionMatmul, "GoldMatmulOnLowPrecisionInputs", "error", "§3.1, §9.3",
     "Reference (gold) path multiplies inputs that are not upcast to FP32",
     "torch.matmul / torch.mm / torch.bmm inside a def or class whose name has a word gold, "
     "golden, reference, ref, oracle or native, where no operand has .float(), .double(), "
     "torch.float32/float64/float/double in its text or is a name assigned such an expression "
     "earlier in the same def. With bf16 inputs the gold is then bf16, not FP32."},
    {kRuleLogprobOutputDtype, "LogprobOutputTakesLogitsDtype", "error", "§2.1, §9.5",
     "Logprob output allocated with the logits' dtype",
     "A logprob output (a name with the word logp/logprob/lse, or out/output/result in a "
     "function named for logprobs and not for a backward) assigned an allocation that takes the "
     "logits' dtype: torch.empty_like(logits) / logits.new_empty(...) without dtype=, "
     "torch.empty(..., dtype=logits.dtype), torch::empty(..., logits.options()) without "
     ".dtype(, dtype(logits.scalar_type()). bf16 logits then give a bf16 logprob."},
}};

std::string relative_path(const fs::path& p, const fs::path& root) {
  std::error_code ec;
  fs::path rel = fs::relative(p, root, ec);
  if (ec || rel.empty()) rel = p.lexically_relative(root);
  return rel.generic_string();
}

bool skipped_dir(const fs::path& p) {
  const std::string name = p.filename().string();
  return (!name.empty() && name[0] == '.') || name == "__pycache__" || name == "node_modules";
}

Result<std::string> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return bad_input(p.string(), "", "cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return bad_input(p.string(), "", "read failed");
  return s.str();
}

}  // namespace

std::optional<SourceLanguage> source_language(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".py") return SourceLanguage::kPython;
  for (std::string_view e : {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh"})
    if (ext == e) return SourceLanguage::kCFamily;
  return std::nullopt;
}

bool is_test_path(std::string_view relative) {
  const fs::path p{std::string(relative)};
  for (const auto& part : p.parent_path())
    if (part == "test" || part == "tests") return true;
  const std::string name = p.filename().string();
  const std::string stem = p.stem().string();
  auto ends_with = [](const std::string& s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return name.rfind("test_", 0) == 0 || ends_with(stem, "_test") || ends_with(stem, "_tests") ||
         name == "conftest.py";
}

std::span<const RepoRule> repo_rules() { return kRules; }

namespace {

std::vector<RepoFinding> scan_one(std::string_view text, std::string_view path,
                                  SourceLanguage language, bool test_file, ToleranceCount& counts) {
  using namespace audit_detail;
  const SourceFile f(text, path, language);
  std::vector<RepoFinding> out;
  if (test_file) rule_hardcoded_tolerance(f, out, counts);
  std::vector<PythonScope> scopes;
  if (language == SourceLanguage::kPython) {
    scopes = python_scopes(f);
    rule_triton_dot_precision(f, out);
    rule_gold_low_precision_matmul(f, scopes, out);
  }
  rule_logprob_output_dtype(f, scopes, out);
  std::sort(out.begin(), out.end(), [](const RepoFinding& a, const RepoFinding& b) {
    return std::tie(a.line, a.column, a.rule) < std::tie(b.line, b.column, b.rule);
  });
  return out;
}

}  // namespace

std::vector<RepoFinding> scan_source_text(std::string_view text, std::string_view relative_path,
                                          SourceLanguage language, bool test_file) {
  ToleranceCount unused;
  return scan_one(text, relative_path, language, test_file, unused);
}

Result<RepoScan> scan_repo(const fs::path& root, const RepoScanOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return bad_input(root.string(), "--repo", "not a directory (or not readable)");
  RepoScan scan;
  scan.root = root.string();
  std::vector<fs::path> files;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) return bad_input(root.string(), "--repo", "cannot list: " + ec.message());
  for (const fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
    if (ec) return bad_input(root.string(), "--repo", "cannot list: " + ec.message());
    const fs::directory_entry& e = *it;
    if (e.is_symlink(ec)) {
      if (e.is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (e.is_directory(ec)) {
      const std::string rel = relative_path(e.path(), root);
      if (skipped_dir(e.path()) ||
          std::find(options.excluded.begin(), options.excluded.end(), rel) != options.excluded.end())
        it.disable_recursion_pending();
      continue;
    }
    if (e.is_regular_file(ec) && source_language(e.path())) files.push_back(e.path());
  }
  std::vector<std::pair<std::string, fs::path>> sorted;
  for (const auto& f : files) sorted.emplace_back(relative_path(f, root), f);
  std::sort(sorted.begin(), sorted.end());
  for (const auto& [rel, path] : sorted) {
    const auto size = fs::file_size(path, ec);
    if (ec || size > options.max_file_bytes) {
      scan.skipped.push_back(fmt::format("{}: {}", rel, ec ? ec.message() : fmt::format("larger than {} bytes", options.max_file_bytes)));
      continue;
    }
    auto text = read_all(path);
    if (!text) {
      scan.skipped.push_back(fmt::format("{}: {}", rel, text.error().problem));
      continue;
    }
    ++scan.files_scanned;
    ToleranceCount counts;
    auto found = scan_one(*text, rel, *source_language(path),
                          options.all_test_files || is_test_path(rel), counts);
    if (counts.total() > 0) {
      scan.tolerance_by_file[rel] = counts;
      scan.tolerance_total.atol += counts.atol;
      scan.tolerance_total.rtol += counts.rtol;
    }
    for (auto& x : found) scan.findings.push_back(std::move(x));
  }
  return scan;
}

}  // namespace ws1

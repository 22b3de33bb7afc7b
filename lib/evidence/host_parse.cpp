#include "host_parse.hpp"

#include <array>

namespace ws1::evidence_detail {
namespace {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Calls f(line) for each line of text until f returns true.
template <class F>
bool for_each_line(std::string_view text, F&& f) {
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    if (f(line)) return true;
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return false;
}

// os-release values follow shell quoting rules; handle the forms the file format allows:
// bare, "double" (with \" \\ \$ \` escapes) and 'single'.
std::string unquote(std::string_view v) {
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') return std::string(v.substr(1, v.size() - 2));
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    v = v.substr(1, v.size() - 2);
    std::string out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '\\' && i + 1 < v.size()) ++i;
      out += v[i];
    }
    return out;
  }
  return std::string(v);
}

}  // namespace

std::optional<std::string> os_release_pretty_name(std::string_view text) {
  std::optional<std::string> found;
  for_each_line(text, [&](std::string_view line) {
    line = trim(line);
    constexpr std::string_view key = "PRETTY_NAME=";
    if (line.substr(0, key.size()) != key) return false;
    std::string v = unquote(trim(line.substr(key.size())));
    if (!v.empty()) found = std::move(v);
    return true;
  });
  return found;
}

std::optional<std::string> cpuinfo_model(std::string_view text) {
  constexpr std::array<std::string_view, 5> keys = {"model name", "Model", "Hardware",
                                                    "cpu model", "Processor"};
  for (std::string_view key : keys) {
    std::optional<std::string> found;
    for_each_line(text, [&](std::string_view line) {
      const auto colon = line.find(':');
      if (colon == std::string_view::npos || trim(line.substr(0, colon)) != key) return false;
      const std::string_view v = trim(line.substr(colon + 1));
      if (v.empty()) return false;
      found = std::string(v);
      return true;
    });
    if (found) return found;
  }
  return std::nullopt;
}

std::optional<std::string> git_commit_from_output(std::string_view out) {
  if (!out.empty() && out.back() == '\n') out.remove_suffix(1);
  if (out.size() != 40 && out.size() != 64) return std::nullopt;
  for (char c : out)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  return std::string(out);
}

}  // namespace ws1::evidence_detail

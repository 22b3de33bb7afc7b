// SARIF 2.1.0 for the repository scan: what code-scanning services read (tool.driver with its
// rules; per result ruleId, level, message.text, physicalLocation with artifactLocation.uri and
// region.startLine).
#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>

#include "ws1/audit.hpp"

namespace ws1 {
namespace {

using json = nlohmann::ordered_json;

// RFC 3986: unreserved characters and '/' stay, everything else is percent-encoded.
std::string uri_encode(std::string_view path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/')
      out.push_back(static_cast<char>(c));
    else
      out += fmt::format("%{:02X}", c);
  }
  return out;
}

std::string root_uri(const std::string& root) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(root, ec);
  std::string s = (ec ? std::filesystem::path(root) : abs).lexically_normal().generic_string();
  if (s.empty() || s.back() != '/') s.push_back('/');
  return "file://" + uri_encode(s);
}

}  // namespace

std::string sarif_json(const RepoScan& scan, std::string_view tool_version) {
  json rules = json::array();
  std::map<std::string, std::size_t> index;
  for (const RepoRule& r : repo_rules()) {
    index[std::string(r.id)] = rules.size();
    rules.push_back(json{{"id", r.id},
                         {"name", r.name},
                         {"shortDescription", {{"text", r.short_description}}},
                         {"fullDescription", {{"text", r.full_description}}},
                         {"defaultConfiguration", {{"level", r.level}}},
                         {"help", {{"text", fmt::format("{} (WS1 precision standard {}).",
                                                       r.full_description, r.spec)}}},
                         {"properties", {{"spec", r.spec}}}});
  }
  json results = json::array();
  for (const RepoFinding& f : scan.findings) {
    const std::size_t i = index.at(f.rule);
    results.push_back(json{
        {"ruleId", f.rule},
        {"ruleIndex", i},
        {"level", repo_rules()[i].level},
        {"message", {{"text", f.message}}},
        {"locations",
         json::array({json{{"physicalLocation",
                            {{"artifactLocation", {{"uri", uri_encode(f.file)}, {"uriBaseId", "SRCROOT"}}},
                             {"region", {{"startLine", f.line},
                                         {"startColumn", f.column},
                                         {"snippet", {{"text", f.snippet}}}}}}}}})}});
  }
  json run{{"tool", {{"driver", {{"name", "ws1check"},
                                 {"version", tool_version},
                                 {"rules", rules}}}}},
           {"originalUriBaseIds", {{"SRCROOT", {{"uri", root_uri(scan.root)}}}}},
           {"columnKind", "unicodeCodePoints"},
           {"results", results}};
  json doc{{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"},
           {"version", "2.1.0"},
           {"runs", json::array({run})}};
  // Source lines need not be UTF-8: invalid bytes become U+FFFD instead of an exception.
  return doc.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace ws1

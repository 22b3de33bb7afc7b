// Reading a C8 file (ours or upstream's) and comparing two matrices row by row.
#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "json_node.hpp"
#include "ws1/report.hpp"

namespace ws1 {
namespace {

using json::Node;

constexpr std::uintmax_t kMaxC8Bytes = 64u << 20;

std::optional<std::string> string_or_null(const Node& obj, std::string_view key) {
  auto n = obj.find(key);
  if (!n || n->type_name() == "null") return std::nullopt;
  return std::string(n->string());
}

C8Matrix parse(const Node& root) {
  C8Matrix m;
  const Node version = root.at("schema_version");
  if (version.string() != kC8SchemaVersion)
    version.fail(fmt::format("expected \"{}\", got \"{}\"", kC8SchemaVersion, version.string()));
  if (auto git = root.find("git")) {
    m.git_commit = string_or_null(*git, "commit");
    m.git_branch = string_or_null(*git, "branch");
    if (auto d = git->find("dirty"); d && d->type_name() != "null") m.git_dirty = d->boolean();
  }
  if (auto env = root.find("environment"))
    for (const auto& [k, v] : env->fields())
      m.environment.emplace_back(k, v.type_name() == "null" ? std::nullopt
                                                            : std::optional(std::string(v.string())));
  if (auto w = root.find("workload")) {
    m.workload_id = string_or_null(*w, "workload_id").value_or("");
    m.manifest_version = string_or_null(*w, "manifest_version").value_or("");
    m.fixture_identity_sha256 = string_or_null(*w, "fixture_identity_sha256").value_or("");
  }
  m.command = string_or_null(root, "command").value_or("");
  m.threshold_source = string_or_null(root, "threshold_source").value_or("");
  m.fallback_policy = string_or_null(root, "fallback_policy").value_or("");
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::string> seen;
  for (const Node& n : root.at("cells").items()) {
    C8Cell c;
    c.profile = n.at("profile").nonempty_string();
    c.op_name = n.at("op_name").nonempty_string();
    c.judgment = n.at("judgment").nonempty_string();
    c.tier = n.at("tier").nonempty_string();
    c.status = n.at("status").nonempty_string();
    c.case_id = string_or_null(n, "case_id");
    c.detail = string_or_null(n, "detail").value_or("");
    c.candidate = string_or_null(n, "candidate");
    c.expected_kernel_config_id = string_or_null(n, "expected_kernel_config_id");
    c.actual_backend_id = string_or_null(n, "actual_backend_id");
    c.actual_kernel_config_id = string_or_null(n, "actual_kernel_config_id");
    c.evidence_kind = string_or_null(n, "evidence_kind").value_or("");
    auto [it, fresh] = seen.emplace(std::tuple{c.profile, c.op_name, c.judgment, c.tier}, n.path());
    if (!fresh)
      n.fail(fmt::format("repeats the row (profile {}, op {}, judgment {}, tier {}) of {}",
                         c.profile, c.op_name, c.judgment, c.tier, it->second));
    m.cells.push_back(std::move(c));
  }
  return m;
}

using Key = std::tuple<std::string, std::string, std::string>;  // op, judgment, tier

std::vector<std::string> profiles_of(const C8Matrix& m) {
  std::vector<std::string> out;
  for (const auto& c : m.cells)
    if (std::find(out.begin(), out.end(), c.profile) == out.end()) out.push_back(c.profile);
  return out;
}

}  // namespace

Result<C8Matrix> read_c8(const std::filesystem::path& path) {
  const std::string file = path.string();
  auto text = json::read_text_file(path, kMaxC8Bytes);
  if (!text) return text.error();
  try {
    simdjson::dom::parser parser;
    return parse(json::parse_document(parser, *text, file));
  } catch (const json::Failure& f) {
    return f.error;
  } catch (const std::exception& e) {
    return bad_input(file, "$", std::string("cannot parse: ") + e.what());
  }
}

std::vector<C8Difference> compare_c8(const C8Matrix& ours, const C8Matrix& theirs) {
  const std::vector<std::string> their_profiles = profiles_of(theirs);
  std::vector<C8Difference> out;
  for (const std::string& mine : profiles_of(ours)) {
    std::vector<std::string> against;
    if (std::find(their_profiles.begin(), their_profiles.end(), mine) != their_profiles.end())
      against = {mine};
    else
      against = their_profiles;
    if (against.empty()) against = {""};  // theirs has no rows: every row of ours differs
    for (const std::string& other : against) {
      // Rows of `other` in `theirs`, by key; each is ticked off when ours has it.
      std::map<Key, std::pair<const C8Cell*, bool>> rows;
      std::vector<Key> their_order;
      for (const C8Cell& c : theirs.cells)
        if (c.profile == other) {
          Key k{c.op_name, c.judgment, c.tier};
          rows[k] = {&c, false};
          their_order.push_back(k);
        }
      for (const C8Cell& c : ours.cells) {
        if (c.profile != mine) continue;
        C8Difference d{mine, other, c.op_name, c.judgment, c.tier, c.status, std::nullopt};
        auto it = rows.find(Key{c.op_name, c.judgment, c.tier});
        if (it != rows.end()) {
          it->second.second = true;
          if (it->second.first->status == c.status) continue;
          d.theirs = it->second.first->status;
        }
        out.push_back(std::move(d));
      }
      for (const Key& k : their_order) {
        const auto& [cell, matched] = rows.at(k);
        if (!matched)
          out.push_back({mine, other, cell->op_name, cell->judgment, cell->tier, std::nullopt,
                         cell->status});
      }
    }
  }
  return out;
}

}  // namespace ws1

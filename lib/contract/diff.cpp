// diff_contract_files: each file is read once, validated by the loader (parse_contract) and
// parsed again into a DOM from the same bytes, so the rows describe exactly what was validated.
// Each document is flattened to path -> compact value, and the two sorted maps are merged.
#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "json_node.hpp"
#include "ws1/contract.hpp"
#include "ws1/contract_diff.hpp"

namespace ws1 {
namespace {

using json::get_as;
using json::Node;
using simdjson::dom::element_type;
using Leaves = std::map<std::string, std::string>;  // json path -> compact JSON value

// load_contract's bound: a contract is kilobytes.
constexpr std::uintmax_t kMaxContractBytes = std::uintmax_t{64} << 20;

// Non-empty objects are walked; everything else (an empty object included) is one leaf.
void flatten(const Node& node, Leaves& out) {
  const simdjson::dom::element e = node.element();
  if (e.is_object() && get_as<simdjson::dom::object>(e).size() > 0) {
    for (const auto& [key, child] : node.fields()) flatten(child, out);
    return;
  }
  out.emplace(node.path(), simdjson::minify(e));
}

Result<Leaves> validated_leaves(const std::filesystem::path& path) {
  const std::string file = path.string();
  Result<std::string> text = json::read_text_file(path, kMaxContractBytes);
  if (!text) return text.error();
  if (Result<Contract> c = parse_contract(text.value(), file); !c) return c.error();
  try {
    simdjson::dom::parser parser;
    const Node root = json::parse_document(parser, text.value(), file);
    Leaves leaves;
    flatten(root, leaves);
    return leaves;
  } catch (const json::Failure& f) {
    return f.error;
  }
}

}  // namespace

Result<std::vector<ContractRowDiff>> diff_contract_files(const std::filesystem::path& base,
                                                         const std::filesystem::path& other) {
  Result<Leaves> a = validated_leaves(base);
  if (!a) return a.error();
  Result<Leaves> b = validated_leaves(other);
  if (!b) return b.error();

  // Merge of two path-sorted maps: each path once, in order.
  std::vector<ContractRowDiff> rows;
  auto i = a->begin();
  auto j = b->begin();
  while (i != a->end() || j != b->end()) {
    if (j == b->end() || (i != a->end() && i->first < j->first)) {
      rows.push_back({i->first, i->second, std::nullopt});
      ++i;
    } else if (i == a->end() || j->first < i->first) {
      rows.push_back({j->first, std::nullopt, j->second});
      ++j;
    } else {
      if (i->second != j->second) rows.push_back({i->first, i->second, j->second});
      ++i;
      ++j;
    }
  }
  return rows;
}

}  // namespace ws1

// load_contract / parse_contract: read the bytes, parse with simdjson's DOM parser (it rejects
// trailing content) and reject duplicate keys (lib/json), then hand each top-level block to its
// parser.
#include <exception>

#include "parse.hpp"
#include "ws1/hash.hpp"

namespace ws1 {
namespace {

using json::Node;

constexpr std::size_t kMaxContractBytes = 64u
                                          << 20;  // a contract is kilobytes; refuse absurd input

void check_version(const Node& v) {
  const std::string_view s = v.string();
  for (auto known : contract_known_versions())
    if (s == known) return;
  v.fail("unknown contract version \"" + std::string(s) + "\" (known: ws1-c1-v2, ws1-c1-v3)");
}

Contract parse_document(std::string_view text, const std::string& file) {
  simdjson::dom::parser parser;
  const Node root = json::parse_document(parser, text, file);
  if (!root.element().is_object())
    root.fail("must be a JSON object, got " + std::string(root.type_name()));

  // Top level is extensible (upstream adds blocks over time), except ws1check's own namespace.
  for (const auto& [key, child] : root.fields())
    if (key.rfind("ws1check", 0) == 0 && key != kDeclarationsKey)
      child.fail("unknown key in ws1check's namespace (known: " + std::string(kDeclarationsKey) +
                 ")");
  for (auto key : contract_required_top_level_keys()) (void)root.at(key);

  Contract c;
  c.file = file;
  c.sha256 = sha256_hex(text);
  const Node version = root.at("version");
  check_version(version);
  c.version = std::string(version.string());
  c.policy = contract_detail::parse_policy(root.at("policy"));
  c.roles = contract_detail::parse_roles(root.at("comparison_roles"));
  c.judgments = contract_detail::parse_judgments(root.at("judgments"));
  c.chain = contract_detail::parse_chain(root.at("chain_logprob_aggregates"));
  c.legacy = contract_detail::parse_legacy(root.find("accuracy"), root.find("batch_invariance"), c);
  if (auto block = root.find(kDeclarationsKey))
    c.declarations = contract_detail::parse_declarations(*block, c.policy);
  // judgment_rules changes verdicts: v3 carries it, and a v2 file must not (its verdicts are
  // upstream's rows alone).
  const auto rules = root.find(kJudgmentRulesKey);
  if (c.version == "ws1-c1-v3" && !rules)
    root.fail_at(kJudgmentRulesKey, "required in ws1-c1-v3");
  if (c.version != "ws1-c1-v3" && rules)
    rules->fail("a ws1-c1-v3 block; version " + c.version + " is judged by its table rows alone");
  if (rules) c.rules = contract_detail::parse_rules(*rules);
  return c;
}

}  // namespace

Result<Contract> parse_contract(std::string_view text, std::string file) {
  try {
    return parse_document(text, file);
  } catch (const json::Failure& f) {
    return f.error;
  } catch (const std::exception& e) {
    return bad_input(std::move(file), "$", std::string("cannot parse: ") + e.what());
  }
}

Result<Contract> load_contract(const std::filesystem::path& path) {
  Result<std::string> text = json::read_text_file(path, kMaxContractBytes);
  if (!text) return text.error();
  return parse_contract(text.value(), path.string());
}

}  // namespace ws1

// load_contract / parse_contract: read the bytes, parse with simdjson's DOM parser (it rejects
// trailing content), reject duplicate keys, then hand each top-level block to its parser.
#include <simdjson.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>

#include "parse.hpp"
#include "ws1/hash.hpp"

namespace ws1 {
namespace {

using contract_detail::Node;
using contract_detail::ParseFailure;

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
  const simdjson::padded_string padded(text);
  simdjson::dom::element root_element;
  if (auto err = parser.parse(padded).get(root_element))
    throw ParseFailure{
        bad_input(file, "$", std::string("not valid JSON: ") + simdjson::error_message(err))};

  const Node root(root_element, "$", &file);
  contract_detail::reject_duplicate_keys(root);
  if (!root_element.is_object())
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
  return c;
}

}  // namespace

Result<Contract> parse_contract(std::string_view text, std::string file) {
  try {
    return parse_document(text, file);
  } catch (const ParseFailure& f) {
    return f.error;
  } catch (const std::exception& e) {
    return bad_input(std::move(file), "$", std::string("cannot parse: ") + e.what());
  }
}

Result<Contract> load_contract(const std::filesystem::path& path) {
  const std::string file = path.string();
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    return bad_input(file, "", "not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad_input(file, "", std::string("cannot open: ") + std::strerror(errno));
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxContractBytes)
    return bad_input(file, "",
                     "file too large for a contract (" + std::to_string(size) + " bytes)");
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception& e) {
    return bad_input(file, "", std::string("cannot read: ") + e.what());
  }
  if (in.bad()) return bad_input(file, "", "cannot read: I/O error");
  return parse_contract(text, file);
}

}  // namespace ws1

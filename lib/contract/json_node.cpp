#include "json_node.hpp"

#include <fmt/core.h>

#include <cctype>
#include <cmath>
#include <set>

namespace ws1::contract_detail {
namespace {

bool plain_key(std::string_view key) {
  if (key.empty()) return false;
  for (unsigned char c : key)
    if (!std::isalnum(c) && c != '_' && c != '-') return false;
  return true;
}

// Keys with dots, spaces or quotes are written `["..."]` so the path stays unambiguous.
std::string quoted_key(std::string_view key) {
  std::string out = "[\"";
  for (char c : key) {
    if (c == '"' || c == '\\') out += '\\';
    out += (static_cast<unsigned char>(c) < 0x20) ? '?' : c;
  }
  return out + "\"]";
}

}  // namespace

std::string Node::child_path(std::string_view key) const {
  if (!plain_key(key)) return (path_ == "$" ? std::string("$") : path_) + quoted_key(key);
  if (path_ == "$") return std::string(key);
  return path_ + "." + std::string(key);
}

std::string Node::index_path(std::size_t i) const { return path_ + "[" + std::to_string(i) + "]"; }

void Node::fail(std::string problem) const {
  throw ParseFailure{bad_input(*file_, path_, std::move(problem))};
}

void Node::fail_at(std::string_view key, std::string problem) const {
  throw ParseFailure{bad_input(*file_, child_path(key), std::move(problem))};
}

std::string_view Node::type_name() const {
  switch (element_.type()) {
    case simdjson::dom::element_type::ARRAY:
      return "array";
    case simdjson::dom::element_type::OBJECT:
      return "object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE:
      return "number";
    case simdjson::dom::element_type::STRING:
      return "string";
    case simdjson::dom::element_type::BOOL:
      return "boolean";
    case simdjson::dom::element_type::NULL_VALUE:
      return "null";
  }
  return "unknown";
}

Node Node::at(std::string_view key) const {
  if (auto n = find(key)) return *n;
  fail_at(key, "missing required key");
}

std::optional<Node> Node::find(std::string_view key) const {
  simdjson::dom::object obj;
  if (element_.get_object().get(obj))
    fail(std::string("must be an object, got ") + std::string(type_name()));
  simdjson::dom::element child;
  if (obj.at_key(key).get(child)) return std::nullopt;
  return Node(child, child_path(key), file_);
}

std::vector<std::pair<std::string, Node>> Node::fields() const {
  simdjson::dom::object obj;
  if (element_.get_object().get(obj))
    fail(std::string("must be an object, got ") + std::string(type_name()));
  std::vector<std::pair<std::string, Node>> out;
  for (auto field : obj)
    out.emplace_back(std::string(field.key), Node(field.value, child_path(field.key), file_));
  return out;
}

void Node::allow_only(std::initializer_list<std::string_view> allowed) const {
  for (const auto& [key, child] : fields()) {
    bool known = false;
    for (auto a : allowed) known = known || a == key;
    if (!known) child.fail("unknown key (allowed here: " + join_names(allowed) + ")");
  }
}

std::vector<Node> Node::items() const {
  simdjson::dom::array arr;
  if (element_.get_array().get(arr))
    fail(std::string("must be an array, got ") + std::string(type_name()));
  std::vector<Node> out;
  std::size_t i = 0;
  for (auto e : arr) out.emplace_back(e, index_path(i++), file_);
  return out;
}

std::string_view Node::string() const {
  std::string_view s;
  if (element_.get_string().get(s))
    fail(std::string("must be a string, got ") + std::string(type_name()));
  return s;
}

std::string_view Node::nonempty_string() const {
  const std::string_view s = string();
  if (s.empty()) fail("must be a non-empty string");
  return s;
}

double Node::number() const {
  double v = 0;
  if (!element_.is_number() || element_.get_double().get(v))
    fail(std::string("must be a number, got ") + std::string(type_name()));
  // simdjson rejects out-of-range literals such as 1e999 at parse time; keep the check anyway so
  // no non-finite value can reach a threshold.
  if (!std::isfinite(v)) fail("must be a finite number");
  return v;
}

double Node::nonnegative() const {
  const double v = number();
  if (v < 0) fail("must be >= 0, got " + format_number(v));
  return v;
}

std::int64_t Node::integer() const {
  std::int64_t v = 0;
  if (element_.type() == simdjson::dom::element_type::DOUBLE)
    fail("must be an integer, got the non-integer number " +
         format_number(element_.get_double().value_unsafe()));
  if (element_.get_int64().get(v))
    fail(std::string("must be an integer, got ") + std::string(type_name()));
  return v;
}

bool Node::boolean() const {
  bool v = false;
  if (element_.get_bool().get(v))
    fail(std::string("must be true or false, got ") + std::string(type_name()));
  return v;
}

void reject_duplicate_keys(const Node& node) {
  const simdjson::dom::element e = node.element();
  if (e.is_object()) {
    std::set<std::string_view> seen;
    for (const auto& [key, child] : node.fields()) {
      if (!seen.insert(std::string_view(key)).second) child.fail("duplicate key");
      reject_duplicate_keys(child);
    }
  } else if (e.is_array()) {
    for (const auto& child : node.items()) reject_duplicate_keys(child);
  }
}

std::string join_names(std::initializer_list<std::string_view> names) {
  std::string out;
  for (auto n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

bool same_ignoring_spaces(std::string_view a, std::string_view b) {
  auto squeeze = [](std::string_view s) {
    std::string out;
    for (unsigned char c : s)
      if (!std::isspace(c)) out += static_cast<char>(c);
    return out;
  };
  return squeeze(a) == squeeze(b);
}

std::string format_number(double v) { return fmt::format("{}", v); }

}  // namespace ws1::contract_detail

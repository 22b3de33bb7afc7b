#include "json_node.hpp"

#include <fmt/core.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <set>

namespace ws1::json {
namespace {

using simdjson::dom::element_type;

// '/' stays plain: fixture ids such as `rms_norm/short/normal` are keys, and a slash does not
// make a dotted path ambiguous.
bool plain_key(std::string_view key) {
  if (key.empty()) return false;
  for (unsigned char c : key)
    if (!std::isalnum(c) && c != '_' && c != '-' && c != '/') return false;
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

void reject_duplicate_keys(const Node& node) {
  const simdjson::dom::element e = node.element();
  if (e.is_object()) {
    const auto fields = node.fields();
    std::set<std::string_view> seen;
    for (const auto& [key, child] : fields) {
      if (!seen.insert(key).second) child.fail("duplicate key");
      reject_duplicate_keys(child);
    }
  } else if (e.is_array()) {
    for (const auto& child : node.items()) reject_duplicate_keys(child);
  }
}

}  // namespace

std::string Node::child_path(std::string_view key) const {
  if (!plain_key(key)) return path_ + quoted_key(key);
  if (path_ == kRootPath) return std::string(key);
  return path_ + "." + std::string(key);
}

std::string Node::index_path(std::size_t i) const { return path_ + "[" + std::to_string(i) + "]"; }

void Node::fail(std::string problem) const {
  throw Failure{bad_input(*file_, path_, std::move(problem))};
}

void Node::fail_at(std::string_view key, std::string problem) const {
  throw Failure{bad_input(*file_, child_path(key), std::move(problem))};
}

std::string_view Node::type_name() const {
  switch (element_.type()) {
    case element_type::ARRAY:
      return "array";
    case element_type::OBJECT:
      return "object";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
      return "number";
    case element_type::STRING:
      return "string";
    case element_type::BOOL:
      return "boolean";
    case element_type::NULL_VALUE:
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
    fail("must be an object, got " + std::string(type_name()));
  simdjson::dom::element child;
  if (obj.at_key(key).get(child)) return std::nullopt;
  return Node(child, child_path(key), file_);
}

std::vector<std::string> Node::keys() const {
  std::vector<std::string> out;
  for (auto& [key, child] : fields()) out.push_back(std::move(key));
  return out;
}

std::vector<std::pair<std::string, Node>> Node::fields() const {
  simdjson::dom::object obj;
  if (element_.get_object().get(obj))
    fail("must be an object, got " + std::string(type_name()));
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
    fail("must be an array, got " + std::string(type_name()));
  std::vector<Node> out;
  std::size_t i = 0;
  for (auto e : arr) out.emplace_back(e, index_path(i++), file_);
  return out;
}

Node Node::item(std::size_t index) const {
  simdjson::dom::array arr;
  if (element_.get_array().get(arr))
    fail("must be an array, got " + std::string(type_name()));
  simdjson::dom::element child;
  if (arr.at(index).get(child)) fail(fmt::format("index {} out of range", index));
  return Node(child, index_path(index), file_);
}

std::size_t Node::size() const {
  simdjson::dom::array arr;
  if (element_.get_array().get(arr))
    fail("must be an array, got " + std::string(type_name()));
  return arr.size();
}

std::string_view Node::string() const {
  std::string_view s;
  if (element_.get_string().get(s)) fail("must be a string, got " + std::string(type_name()));
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
    fail("must be a number, got " + std::string(type_name()));
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
  switch (element_.type()) {
    case element_type::INT64:
      return get_as<std::int64_t>(element_);
    case element_type::UINT64:
      fail("must be an integer <= 2^63-1, got " + std::to_string(get_as<std::uint64_t>(element_)));
    case element_type::DOUBLE: {
      // simdjson types every literal with a fraction or an exponent as a double, 2.0 included.
      const double v = get_as<double>(element_);
      if (std::trunc(v) == v) fail("must be an integer, got a float literal (" + format_number(v) + ")");
      fail("must be an integer, got the non-integer number " + format_number(v));
    }
    default:
      fail("must be an integer, got " + std::string(type_name()));
  }
}

std::uint64_t Node::uint64() const {
  if (element_.type() == element_type::UINT64) return get_as<std::uint64_t>(element_);
  const std::int64_t v = integer();
  if (v < 0) fail("must be >= 0, got " + std::to_string(v));
  return static_cast<std::uint64_t>(v);
}

bool Node::boolean() const {
  bool v = false;
  if (element_.get_bool().get(v)) fail("must be true or false, got " + std::string(type_name()));
  return v;
}

std::vector<std::int64_t> Node::int_list() const {
  std::vector<std::int64_t> out;
  for (const Node& n : items()) out.push_back(n.integer());
  return out;
}

std::vector<std::string> Node::str_list() const {
  std::vector<std::string> out;
  for (const Node& n : items()) out.emplace_back(n.string());
  return out;
}

Node parse_document(simdjson::dom::parser& parser, std::string_view text, const std::string& file) {
  simdjson::dom::element root;
  // realloc_if_needed: the parser copies `text` into its own padded buffer (with memcpy, so
  // never from a null pointer: an empty view may have one).
  const char* bytes = text.empty() ? "" : text.data();
  if (auto err = parser.parse(bytes, text.size(), true).get(root))
    throw Failure{bad_input(file, std::string(kRootPath),
                            std::string("not valid JSON: ") + simdjson::error_message(err))};
  Node node(root, std::string(kRootPath), &file);
  reject_duplicate_keys(node);
  return node;
}

Result<std::string> read_text_file(const std::filesystem::path& path, std::uintmax_t max_bytes) {
  const std::string file = path.string();
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    return bad_input(file, "", "not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad_input(file, "", std::string("cannot open: ") + std::strerror(errno));
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes)
    return bad_input(file, "", fmt::format("file too large ({} bytes, limit {})", size, max_bytes));
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception& e) {
    return bad_input(file, "", std::string("cannot read: ") + e.what());
  }
  if (in.bad()) return bad_input(file, "", "cannot read: I/O error");
  return text;
}

std::string join_names(std::initializer_list<std::string_view> names) {
  std::string out;
  for (auto n : names) {
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

std::string format_number(double v) { return fmt::format("{}", v); }

}  // namespace ws1::json

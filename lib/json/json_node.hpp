// Internal (not a public header): reading JSON with simdjson's DOM, shared by the contract and
// fixture loaders. A Node is an element together with its json path; its typed accessors fail
// with `file: path: problem`. A failure is thrown as json::Failure and each module's API
// boundary (load_contract, parse_manifest, ...) turns it back into a ws1::Error, so no
// exception leaves the library.
//
// Paths: the root is "$"; members are joined with '.' (`fixtures.samples[2].token_ids[8]`),
// and a key with other characters than [A-Za-z0-9_/-] is written `["..."]`.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ws1/error.hpp"

namespace ws1::json {

struct Failure {
  Error error;
};

inline constexpr std::string_view kRootPath = "$";

// The value of `e` as T, for raw DOM walks where the caller has checked the type. Copies the
// handle out of the simdjson_result so nothing refers to a destroyed temporary.
template <class T>
T get_as(simdjson::dom::element e) {
  T v{};
  if (e.get(v) != simdjson::SUCCESS) return T{};
  return v;
}

class Node {
 public:
  // `file` names the input in errors; it must outlive the node (and so must the parser).
  Node(simdjson::dom::element element, std::string path, const std::string* file)
      : element_(element), path_(std::move(path)), file_(file) {}

  const std::string& path() const { return path_; }
  std::string child_path(std::string_view key) const;
  std::string index_path(std::size_t i) const;

  [[noreturn]] void fail(std::string problem) const;
  [[noreturn]] void fail_at(std::string_view key, std::string problem) const;

  // Objects. `at` requires the key; `find` returns nullopt when it is absent.
  Node at(std::string_view key) const;
  std::optional<Node> find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key).has_value(); }
  std::vector<std::string> keys() const;  // in file order
  std::vector<std::pair<std::string, Node>> fields() const;
  // Strict objects: every key must be one of `allowed`.
  void allow_only(std::initializer_list<std::string_view> allowed) const;

  // Arrays.
  std::vector<Node> items() const;
  Node item(std::size_t index) const;
  std::size_t size() const;

  // Scalars.
  std::string_view string() const;
  std::string_view nonempty_string() const;
  double number() const;         // finite; an integer or a float literal
  double nonnegative() const;    // finite and >= 0
  std::int64_t integer() const;  // a JSON integer literal (no fraction, no exponent form)
  std::uint64_t uint64() const;  // a JSON integer literal, >= 0
  bool boolean() const;
  std::vector<std::int64_t> int_list() const;
  std::vector<std::string> str_list() const;

  // A string from a closed vocabulary; `what` names the vocabulary in the error.
  template <class E>
  E word(std::optional<E> (*from_name)(std::string_view), std::string_view what,
         std::string_view known) const {
    const std::string_view s = string();
    if (auto v = from_name(s)) return *v;
    fail("unknown " + std::string(what) + " \"" + std::string(s) +
         "\" (known: " + std::string(known) + ")");
  }

  // "object", "array", "string", "number", "boolean", "null".
  std::string_view type_name() const;
  simdjson::dom::element element() const { return element_; }

 private:
  simdjson::dom::element element_;
  std::string path_;
  const std::string* file_;
};

// Parses `text` as exactly one JSON document (the DOM parser refuses trailing content) and
// rejects a key repeated within any object (simdjson keeps both; a lookup would silently pick
// one). Returns the root, at path "$". The nodes borrow from `parser` and `file`.
Node parse_document(simdjson::dom::parser& parser, std::string_view text, const std::string& file);

// The whole file as bytes. Errors name the file: not a regular file, cannot open, larger than
// `max_bytes`, read failure.
Result<std::string> read_text_file(
    const std::filesystem::path& path,
    std::uintmax_t max_bytes = std::numeric_limits<std::uintmax_t>::max());

// "a, b, c" from a list of names.
std::string join_names(std::initializer_list<std::string_view> names);

// Shortest round-trip spelling of a double, for messages.
std::string format_number(double v);

}  // namespace ws1::json

// Internal: a simdjson DOM element together with its json path, with typed accessors that
// fail with `file: path: problem`. Failures are thrown as ParseFailure inside the loader and
// turned into a ws1::Error at the API boundary (load_contract / parse_contract).
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ws1/error.hpp"

namespace ws1::contract_detail {

struct ParseFailure {
  Error error;
};

class Node {
 public:
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
  std::vector<std::pair<std::string, Node>> fields() const;
  // Strict objects: every key must be one of `allowed`.
  void allow_only(std::initializer_list<std::string_view> allowed) const;

  // Arrays.
  std::vector<Node> items() const;

  // Scalars.
  std::string_view string() const;
  std::string_view nonempty_string() const;
  double number() const;         // finite
  double nonnegative() const;    // finite and >= 0
  std::int64_t integer() const;  // a JSON integer literal (no fraction, no exponent form)
  bool boolean() const;

  // A string from a closed vocabulary; `what` names the vocabulary in the error.
  template <class E>
  E word(std::optional<E> (*from_name)(std::string_view), std::string_view what,
         std::string_view known) const {
    const std::string_view s = string();
    if (auto v = from_name(s)) return *v;
    fail("unknown " + std::string(what) + " \"" + std::string(s) +
         "\" (known: " + std::string(known) + ")");
  }

  std::string_view type_name() const;
  simdjson::dom::element element() const { return element_; }

 private:
  simdjson::dom::element element_;
  std::string path_;
  const std::string* file_;
};

// Walks the whole document and fails at the first key that repeats within one object
// (simdjson keeps both; a lookup would silently pick one of them).
void reject_duplicate_keys(const Node& node);

// "a, b, c" from a list of names.
std::string join_names(std::initializer_list<std::string_view> names);

// Whitespace-insensitive equality, for formulas and definitions written by hand.
bool same_ignoring_spaces(std::string_view a, std::string_view b);

// Shortest round-trip spelling of a double, for messages.
std::string format_number(double v);

}  // namespace ws1::contract_detail

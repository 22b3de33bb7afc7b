// Canonical JSON as Python writes it with
//   json.dumps(obj, sort_keys=True, separators=(',', ':'), ensure_ascii=True)
// so that hashes pinned by the upstream Python tools (the manifest identity) can be
// recomputed byte for byte.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "ws1/error.hpp"

namespace ws1 {

// The canonical text of the JSON document `json_text`: keys sorted (by code point) at every
// level, no whitespace, non-ASCII and control characters as \uXXXX (lowercase hex, surrogate
// pairs above U+FFFF), integers as written, floats in Python repr form, true/false/null.
// Keys named in `drop_top_level` are left out of the root object. Duplicate keys, invalid
// JSON and integers outside the 64-bit range are refused; `file` names the input in errors.
Result<std::string> canonical_json(std::string_view json_text, std::string_view file,
                                   std::span<const std::string_view> drop_top_level = {});

// Python's repr() of a finite double: the shortest digit string that round-trips, in fixed
// notation when 1e-4 <= |x| < 1e16 (with ".0" for integral values), else scientific with a
// signed, at least two-digit exponent ("1e-06", "1.5e+16"). Non-finite values give
// "NaN", "Infinity", "-Infinity" (what json.dumps writes).
std::string python_float_repr(double x);

}  // namespace ws1

// Validation of the safetensors header: the 8-byte length, then the JSON object, its entries
// and how their offsets tile the data section. Rules follow the reference implementation;
// where it is lenient (unknown entry fields, leading/trailing whitespace) we are strict.
#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <unordered_set>

#include "detail.hpp"

namespace ws1::safetensors_detail {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr std::uint64_t kMaxI64 =
    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

// Safetensors dtypes that are valid in the format but that ws1 has no DType for.
constexpr std::array<std::string_view, 12> kOtherDtypes{
    "I8", "I16", "U16", "U32", "U64", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4", "F6_E2M3",
    "F6_E3M2", "C64"};

std::string_view type_name(const element& e) {
  switch (e.type()) {
    case element_type::ARRAY: return "an array";
    case element_type::OBJECT: return "an object";
    case element_type::INT64:
    case element_type::UINT64: return "an integer";
    case element_type::DOUBLE: return "a non-integer number";
    case element_type::STRING: return "a string";
    case element_type::BOOL: return "a boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "a JSON value";
}

// A JSON value as text for a message, cut short.
std::string json_text(const element& e) {
  std::string text = simdjson::to_string(e);
  return text.size() > 40 ? text.substr(0, 40) + "..." : text;
}

// Copies out of simdjson's result wrappers (ranging over `e.get_object().value_unsafe()` would
// iterate a member of a destroyed temporary). Callers have checked the type.
simdjson::dom::object object_of(const element& e) {
  simdjson::dom::object o;
  if (e.get(o) != simdjson::SUCCESS) return {};
  return o;
}
simdjson::dom::array array_of(const element& e) {
  simdjson::dom::array a;
  if (e.get(a) != simdjson::SUCCESS) return {};
  return a;
}

// A non-negative JSON integer, or nothing.
std::optional<std::uint64_t> as_u64(const element& e) {
  if (e.type() == element_type::UINT64) return e.get_uint64().value_unsafe();
  if (e.type() == element_type::INT64) {
    const std::int64_t v = e.get_int64().value_unsafe();
    if (v >= 0) return static_cast<std::uint64_t>(v);
  }
  return std::nullopt;
}

std::string_view describe_non_u64(const element& e) {
  if (e.type() == element_type::INT64) return "negative";
  return type_name(e);
}

class HeaderParser {
 public:
  HeaderParser(const std::string& file, std::uint64_t file_size, std::uint64_t n)
      : file_(file) {
    index_.file = file;
    index_.header_bytes = n;
    index_.data_start = 8 + n;
    index_.file_size = file_size;
  }

  Result<SafetensorsIndex> parse(std::string_view text) {
    const std::string where_header = fmt::format("header (bytes 8..{})", 8 + text.size());
    if (!simdjson::validate_utf8(text.data(), text.size()))
      return bad_input(file_, where_header, "not valid UTF-8");
    if (text.empty() || text.front() != '{')
      return bad_input(file_, where_header,
                       "does not start with '{': the header must be a JSON object");
    // The reference writer pads with spaces to a multiple of 8 bytes; nothing else may follow.
    const std::size_t last = text.find_last_not_of(' ');
    const std::string_view json = text.substr(0, last + 1);

    simdjson::dom::parser parser;
    element root;
    if (auto err = parser.parse(json.data(), json.size()).get(root); err)
      return bad_input(file_, where_header,
                       fmt::format("not valid JSON ({})", simdjson::error_message(err)));
    if (root.type() != element_type::OBJECT)
      return bad_input(file_, where_header,
                       fmt::format("must be a JSON object, found {}", type_name(root)));
    if (json.back() != '}')
      return bad_input(file_, fmt::format("byte {}", 8 + json.size() - 1),
                       "only spaces may follow the header's JSON object");

    std::unordered_set<std::string_view> keys;
    for (auto [key, value] : object_of(root)) {
      if (!keys.insert(key).second)
        return bad_input(file_, printable(key),
                         "duplicate key in the header (tensor names must be unique)");
      if (key == "__metadata__") {
        if (Status s = parse_metadata(value); !s) return s.error();
      } else {
        if (Status s = parse_entry(key, value); !s) return s.error();
      }
    }
    if (Status s = check_layout(); !s) return s.error();
    return std::move(index_);
  }

 private:
  Status parse_metadata(const element& value) {
    if (value.type() != element_type::OBJECT)
      return bad_input(file_, "__metadata__",
                       fmt::format("must be an object of strings, found {}", type_name(value)));
    for (auto [key, v] : object_of(value)) {
      const std::string where = "__metadata__." + printable(key);
      if (v.type() != element_type::STRING)
        return bad_input(file_, where,
                         fmt::format("metadata values must be strings, found {} ({})",
                                     type_name(v), json_text(v)));
      auto [it, inserted] = index_.metadata.emplace(key, v.get_string().value_unsafe());
      if (!inserted) return bad_input(file_, where, "duplicate key");
    }
    return {};
  }

  Status parse_entry(std::string_view name, const element& value) {
    const std::string pname = printable(name);
    if (name.empty()) return bad_input(file_, "header", "a tensor has an empty name (\"\")");
    if (value.type() != element_type::OBJECT)
      return bad_input(file_, pname,
                       fmt::format("a tensor entry must be an object, found {}", type_name(value)));
    std::optional<element> dtype, shape, offsets;
    for (auto [key, v] : object_of(value)) {
      std::optional<element>* slot = key == "dtype"          ? &dtype
                                     : key == "shape"        ? &shape
                                     : key == "data_offsets" ? &offsets
                                                             : nullptr;
      if (slot == nullptr)
        return bad_input(file_, pname + "." + printable(key),
                         "unknown field (an entry has exactly dtype, shape, data_offsets)");
      if (slot->has_value())
        return bad_input(file_, pname + "." + std::string(key), "field appears twice");
      *slot = v;
    }
    for (auto [field, slot] : {std::pair{"dtype", &dtype}, std::pair{"shape", &shape},
                               std::pair{"data_offsets", &offsets}})
      if (!slot->has_value())
        return bad_input(file_, pname + "." + field, "missing field");

    SafetensorsEntry entry;
    entry.name = std::string(name);
    if (Status s = parse_dtype(pname, *dtype, entry); !s) return s;
    if (Status s = parse_shape(pname, *shape, entry); !s) return s;
    if (Status s = parse_offsets(pname, *offsets, entry); !s) return s;
    index_.entries.push_back(std::move(entry));
    return {};
  }

  Status parse_dtype(const std::string& pname, const element& e, SafetensorsEntry& entry) {
    const std::string where = pname + ".dtype";
    if (e.type() != element_type::STRING)
      return bad_input(file_, where, fmt::format("must be a string, found {}", type_name(e)));
    const std::string_view name = e.get_string().value_unsafe();
    if (auto t = dtype_from_safetensors_name(name)) {
      entry.dtype = *t;
      return {};
    }
    if (std::find(kOtherDtypes.begin(), kOtherDtypes.end(), name) != kOtherDtypes.end())
      return bad_input(file_, where,
                       fmt::format("dtype {} is not supported (ws1 reads BF16, F16, F32, F64, "
                                   "I32, I64, BOOL, U8)",
                                   name));
    return bad_input(file_, where, fmt::format("unknown dtype \"{}\"", printable(name)));
  }

  Status parse_shape(const std::string& pname, const element& e, SafetensorsEntry& entry) {
    if (e.type() != element_type::ARRAY)
      return bad_input(file_, pname + ".shape",
                       fmt::format("must be an array of integers, found {}", type_name(e)));
    // Element count, and the product of the non-zero dimensions: every partial product of the
    // shape (numel, strides) must fit a signed 64-bit integer. This rejects all the reference
    // rejects (its running product overflowing) and a few absurd zero-sized shapes more.
    std::uint64_t count = 1;
    std::uint64_t nonzero = 1;
    bool overflow = false;
    std::size_t i = 0;
    for (element d : array_of(e)) {
      const std::string where = fmt::format("{}.shape[{}]", pname, i++);
      const std::optional<std::uint64_t> v = as_u64(d);
      if (!v)
        return bad_input(file_, where,
                         fmt::format("dimension {} is {}: dimensions are non-negative integers",
                                     json_text(d), describe_non_u64(d)));
      if (*v > kMaxI64)
        return bad_input(file_, where, fmt::format("dimension {} is too large", *v));
      entry.shape.push_back(static_cast<std::int64_t>(*v));
      count *= *v;  // exact whenever no overflow is reported below
      if (*v != 0 && !overflow)
        overflow = __builtin_mul_overflow(nonzero, *v, &nonzero) || nonzero > kMaxI64;
    }
    if (overflow)
      return bad_input(file_, pname + ".shape",
                       "element count overflows (product of the dimensions exceeds 2^63-1)");
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, std::uint64_t{dtype_size(entry.dtype)}, &bytes))
      return bad_input(file_, pname + ".shape",
                       fmt::format("byte size ({} elements of {}) overflows 64 bits", count,
                                   dtype_safetensors_name(entry.dtype)));
    entry.end = bytes;  // the expected byte size until the offsets are read
    return {};
  }

  Status parse_offsets(const std::string& pname, const element& e, SafetensorsEntry& entry) {
    const std::string where = pname + ".data_offsets";
    if (e.type() != element_type::ARRAY || array_of(e).size() != 2)
      return bad_input(file_, where,
                       fmt::format("must be an array of two integers [begin, end], found {}",
                                   json_text(e)));
    std::array<std::uint64_t, 2> v{};
    std::size_t i = 0;
    for (element x : array_of(e)) {
      const std::optional<std::uint64_t> u = as_u64(x);
      if (!u)
        return bad_input(file_, fmt::format("{}[{}]", where, i),
                         fmt::format("offset {} is {}: offsets are non-negative integers",
                                     json_text(x), describe_non_u64(x)));
      v[i++] = *u;
    }
    const std::uint64_t expected_bytes = entry.end;
    if (v[1] < v[0])
      return bad_input(file_, where, fmt::format("end {} is before begin {}", v[1], v[0]));
    if (v[1] - v[0] != expected_bytes)
      return bad_input(file_, where,
                       fmt::format("covers {} bytes but {} {} needs {} bytes", v[1] - v[0],
                                   dtype_safetensors_name(entry.dtype), shape_string(entry.shape),
                                   expected_bytes));
    entry.begin = v[0];
    entry.end = v[1];
    return {};
  }

  // Tensors sorted by offset must tile the data section: start at 0, no holes, no overlap,
  // and end exactly at the end of the file.
  Status check_layout() {
    auto& entries = index_.entries;
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
    });
    std::uint64_t expected = 0;
    const SafetensorsEntry* previous = nullptr;
    for (const SafetensorsEntry& e : entries) {
      const std::string where = printable(e.name) + ".data_offsets";
      if (e.begin != expected) {
        if (previous == nullptr)
          return bad_input(file_, where,
                           fmt::format("the first tensor begins at data byte {}, not 0", e.begin));
        return bad_input(
            file_, where,
            fmt::format("begins at data byte {} but {} ends at {} ({})", e.begin,
                        printable(previous->name), expected,
                        e.begin > expected ? "hole between tensors" : "tensors overlap"));
      }
      expected = e.end;
      previous = &e;
    }
    const std::uint64_t available = index_.file_size - index_.data_start;
    if (expected > available)
      return bad_input(file_, printable(previous->name) + ".data_offsets",
                       fmt::format("ends at data byte {} but the file holds only {} data bytes "
                                   "(truncated file?)",
                                   expected, available));
    if (expected < available)
      return bad_input(file_, fmt::format("byte {}", index_.data_start + expected),
                       fmt::format("{} trailing bytes after the last tensor's data",
                                   available - expected));
    return {};
  }

  const std::string& file_;
  SafetensorsIndex index_;
};

}  // namespace

std::string printable(std::string_view name) {
  constexpr std::size_t kMax = 120;
  std::string out;
  std::size_t n = name.size();
  if (n > kMax) {
    n = kMax;  // cut on a UTF-8 character boundary
    while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80) --n;
  }
  for (char c : name.substr(0, n)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7F)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  if (n < name.size()) out += "...";
  return out;
}

Result<std::uint64_t> header_length(std::span<const std::byte> prefix, std::uint64_t file_size,
                                    const std::string& file) {
  if (file_size < 8 || prefix.size() < 8)
    return bad_input(file, "byte 0",
                     fmt::format("file has {} bytes; a safetensors file starts with an 8-byte "
                                 "header length",
                                 file_size));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(prefix[i]);
  if (n > kSafetensorsMaxHeaderBytes)
    return bad_input(file, "header length (bytes 0..8)",
                     fmt::format("{} exceeds the limit of {} bytes", n,
                                 kSafetensorsMaxHeaderBytes));
  std::uint64_t stop = 0;
  if (__builtin_add_overflow(n, std::uint64_t{8}, &stop) || stop > file_size)
    return bad_input(file, "header length (bytes 0..8)",
                     fmt::format("a header of {} bytes runs past the end of the file ({} bytes)",
                                 n, file_size));
  return n;
}

Result<SafetensorsIndex> parse_header(std::span<const std::byte> header, std::uint64_t file_size,
                                      const std::string& file) {
  // simdjson may throw std::bad_alloc on a huge header; nothing else escapes.
  try {
    HeaderParser parser(file, file_size, header.size());
    return parser.parse(
        std::string_view(reinterpret_cast<const char*>(header.data()), header.size()));
  } catch (const std::exception& e) {
    return bad_input(file, "header", fmt::format("cannot be parsed ({})", e.what()));
  }
}

Status check_bool_bytes(std::span<const std::byte> bytes, const SafetensorsEntry& entry,
                        const std::string& file) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const auto b = std::to_integer<unsigned>(bytes[i]);
    if (b > 1)
      return bad_input(file, printable(entry.name),
                       fmt::format("BOOL element {} has byte value {} (must be 0 or 1)", i, b));
  }
  return {};
}

}  // namespace ws1::safetensors_detail

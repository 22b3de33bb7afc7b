// Malformed safetensors files, each built byte by byte: every one must be rejected through
// every entry point (bytes in memory, whole file, header-only read) with one line
// `file: where: problem` that names the file and the offending field.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "st_test_util.hpp"
#include "ws1/safetensors.hpp"

namespace {

using st_test::make_file;
using st_test::TempDir;

// Where the problem is detected: in the header (all entry points reject) or in the tensor data
// (the header-only read accepts; reading the tensor rejects).
enum class Stage { kHeader, kData };

void check_error(const ws1::Error& e, const std::string& file, const std::string& where,
                 const std::string& problem) {
  INFO("message: " << e.message());
  CHECK(e.file == file);
  CHECK_THAT(e.where, Catch::Contains(where));
  CHECK_THAT(e.problem, Catch::Contains(problem));
  CHECK(e.code == ws1::ExitCode::kBadInput);
  CHECK(e.message() == e.file + ": " + e.where + ": " + e.problem);
  CHECK(e.message().find('\n') == std::string::npos);
}

void expect_rejected(const std::vector<std::byte>& bytes, const std::string& where,
                     const std::string& problem, Stage stage = Stage::kHeader) {
  {
    auto r = ws1::parse_safetensors(bytes, "bad.safetensors");
    REQUIRE_FALSE(r.ok());
    check_error(r.error(), "bad.safetensors", where, problem);
  }
  TempDir dir;
  const auto path = dir / "bad.safetensors";
  st_test::write_bytes(path, bytes);
  {
    auto r = ws1::read_safetensors(path);
    REQUIRE_FALSE(r.ok());
    check_error(r.error(), path.string(), where, problem);
  }
  auto index = ws1::read_safetensors_header(path);
  if (stage == Stage::kHeader) {
    REQUIRE_FALSE(index.ok());
    check_error(index.error(), path.string(), where, problem);
  } else {
    REQUIRE(index.ok());
    bool rejected = false;
    for (const auto& e : index->entries) {
      auto t = ws1::read_safetensors_tensor(path, *index, e.name);
      if (t.ok()) continue;
      rejected = true;
      check_error(t.error(), path.string(), where, problem);
    }
    CHECK(rejected);
  }
}

// One valid F32 tensor "a" of 2 elements (8 data bytes).
const std::string kA = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

// A header with a single tensor entry `a` whose body is `body`.
std::string entry(const std::string& body) { return R"({"a":{)" + body + "}}"; }

}  // namespace

TEST_CASE("malformed: the valid base file is accepted", "[safetensors][malformed]") {
  auto r = ws1::parse_safetensors(make_file(kA, 8), "good.safetensors");
  REQUIRE(r.ok());
  REQUIRE(r->tensors.size() == 1);
}

// --- the 8-byte header length ---------------------------------------------------------------

TEST_CASE("malformed: file shorter than 8 bytes", "[safetensors][malformed]") {
  std::vector<std::byte> bytes(5, std::byte{0});
  expect_rejected(bytes, "byte 0", "file has 5 bytes");
}

TEST_CASE("malformed: empty file", "[safetensors][malformed]") {
  expect_rejected({}, "byte 0", "file has 0 bytes");
}

TEST_CASE("malformed: truncated file (header cut short)", "[safetensors][malformed]") {
  auto bytes = make_file(kA, 8);
  bytes.resize(8 + kA.size() / 2);
  expect_rejected(bytes, "header length", "runs past the end of the file");
}

TEST_CASE("malformed: header length past end of file", "[safetensors][malformed]") {
  expect_rejected(make_file(kA, 8, kA.size() + 9), "header length", "runs past the end");
}

TEST_CASE("malformed: header length above the 100 MB limit", "[safetensors][malformed]") {
  expect_rejected(make_file(kA, 8, 100'000'001), "header length", "exceeds the limit");
}

TEST_CASE("malformed: header length 2^64-1 (8 + N would overflow)", "[safetensors][malformed]") {
  expect_rejected(make_file(kA, 8, ~std::uint64_t{0}), "header length", "exceeds the limit");
}

TEST_CASE("malformed: header length zero", "[safetensors][malformed]") {
  expect_rejected(make_file("", 0), "header", "does not start with '{'");
}

// --- the header text ------------------------------------------------------------------------

TEST_CASE("malformed: header is not JSON", "[safetensors][malformed]") {
  expect_rejected(make_file(R"({"a": nope})", 0), "header", "not valid JSON");
}

TEST_CASE("malformed: header is a JSON array", "[safetensors][malformed]") {
  expect_rejected(make_file("[1, 2]", 0), "header", "must be a JSON object");
}

TEST_CASE("malformed: header is a JSON string", "[safetensors][malformed]") {
  expect_rejected(make_file(R"("abc")", 0), "header", "must be a JSON object");
}

TEST_CASE("malformed: whitespace before the JSON object", "[safetensors][malformed]") {
  expect_rejected(make_file(" " + kA, 8), "header", "does not start with '{'");
}

TEST_CASE("malformed: trailing garbage after the JSON object", "[safetensors][malformed]") {
  expect_rejected(make_file(kA + "xyz", 8), "header", "not valid JSON");
}

TEST_CASE("malformed: second JSON object after the first", "[safetensors][malformed]") {
  expect_rejected(make_file(kA + "{}", 8), "header", "not valid JSON");
}

TEST_CASE("malformed: newline (not a space) after the JSON object", "[safetensors][malformed]") {
  // simdjson alone accepts trailing whitespace; only the writer's padding (spaces) may follow.
  const std::string header = kA + "\n   ";
  expect_rejected(make_file(header, 8), "byte " + std::to_string(8 + kA.size()),
                  "only spaces may follow");
}

TEST_CASE("malformed: tab padding after the JSON object", "[safetensors][malformed]") {
  expect_rejected(make_file(kA + "\t", 8), "byte", "only spaces may follow");
}

TEST_CASE("malformed: invalid UTF-8 in the header", "[safetensors][malformed]") {
  const std::string header = R"({"a)" + std::string("\xff\xfe") +
                             R"(":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_rejected(make_file(header, 8), "header", "not valid UTF-8");
}

TEST_CASE("malformed: overlong UTF-8 encoding in the header", "[safetensors][malformed]") {
  const std::string header = R"({"a)" + std::string("\xc0\xaf") +
                             R"(":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_rejected(make_file(header, 8), "header", "not valid UTF-8");
}

TEST_CASE("malformed: unescaped control character in a name", "[safetensors][malformed]") {
  const std::string header = std::string(R"({"a)") + '\x01' +
                             R"(":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_rejected(make_file(header, 8), "header", "not valid JSON");
}

// --- keys -----------------------------------------------------------------------------------

TEST_CASE("malformed: duplicate tensor key", "[safetensors][malformed]") {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  expect_rejected(make_file(header, 16), "a", "duplicate key");
}

TEST_CASE("malformed: duplicate field inside an entry", "[safetensors][malformed]") {
  expect_rejected(
      make_file(entry(R"("dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8])"), 8),
      "a.dtype", "field appears twice");
}

TEST_CASE("malformed: duplicate __metadata__ key", "[safetensors][malformed]") {
  const std::string header = R"({"__metadata__":{"k":"x"},"__metadata__":{"k":"y"},)" +
                             kA.substr(1);
  expect_rejected(make_file(header, 8), "__metadata__", "duplicate key");
}

TEST_CASE("malformed: duplicate key inside __metadata__", "[safetensors][malformed]") {
  const std::string header = R"({"__metadata__":{"k":"x","k":"y"},)" + kA.substr(1);
  expect_rejected(make_file(header, 8), "__metadata__.k", "duplicate key");
}

TEST_CASE("malformed: empty tensor name", "[safetensors][malformed]") {
  const std::string header = R"({"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  expect_rejected(make_file(header, 8), "header", "empty name");
}

TEST_CASE("malformed: tensor entry is not an object", "[safetensors][malformed]") {
  expect_rejected(make_file(R"({"a":[0,8]})", 8), "a", "must be an object");
}

// --- entry fields ---------------------------------------------------------------------------

TEST_CASE("malformed: missing data_offsets", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[2])"), 8), "a.data_offsets",
                  "missing field");
}

TEST_CASE("malformed: missing dtype", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("shape":[2],"data_offsets":[0,8])"), 8), "a.dtype",
                  "missing field");
}

TEST_CASE("malformed: missing shape", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","data_offsets":[0,8])"), 8), "a.shape",
                  "missing field");
}

TEST_CASE("malformed: extra unknown field in an entry", "[safetensors][malformed]") {
  expect_rejected(
      make_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,8],"stride":[1])"), 8),
      "a.stride", "unknown field");
}

TEST_CASE("malformed: unknown dtype", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F33","shape":[2],"data_offsets":[0,8])"), 8),
                  "a.dtype", "unknown dtype \"F33\"");
}

TEST_CASE("malformed: lower-case dtype name", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"f32","shape":[2],"data_offsets":[0,8])"), 8),
                  "a.dtype", "unknown dtype");
}

TEST_CASE("malformed: valid safetensors dtype ws1 does not support", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"I8","shape":[8],"data_offsets":[0,8])"), 8),
                  "a.dtype", "dtype I8 is not supported");
}

TEST_CASE("malformed: dtype is not a string", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":32,"shape":[2],"data_offsets":[0,8])"), 8),
                  "a.dtype", "must be a string");
}

TEST_CASE("malformed: negative shape dimension", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])"), 8),
                  "a.shape[0]", "negative");
}

TEST_CASE("malformed: non-integer shape dimension", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[1,2.5],"data_offsets":[0,8])"), 8),
                  "a.shape[1]", "non-integer number");
}

TEST_CASE("malformed: shape dimension written as 2.0", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[2.0],"data_offsets":[0,8])"), 8),
                  "a.shape[0]", "non-integer number");
}

TEST_CASE("malformed: shape dimension is a string", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":["2"],"data_offsets":[0,8])"), 8),
                  "a.shape[0]", "a string");
}

TEST_CASE("malformed: shape is not an array", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":2,"data_offsets":[0,8])"), 8),
                  "a.shape", "must be an array");
}

TEST_CASE("malformed: shape dimension beyond int64", "[safetensors][malformed]") {
  expect_rejected(
      make_file(entry(R"("dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,8])"), 8),
      "a.shape[0]", "too large");
}

TEST_CASE("malformed: shape dimension beyond uint64", "[safetensors][malformed]") {
  expect_rejected(
      make_file(entry(R"("dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,8])"), 8),
      "header", "not valid JSON");
}

TEST_CASE("malformed: element count overflow", "[safetensors][malformed]") {
  expect_rejected(
      make_file(entry(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8])"),
                8),
      "a.shape", "element count overflows");
}

TEST_CASE("malformed: element count overflow in a zero-sized shape", "[safetensors][malformed]") {
  // The reference rejects a running product that overflows before the zero; we reject any
  // shape whose non-zero dimensions overflow (strides would).
  expect_rejected(
      make_file(entry(R"("dtype":"F32","shape":[4294967296,4294967296,0],"data_offsets":[0,0])"),
                0),
      "a.shape", "element count overflows");
  expect_rejected(
      make_file(entry(R"("dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0])"),
                0),
      "a.shape", "element count overflows");
}

TEST_CASE("malformed: byte size overflow", "[safetensors][malformed]") {
  // 2^62 elements fit an int64; 2^62 * 8 bytes do not fit 64 bits.
  expect_rejected(
      make_file(entry(R"("dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8])"), 8),
      "a.shape", "byte size");
}

TEST_CASE("malformed: data_offsets reversed", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[8,0])"), 8),
                  "a.data_offsets", "end 0 is before begin 8");
}

TEST_CASE("malformed: data_offsets with three numbers", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,8,8])"), 8),
                  "a.data_offsets", "two integers");
}

TEST_CASE("malformed: data_offsets not an array", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":{"0":8})"), 8),
                  "a.data_offsets", "two integers");
}

TEST_CASE("malformed: negative data offset", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[-8,0])"), 8),
                  "a.data_offsets[0]", "negative");
}

TEST_CASE("malformed: non-integer data offset", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,8.0])"), 8),
                  "a.data_offsets[1]", "non-integer number");
}

TEST_CASE("malformed: byte size mismatch", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[0,12])"), 12),
                  "a.data_offsets", "covers 12 bytes but F32 [2] needs 8 bytes");
}

// --- layout of the data section -------------------------------------------------------------

TEST_CASE("malformed: offsets do not start at 0", "[safetensors][malformed]") {
  expect_rejected(make_file(entry(R"("dtype":"F32","shape":[2],"data_offsets":[8,16])"), 16),
                  "a.data_offsets", "the first tensor begins at data byte 8, not 0");
}

TEST_CASE("malformed: hole between tensors", "[safetensors][malformed]") {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})";
  expect_rejected(make_file(header, 20), "b.data_offsets", "hole between tensors");
}

TEST_CASE("malformed: overlapping tensors", "[safetensors][malformed]") {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  expect_rejected(make_file(header, 12), "b.data_offsets", "tensors overlap");
}

TEST_CASE("malformed: two tensors on the same bytes", "[safetensors][malformed]") {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})";
  expect_rejected(make_file(header, 8), "b.data_offsets", "tensors overlap");
}

TEST_CASE("malformed: trailing bytes after the data", "[safetensors][malformed]") {
  expect_rejected(make_file(kA, 11), "byte " + std::to_string(8 + kA.size() + 8),
                  "3 trailing bytes");
}

TEST_CASE("malformed: data section shorter than the header says", "[safetensors][malformed]") {
  expect_rejected(make_file(kA, 5), "a.data_offsets", "holds only 5 data bytes");
}

TEST_CASE("malformed: lying header claims a terabyte of data", "[safetensors][malformed]") {
  // Must fail on the sizes, before any allocation or read of that size.
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[274877906944],"data_offsets":[0,1099511627776]}})";
  expect_rejected(make_file(header, 8), "a.data_offsets", "holds only 8 data bytes");
}

TEST_CASE("malformed: file truncated inside the data", "[safetensors][malformed]") {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F64","shape":[4],"data_offsets":[8,40]}})";
  auto bytes = make_file(header, 40);
  bytes.resize(bytes.size() - 7);
  expect_rejected(bytes, "b.data_offsets", "holds only 33 data bytes");
}

// --- __metadata__ ---------------------------------------------------------------------------

TEST_CASE("malformed: metadata value is not a string", "[safetensors][malformed]") {
  const std::string header = R"({"__metadata__":{"format":"pt","step":3},)" + kA.substr(1);
  expect_rejected(make_file(header, 8), "__metadata__.step", "must be strings");
}

TEST_CASE("malformed: metadata value is an object", "[safetensors][malformed]") {
  const std::string header = R"({"__metadata__":{"nested":{"a":"b"}},)" + kA.substr(1);
  expect_rejected(make_file(header, 8), "__metadata__.nested", "must be strings");
}

TEST_CASE("malformed: metadata is not an object", "[safetensors][malformed]") {
  const std::string header = R"({"__metadata__":"pt",)" + kA.substr(1);
  expect_rejected(make_file(header, 8), "__metadata__", "must be an object of strings");
}

// --- tensor data ----------------------------------------------------------------------------

TEST_CASE("malformed: BOOL element that is neither 0 nor 1", "[safetensors][malformed]") {
  const std::string header = R"({"m":{"dtype":"BOOL","shape":[4],"data_offsets":[0,4]}})";
  auto bytes = make_file(header, 4);  // data bytes 0, 1, 2, 3
  expect_rejected(bytes, "m", "BOOL element 2 has byte value 2", Stage::kData);
}

TEST_CASE("malformed: long hostile names are cut and escaped in messages",
          "[safetensors][malformed]") {
  const std::string name = std::string(R"(x\n)") + std::string(500, 'y');
  const std::string header =
      R"({")" + name + R"(":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})";
  auto r = ws1::parse_safetensors(make_file(header, 8), "bad.safetensors");
  REQUIRE_FALSE(r.ok());
  INFO(r.error().message());
  CHECK_THAT(r.error().where, Catch::StartsWith("x\\x0ayyy"));
  CHECK(r.error().where.size() < 200);
  CHECK(r.error().message().find('\n') == std::string::npos);
}

// --- robustness -----------------------------------------------------------------------------

namespace {
std::vector<std::byte> small_valid_file() {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("w":{"dtype":"BF16","shape":[3,4],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"F64","shape":[2],"data_offsets":[24,40]},)"
      R"("s":{"dtype":"I32","shape":[],"data_offsets":[40,44]}}   )";
  return make_file(header, 44);
}
}  // namespace

TEST_CASE("malformed: every truncation of a valid file is rejected", "[safetensors][malformed]") {
  const auto full = small_valid_file();
  REQUIRE(ws1::parse_safetensors(full, "full.safetensors").ok());
  for (std::size_t len = 0; len < full.size(); ++len) {
    const std::vector<std::byte> cut(full.begin(), full.begin() + static_cast<long>(len));
    auto r = ws1::parse_safetensors(cut, "cut.safetensors");
    INFO("length " << len);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().file == "cut.safetensors");
    CHECK_FALSE(r.error().where.empty());
  }
}

TEST_CASE("malformed: corrupted bytes never crash the reader", "[safetensors][malformed]") {
  // Deterministic corruption of header and data bytes; run under ASan/UBSan to catch any
  // out-of-bounds access. Each result is a valid file or one clean error naming the input.
  const auto full = small_valid_file();
  std::mt19937 rng(20260812);
  int accepted = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    auto bytes = full;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) {
      const std::size_t at = rng() % bytes.size();
      bytes[at] = static_cast<std::byte>(rng() & 0xFF);
    }
    auto r = ws1::parse_safetensors(bytes, "fuzz.safetensors");
    if (r.ok()) {
      ++accepted;
      continue;
    }
    INFO("iteration " << iter << ": " << r.error().message());
    REQUIRE(r.error().file == "fuzz.safetensors");
    REQUIRE(r.error().code == ws1::ExitCode::kBadInput);
    REQUIRE(r.error().message().find('\n') == std::string::npos);
  }
  CHECK(accepted < 3000);
}

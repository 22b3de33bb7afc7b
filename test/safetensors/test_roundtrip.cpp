// Writing and reading valid safetensors files: every dtype (incl. 0-rank and zero-size), the
// canonical layout of the reference writer, header-only inspection, atomic writes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <string>

#include "st_test_util.hpp"
#include "ws1/safetensors.hpp"

namespace {

using st_test::make_file;
using st_test::TempDir;
using ws1::DType;
using ws1::NamedTensor;
using ws1::Tensor;

constexpr DType kAllDtypes[] = {DType::kBF16, DType::kF16, DType::kF32, DType::kF64,
                                DType::kI32,  DType::kI64, DType::kBool, DType::kU8};

// A contiguous tensor with distinct bytes (0/1 for BOOL), different for each `seed`.
Tensor patterned(DType dtype, ws1::Shape shape, unsigned seed) {
  Tensor t(dtype, std::move(shape));
  auto bytes = t.mutable_bytes();
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const unsigned v = (static_cast<unsigned>(i) * 37u + seed * 101u + 7u) & 0xFFu;
    bytes[i] = static_cast<std::byte>(dtype == DType::kBool ? (v & 1u) : v);
  }
  return t;
}

bool same_bytes(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

void check_same_tensor(const Tensor& got, const Tensor& want) {
  CHECK(got.dtype() == want.dtype());
  CHECK(got.shape() == want.shape());
  const Tensor w = want.contiguous();
  CHECK(same_bytes(got.bytes(), w.bytes()));
}

std::string header_of(const std::vector<std::byte>& file) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(file.at(i));
  std::string s(n, '\0');
  std::memcpy(s.data(), file.data() + 8, n);
  return s;
}

std::vector<std::byte> f32_bytes(std::initializer_list<float> values) {
  std::vector<std::byte> out(values.size() * 4);
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

}  // namespace

TEST_CASE("round trip of every dtype, incl. 0-rank and zero-size", "[safetensors]") {
  std::vector<NamedTensor> tensors;
  unsigned seed = 0;
  for (DType t : kAllDtypes) {
    const std::string name(ws1::dtype_safetensors_name(t));
    tensors.emplace_back(name + ".matrix", patterned(t, {3, 5}, seed++));
    tensors.emplace_back(name + ".scalar", patterned(t, {}, seed++));
    tensors.emplace_back(name + ".empty", patterned(t, {0}, seed++));
    tensors.emplace_back(name + ".empty3d", patterned(t, {2, 0, 3}, seed++));
    tensors.emplace_back(name + ".cube", patterned(t, {2, 3, 4}, seed++));
  }
  const ws1::SafetensorsMetadata meta{{"format", "pt"}, {"producer", "ws1check test"}};

  TempDir dir;
  const auto path = dir / "all.safetensors";
  REQUIRE(write_safetensors(path, tensors, meta).ok());
  auto back = ws1::read_safetensors(path);
  REQUIRE(back.ok());
  CHECK(back->metadata == meta);
  REQUIRE(back->tensors.size() == tensors.size());
  for (const auto& [name, t] : tensors) {
    INFO(name);
    const Tensor* got = back->find(name);
    REQUIRE(got != nullptr);
    check_same_tensor(*got, t);
  }
  CHECK(back->find("nope") == nullptr);

  // The same bytes in memory, and parsed from memory.
  auto bytes = ws1::serialize_safetensors(tensors, meta);
  REQUIRE(bytes.ok());
  CHECK(*bytes == st_test::read_bytes(path));
  // A transient write (the exec protocol's files: no flush to the disk) gives the same bytes.
  const auto transient = dir / "transient.safetensors";
  REQUIRE(write_safetensors(transient, tensors, meta, ws1::Durability::kTransient).ok());
  CHECK(st_test::read_bytes(transient) == *bytes);
  CHECK(dir.listing() == std::vector<std::string>{"all.safetensors", "transient.safetensors"});  // no temporary left
  auto parsed = ws1::parse_safetensors(*bytes, "memory");
  REQUIRE(parsed.ok());
  REQUIRE(parsed->tensors.size() == back->tensors.size());
  for (std::size_t i = 0; i < parsed->tensors.size(); ++i) {
    CHECK(parsed->tensors[i].name == back->tensors[i].name);
    check_same_tensor(parsed->tensors[i].tensor, back->tensors[i].tensor);
  }
}

TEST_CASE("float values survive the round trip bit for bit", "[safetensors]") {
  Tensor f(DType::kF32, {4});
  const float values[] = {1.5f, -0.0f, 3.0e38f, 1.0e-45f};
  std::memcpy(f.data<float>(), values, sizeof values);
  Tensor b(DType::kBF16, {4});
  const std::uint16_t bits[] = {0x3FC0, 0x8000, 0x7FC1 /* NaN with payload */, 0xFF80};
  std::memcpy(b.data<std::uint16_t>(), bits, sizeof bits);
  auto bytes = ws1::serialize_safetensors(std::vector<NamedTensor>{{"f", f}, {"b", b}});
  REQUIRE(bytes.ok());
  auto back = ws1::parse_safetensors(*bytes, "memory");
  REQUIRE(back.ok());
  CHECK(std::memcmp(back->find("f")->data<float>(), values, sizeof values) == 0);
  CHECK(std::memcmp(back->find("b")->data<std::uint16_t>(), bits, sizeof bits) == 0);
}

TEST_CASE("writer output matches the reference writer's layout", "[safetensors]") {
  SECTION("no tensors, no metadata: {} padded to 8 bytes") {
    auto bytes = ws1::serialize_safetensors({});
    REQUIRE(bytes.ok());
    CHECK(*bytes == make_file("{}      ", 0));
  }
  SECTION("metadata only") {
    auto bytes = ws1::serialize_safetensors({}, {{"framework", "pt"}});
    REQUIRE(bytes.ok());
    CHECK(*bytes == make_file(R"({"__metadata__":{"framework":"pt"}}     )", 0));
    CHECK(header_of(*bytes).size() == 40);
  }
  SECTION("one F32 tensor, header already a multiple of 8") {
    Tensor t = *Tensor::from_bytes(DType::kF32, {1, 2, 3}, f32_bytes({0, 1, 2, 3, 4, 5}));
    auto bytes = ws1::serialize_safetensors(std::vector<NamedTensor>{{"attn.0", t}});
    REQUIRE(bytes.ok());
    const std::string header =
        R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
    REQUIRE(header.size() == 64);
    auto want = make_file(header, 0);
    const auto data = f32_bytes({0, 1, 2, 3, 4, 5});
    want.insert(want.end(), data.begin(), data.end());
    CHECK(*bytes == want);
  }
  SECTION("one F32 tensor, header padded with 7 spaces") {
    Tensor t = *Tensor::from_bytes(DType::kF32, {1, 1, 2, 3}, f32_bytes({0, 1, 2, 3, 4, 5}));
    auto bytes = ws1::serialize_safetensors(std::vector<NamedTensor>{{"attn0", t}});
    REQUIRE(bytes.ok());
    CHECK(header_of(*bytes) ==
          R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       )");
    CHECK(header_of(*bytes).size() == 72);
  }
}

TEST_CASE("header is padded with spaces to a multiple of 8 bytes", "[safetensors]") {
  for (std::size_t len = 1; len <= 17; ++len) {
    const std::string name(len, 'n');
    auto bytes = ws1::serialize_safetensors(
        std::vector<NamedTensor>{{name, patterned(DType::kU8, {3}, 1)}});
    REQUIRE(bytes.ok());
    const std::string header = header_of(*bytes);
    INFO(header);
    CHECK(header.size() % 8 == 0);
    const auto end = header.find_last_not_of(' ');
    CHECK(header[end] == '}');
    CHECK(header.size() - end - 1 < 8);
    CHECK(bytes->size() == 8 + header.size() + 3);
  }
}

TEST_CASE("canonical order: dtype alignment, then name, whatever the input order",
          "[safetensors]") {
  std::vector<NamedTensor> tensors = {
      {"z", patterned(DType::kBool, {3}, 1)}, {"b", patterned(DType::kF32, {3}, 2)},
      {"a", patterned(DType::kF32, {1}, 3)},  {"c", patterned(DType::kI64, {2}, 4)},
      {"y", patterned(DType::kBF16, {5}, 5)}, {"x", patterned(DType::kF16, {1}, 6)},
      {"w", patterned(DType::kU8, {7}, 7)},   {"v", patterned(DType::kI32, {2}, 8)},
      {"u", patterned(DType::kF64, {1}, 9)},  {"B", patterned(DType::kF32, {2}, 10)}};
  auto first = ws1::serialize_safetensors(tensors);
  REQUIRE(first.ok());
  std::reverse(tensors.begin(), tensors.end());
  auto reversed = ws1::serialize_safetensors(tensors);
  REQUIRE(reversed.ok());
  CHECK(*first == *reversed);
  std::rotate(tensors.begin(), tensors.begin() + 3, tensors.end());
  auto rotated = ws1::serialize_safetensors(tensors);
  REQUIRE(rotated.ok());
  CHECK(*first == *rotated);

  auto back = ws1::parse_safetensors(*first, "memory");
  REQUIRE(back.ok());
  std::vector<std::string> order;
  for (const auto& [name, t] : back->tensors) order.push_back(name);
  CHECK(order == std::vector<std::string>{"c", "u", "B", "a", "b", "v", "y", "x", "w", "z"});
}

TEST_CASE("reader accepts what the format allows", "[safetensors]") {
  SECTION("keys in any order, metadata last, offsets not in key order, trailing spaces") {
    const std::string header =
        R"({"b":{"data_offsets":[8,12],"shape":[],"dtype":"I32"},)"
        R"("a":{"shape":[2],"dtype":"F32","data_offsets":[0,8]},)"
        R"("__metadata__":{"k":"v","empty":""}}          )";
    auto r = ws1::parse_safetensors(make_file(header, 12), "ok.safetensors");
    REQUIRE(r.ok());
    REQUIRE(r->tensors.size() == 2);
    CHECK(r->tensors[0].name == "a");  // file order: by offset
    CHECK(r->tensors[1].name == "b");
    CHECK(r->tensors[1].tensor.shape().empty());
    CHECK(r->metadata == ws1::SafetensorsMetadata{{"k", "v"}, {"empty", ""}});
    CHECK(std::to_integer<int>(r->tensors[1].tensor.bytes()[0]) == 8);
  }
  SECTION("zero-size tensors anywhere, sharing offsets") {
    const std::string header =
        R"({"e1":{"dtype":"F64","shape":[0,4],"data_offsets":[0,0]},)"
        R"("a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
        R"("e2":{"dtype":"BF16","shape":[5,0],"data_offsets":[3,3]},)"
        R"("e3":{"dtype":"I64","shape":[0],"data_offsets":[3,3]}})";
    auto r = ws1::parse_safetensors(make_file(header, 3), "ok.safetensors");
    REQUIRE(r.ok());
    REQUIRE(r->tensors.size() == 4);
    CHECK(r->find("e2")->shape() == ws1::Shape{5, 0});
    CHECK(r->find("e2")->numel() == 0);
  }
  SECTION("no tensors at all") {
    auto r = ws1::parse_safetensors(make_file("{}", 0), "ok.safetensors");
    REQUIRE(r.ok());
    CHECK(r->tensors.empty());
  }
  SECTION("escaped and non-ASCII names") {
    const std::string header =
        R"({"caf\u00e9.w\"q\"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
        "\"\xce\xbb\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}";
    auto r = ws1::parse_safetensors(make_file(header, 2), "ok.safetensors");
    REQUIRE(r.ok());
    CHECK(r->find("caf\xc3\xa9.w\"q\"") != nullptr);
    CHECK(r->find("\xce\xbb") != nullptr);
  }
}

TEST_CASE("metadata round trip with escapes and non-ASCII text", "[safetensors]") {
  const ws1::SafetensorsMetadata meta{{"quote", "say \"hi\"\n\ttab"},
                                      {"unicode", "\xce\xbb \xe2\x82\xac"},
                                      {"empty", ""}};
  auto bytes = ws1::serialize_safetensors(
      std::vector<NamedTensor>{{"t", patterned(DType::kI32, {2}, 3)}}, meta);
  REQUIRE(bytes.ok());
  auto back = ws1::parse_safetensors(*bytes, "memory");
  REQUIRE(back.ok());
  CHECK(back->metadata == meta);
}

TEST_CASE("non-contiguous tensors are written in row-major order", "[safetensors]") {
  Tensor t = patterned(DType::kF32, {2, 3}, 4);
  Tensor tt = t.transpose(0, 1);
  REQUIRE_FALSE(tt.is_contiguous());
  auto bytes = ws1::serialize_safetensors(std::vector<NamedTensor>{{"t", tt}});
  REQUIRE(bytes.ok());
  auto back = ws1::parse_safetensors(*bytes, "memory");
  REQUIRE(back.ok());
  check_same_tensor(*back->find("t"), tt);
  CHECK(back->find("t")->shape() == ws1::Shape{3, 2});
}

TEST_CASE("header-only index and reading one tensor", "[safetensors]") {
  std::vector<NamedTensor> tensors = {{"w", patterned(DType::kBF16, {64, 33}, 1)},
                                      {"bias", patterned(DType::kF32, {33}, 2)},
                                      {"ids", patterned(DType::kI64, {5}, 3)},
                                      {"mask", patterned(DType::kBool, {7}, 4)}};
  TempDir dir;
  const auto path = dir / "shard.safetensors";
  REQUIRE(write_safetensors(path, tensors, {{"format", "pt"}}).ok());

  auto index = ws1::read_safetensors_header(path);
  REQUIRE(index.ok());
  CHECK(index->file == path.string());
  CHECK(index->metadata.at("format") == "pt");
  CHECK(index->data_start == 8 + index->header_bytes);
  CHECK(index->header_bytes % 8 == 0);
  CHECK(index->file_size == std::filesystem::file_size(path));
  REQUIRE(index->entries.size() == 4);
  std::uint64_t expected = 0;
  for (const auto& e : index->entries) {  // file order, tiled
    CHECK(e.begin == expected);
    expected = e.end;
  }
  CHECK(index->data_start + expected == index->file_size);
  const ws1::SafetensorsEntry* w = index->find("w");
  REQUIRE(w != nullptr);
  CHECK(w->dtype == DType::kBF16);
  CHECK(w->shape == ws1::Shape{64, 33});
  CHECK(w->nbytes() == 64 * 33 * 2);
  CHECK(index->find("absent") == nullptr);

  for (const auto& [name, t] : tensors) {
    INFO(name);
    auto one = ws1::read_safetensors_tensor(path, *index, name);
    REQUIRE(one.ok());
    check_same_tensor(*one, t);
  }

  SECTION("unknown name") {
    auto r = ws1::read_safetensors_tensor(path, *index, "absent");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().file == path.string());
    CHECK(r.error().where == "absent");
  }
  SECTION("file changed since the header was read") {
    auto bytes = st_test::read_bytes(path);
    bytes.push_back(std::byte{0});
    st_test::write_bytes(path, bytes);
    auto r = ws1::read_safetensors_tensor(path, *index, "w");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().file == path.string());
    CHECK_THAT(r.error().problem, Catch::Contains("file changed"));
  }
}

TEST_CASE("a multi-megabyte tensor round trips", "[safetensors]") {
  std::vector<NamedTensor> tensors = {{"big", patterned(DType::kBF16, {1024, 1536}, 5)}};
  TempDir dir;
  REQUIRE(write_safetensors(dir / "big.safetensors", tensors).ok());
  auto back = ws1::read_safetensors(dir / "big.safetensors");
  REQUIRE(back.ok());
  check_same_tensor(*back->find("big"), tensors[0].tensor);
}

TEST_CASE("reading a missing file or a directory fails cleanly", "[safetensors]") {
  TempDir dir;
  auto missing = ws1::read_safetensors(dir / "missing.safetensors");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().file == (dir / "missing.safetensors").string());
  CHECK(missing.error().where == "open");
  auto directory = ws1::read_safetensors_header(dir.path());
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.error().problem == "not a regular file");
}

TEST_CASE("writer rejects bad tensors and names, leaving nothing behind", "[safetensors]") {
  TempDir dir;
  const auto path = dir / "out.safetensors";
  const Tensor good = patterned(DType::kF32, {2}, 1);
  auto expect_refused = [&](std::vector<NamedTensor> tensors, ws1::SafetensorsMetadata meta,
                            const std::string& where, const std::string& problem) {
    ws1::Status s = ws1::write_safetensors(path, tensors, meta);
    REQUIRE_FALSE(s.ok());
    INFO(s.error().message());
    CHECK(s.error().file == path.string());
    CHECK_THAT(s.error().where, Catch::Contains(where));
    CHECK_THAT(s.error().problem, Catch::Contains(problem));
    CHECK(dir.listing().empty());
    CHECK_FALSE(ws1::serialize_safetensors(tensors, meta).ok());
  };
  SECTION("empty name") { expect_refused({{"", good}}, {}, "tensor name", "empty"); }
  SECTION("reserved name") {
    expect_refused({{"__metadata__", good}}, {}, "__metadata__", "reserved");
  }
  SECTION("duplicate name") {
    expect_refused({{"a", good}, {"b", good}, {"a", good}}, {}, "a", "duplicate");
  }
  SECTION("name not UTF-8") { expect_refused({{"a\xff", good}}, {}, "a", "UTF-8"); }
  SECTION("undefined tensor") { expect_refused({{"u", Tensor()}}, {}, "u", "no storage"); }
  SECTION("metadata not UTF-8") {
    expect_refused({{"a", good}}, {{"k", "\xc3"}}, "__metadata__.k", "UTF-8");
  }
}

TEST_CASE("atomic write: failures leave nothing behind, success replaces", "[safetensors]") {
  TempDir dir;
  const std::vector<NamedTensor> tensors = {{"a", patterned(DType::kI32, {4}, 1)}};
  SECTION("directory does not exist") {
    const auto path = dir / "no" / "such" / "dir.safetensors";
    ws1::Status s = ws1::write_safetensors(path, tensors);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().file == path.string());
    CHECK(s.error().where == "write");
    CHECK(dir.listing().empty());
  }
  SECTION("target is a directory: the temporary file is removed") {
    std::filesystem::create_directory(dir / "taken");
    ws1::Status s = ws1::write_safetensors(dir / "taken", tensors);
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().where == "write");
    CHECK_THAT(s.error().problem, Catch::Contains("rename"));
    CHECK(dir.listing() == std::vector<std::string>{"taken"});
    CHECK(std::filesystem::is_empty(dir / "taken"));
  }
  SECTION("an existing file is untouched by a failed write and replaced by a good one") {
    const auto path = dir / "w.safetensors";
    st_test::write_bytes(path, st_test::bytes_of("old contents"));
    ws1::Status bad =
        ws1::write_safetensors(path, std::vector<NamedTensor>{{"", tensors[0].tensor}});
    REQUIRE_FALSE(bad.ok());
    CHECK(st_test::read_bytes(path) == st_test::bytes_of("old contents"));
    REQUIRE(ws1::write_safetensors(path, tensors).ok());
    CHECK(dir.listing() == std::vector<std::string>{"w.safetensors"});
    auto back = ws1::read_safetensors(path);
    REQUIRE(back.ok());
    check_same_tensor(*back->find("a"), tensors[0].tensor);
  }
}

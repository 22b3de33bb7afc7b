// lib/tensor: shapes, views sharing storage, contiguous copies of strided views for several
// dtypes, from_bytes errors, and misuse raising std::logic_error (never a crash).
#include <catch2/catch.hpp>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "ws1/numeric.hpp"
#include "ws1/tensor.hpp"

using ws1::DType;
using ws1::Shape;
using ws1::Tensor;

namespace {

// Reads / writes one element as T (storage may be unaligned for nothing here, but memcpy is
// the honest way to say "these bytes are a T").
template <class T>
T get(const Tensor& t, std::initializer_list<std::int64_t> idx) {
  T v;
  std::memcpy(&v, t.element(idx), sizeof(T));
  return v;
}
template <class T>
void put(Tensor& t, std::initializer_list<std::int64_t> idx, T v) {
  std::memcpy(t.element(idx), &v, sizeof(T));
}

// Small integers in each dtype's representation, exact in all of them (all < 256).
template <class T>
T encode(int v) {
  if constexpr (std::is_same_v<T, ws1::bf16>) return ws1::to_bf16(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, ws1::fp16>) return ws1::to_fp16(static_cast<float>(v));
  else return static_cast<T>(v);
}

// [3, 4, 5] tensor with value(i, j, k) = i*20 + j*5 + k, written by raw offset.
template <class T>
Tensor iota345(DType dt) {
  Tensor t(dt, {3, 4, 5});
  T* p = t.data<T>();
  for (int n = 0; n < 60; ++n) p[n] = encode<T>(n);
  return t;
}

// Checks that c is contiguous, has `shape`, and its row-major element n holds want(n).
template <class T, class F>
void check_layout(const Tensor& c, const Shape& shape, F want) {
  REQUIRE(c.is_contiguous());
  REQUIRE(c.shape() == shape);
  const auto* p = reinterpret_cast<const T*>(c.bytes().data());
  int bad = 0;
  for (std::int64_t n = 0; n < c.numel(); ++n)
    if (!(p[n] == encode<T>(want(n)))) ++bad;
  CHECK(bad == 0);
}

template <class T>
void check_contiguous_copies(DType dt) {
  const Tensor t = iota345<T>(dt);
  const auto v = [](std::int64_t i, std::int64_t j, std::int64_t k) {
    return static_cast<int>(i * 20 + j * 5 + k);
  };
  SECTION("transpose(0, 2): innermost stride is not 1") {
    const Tensor c = t.transpose(0, 2).contiguous();  // [5, 4, 3], out(a,b,c) = v(c,b,a)
    check_layout<T>(c, {5, 4, 3}, [&](std::int64_t n) { return v(n % 3, n / 3 % 4, n / 12); });
  }
  SECTION("slices on two dims: dense rows with gaps") {
    const Tensor s = t.slice(1, 1, 3).slice(2, 2, 5);  // [3, 2, 3], out(a,b,c) = v(a,b+1,c+2)
    CHECK_FALSE(s.is_contiguous());
    check_layout<T>(s.contiguous(), {3, 2, 3},
                    [&](std::int64_t n) { return v(n / 6, n / 3 % 2 + 1, n % 3 + 2); });
  }
  SECTION("select then transpose") {
    const Tensor s = t.select(1, 2).transpose(0, 1);  // [5, 3], out(a,b) = v(b,2,a)
    check_layout<T>(s.contiguous(), {5, 3}, [&](std::int64_t n) { return v(n % 3, 2, n / 3); });
  }
  SECTION("transpose of a slice, rank 4 after view") {
    // [3,4,5] -> [3,2,2,5] (j = 2*p + q), slice p = 1, transpose q and k: [3,1,5,2].
    const Tensor s = t.view({3, 2, 2, 5}).slice(1, 1, 2).transpose(2, 3);
    check_layout<T>(s.contiguous(), {3, 1, 5, 2}, [&](std::int64_t n) {
      const std::int64_t q = n % 2, k = n / 2 % 5, i = n / 10;
      return v(i, 2 + q, k);
    });
  }
  SECTION("already contiguous (offset slice): copied, not shared") {
    const Tensor s = t.slice(0, 1, 3);  // rows 1..2, contiguous with an offset
    CHECK(s.is_contiguous());
    Tensor c = s.contiguous();
    check_layout<T>(c, {2, 4, 5}, [&](std::int64_t n) { return static_cast<int>(n + 20); });
    c.mutable_bytes()[0] = std::byte{0x5a};
    CHECK(get<T>(t, {1, 0, 0}) == encode<T>(20));
  }
}

}  // namespace

TEST_CASE("shape helpers", "[tensor]") {
  CHECK(ws1::numel({}) == 1);
  CHECK(ws1::numel({4, 27, 151936}) == 4 * 27 * 151936);
  CHECK(ws1::numel({2, 0, 3}) == 0);
  CHECK_THROWS_AS(ws1::numel({2, -1}), std::logic_error);
  const std::int64_t big = std::int64_t{1} << 32;
  CHECK_THROWS_AS(ws1::numel({big, big}), std::logic_error);
  CHECK_FALSE(ws1::checked_numel({big, big}).has_value());
  CHECK_FALSE(ws1::checked_numel({3, -2}).has_value());
  CHECK(ws1::checked_numel({3, 2}) == 6);
  CHECK(ws1::shape_string({4, 27, 151936}) == "[4, 27, 151936]");
  CHECK(ws1::shape_string({}) == "[]");
  CHECK(ws1::contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});
  CHECK(ws1::contiguous_strides({2, 0, 3}) == Shape{3, 3, 1});
  CHECK(ws1::contiguous_strides({}).empty());
}

TEST_CASE("new tensors are zero-filled and contiguous", "[tensor]") {
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32, DType::kF64, DType::kI32,
                   DType::kI64, DType::kBool, DType::kU8}) {
    const Tensor t(dt, {3, 5, 7});
    INFO(ws1::dtype_safetensors_name(dt));
    CHECK(t.defined());
    CHECK(t.dim() == 3);
    CHECK(t.numel() == 105);
    CHECK(t.nbytes() == 105 * ws1::dtype_size(dt));
    CHECK(t.strides() == Shape{35, 7, 1});
    CHECK(t.offset() == 0);
    CHECK(t.is_contiguous());
    int nonzero = 0;
    for (std::byte b : t.bytes()) nonzero += b != std::byte{0};
    CHECK(nonzero == 0);
  }
  const Tensor scalar(DType::kF32, {});
  CHECK(scalar.numel() == 1);
  CHECK(scalar.nbytes() == 4);
  CHECK(get<float>(scalar, {}) == 0.0f);
  const Tensor empty(DType::kBF16, {0, 5});
  CHECK(empty.numel() == 0);
  CHECK(empty.bytes().empty());
  CHECK(empty.is_contiguous());
  CHECK(empty.contiguous().numel() == 0);
  CHECK(empty.slice(1, 1, 4).shape() == Shape{0, 3});
  CHECK_THROWS_AS(Tensor(DType::kF32, {2, -3}), std::logic_error);
  const std::int64_t huge = std::int64_t{1} << 62;
  CHECK_THROWS_AS(Tensor(DType::kF64, {huge}), std::logic_error);  // bytes overflow int64
}

TEST_CASE("undefined tensor", "[tensor]") {
  Tensor t;
  CHECK_FALSE(t.defined());
  CHECK(t.numel() == 0);
  CHECK(t.nbytes() == 0);
  CHECK(t.raw() == nullptr);
  CHECK(t.bytes().empty());
  CHECK_THROWS_AS(t.view({1}), std::logic_error);
  CHECK_THROWS_AS(t.contiguous(), std::logic_error);
  CHECK_THROWS_AS(t.slice(0, 0, 0), std::logic_error);
  CHECK_THROWS_AS(t.element({}), std::logic_error);
}

TEST_CASE("from_bytes", "[tensor]") {
  std::vector<float> src{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  const auto bytes = std::as_bytes(std::span<const float>(src));
  SECTION("copies the bytes") {
    auto r = Tensor::from_bytes(DType::kF32, {2, 3}, bytes);
    REQUIRE(r.ok());
    src[0] = 99.0f;  // the tensor owns a copy
    CHECK(get<float>(*r, {0, 0}) == 1.5f);
    CHECK(get<float>(*r, {1, 2}) == -0.5f);
    CHECK(r->is_contiguous());
  }
  SECTION("same bytes, other dtype and shape") {
    auto r = Tensor::from_bytes(DType::kBF16, {12}, bytes);
    REQUIRE(r.ok());
    CHECK(r->numel() == 12);
  }
  SECTION("size mismatch is an Error naming both sizes, dtype and shape") {
    auto r = Tensor::from_bytes(DType::kF32, {2, 4}, bytes);
    REQUIRE_FALSE(r.ok());
    const std::string m = r.error().problem;
    CHECK(r.error().code == ws1::ExitCode::kBadInput);
    CHECK(m.find("24 bytes") != std::string::npos);
    CHECK(m.find("needs 32 bytes") != std::string::npos);
    CHECK(m.find("F32") != std::string::npos);
    CHECK(m.find("[2, 4]") != std::string::npos);
    auto short_r = Tensor::from_bytes(DType::kF32, {2, 3}, bytes.first(23));
    REQUIRE_FALSE(short_r.ok());
    CHECK(short_r.error().problem.find("23 bytes") != std::string::npos);
  }
  SECTION("invalid shapes are Errors, not exceptions") {
    auto neg = Tensor::from_bytes(DType::kF32, {-2, 3}, bytes);
    REQUIRE_FALSE(neg.ok());
    CHECK(neg.error().problem.find("[-2, 3]") != std::string::npos);
    const std::int64_t big = std::int64_t{1} << 62;
    auto over = Tensor::from_bytes(DType::kF32, {big}, bytes);  // 4 * 2^62 overflows
    REQUIRE_FALSE(over.ok());
    CHECK(over.error().problem.find("overflows") != std::string::npos);
  }
  SECTION("empty") {
    auto r = Tensor::from_bytes(DType::kI64, {0}, {});
    REQUIRE(r.ok());
    CHECK(r->numel() == 0);
  }
}

TEST_CASE("views share storage", "[tensor]") {
  Tensor t = iota345<float>(DType::kF32);
  SECTION("view") {
    Tensor v = t.view({12, 5});
    CHECK(v.raw() == t.raw());
    put<float>(v, {7, 3}, -1.0f);  // linear 38 = (1, 3, 3)
    CHECK(get<float>(t, {1, 3, 3}) == -1.0f);
    CHECK(t.view({-1, 10}).shape() == Shape{6, 10});
    CHECK(t.view({-1}).shape() == Shape{60});
  }
  SECTION("slice") {
    Tensor s = t.slice(2, 1, 4);
    CHECK(s.shape() == Shape{3, 4, 3});
    CHECK(s.strides() == Shape{20, 5, 1});
    CHECK(s.offset() == 1);
    CHECK(get<float>(s, {2, 1, 0}) == 46.0f);
    put<float>(s, {0, 0, 0}, 100.0f);
    CHECK(get<float>(t, {0, 0, 1}) == 100.0f);
    CHECK(*s.data<float>() == 100.0f);  // data() points at element 0 of the view
  }
  SECTION("transpose") {
    Tensor tr = t.transpose(0, 1);
    CHECK(tr.shape() == Shape{4, 3, 5});
    CHECK(tr.strides() == Shape{5, 20, 1});
    CHECK_FALSE(tr.is_contiguous());
    CHECK(get<float>(tr, {3, 2, 4}) == get<float>(t, {2, 3, 4}));
    put<float>(tr, {1, 2, 0}, 5.5f);
    CHECK(get<float>(t, {2, 1, 0}) == 5.5f);
    CHECK(t.transpose(1, 1).is_contiguous());
  }
  SECTION("select") {
    Tensor s = t.select(0, 2);
    CHECK(s.shape() == Shape{4, 5});
    CHECK(s.offset() == 40);
    CHECK(s.is_contiguous());
    put<float>(s, {3, 4}, -7.0f);
    CHECK(get<float>(t, {2, 3, 4}) == -7.0f);
    Tensor scalar = s.select(0, 1).select(0, 2);
    CHECK(scalar.dim() == 0);
    CHECK(scalar.numel() == 1);
    CHECK(get<float>(scalar, {}) == 47.0f);
    CHECK(get<float>(scalar.contiguous(), {}) == 47.0f);
  }
  SECTION("copies of a Tensor are views too") {
    Tensor alias = t;
    put<float>(alias, {0, 0, 0}, 9.0f);
    CHECK(get<float>(t, {0, 0, 0}) == 9.0f);
  }
  SECTION("bytes of a contiguous slice start at its offset") {
    Tensor rows = t.slice(0, 1, 2);
    CHECK(rows.bytes().data() == t.bytes().data() + 20 * sizeof(float));
    CHECK(rows.bytes().size() == 20 * sizeof(float));
    float f = 0;
    std::memcpy(&f, rows.bytes().data(), sizeof f);
    CHECK(f == 20.0f);
  }
  SECTION("size-1 dims do not break contiguity") {
    Tensor col = t.view({60, 1}).transpose(0, 1);  // [1, 60], strides [1, 1]
    CHECK(col.is_contiguous());
    CHECK(col.bytes().size() == 60 * sizeof(float));
  }
}

TEMPLATE_TEST_CASE("contiguous copies of strided views", "[tensor]", ws1::bf16, ws1::fp16,
                   float, double, std::int32_t, std::int64_t, std::uint8_t) {
  const DType dt = std::is_same_v<TestType, ws1::bf16>        ? DType::kBF16
                   : std::is_same_v<TestType, ws1::fp16>      ? DType::kF16
                   : std::is_same_v<TestType, float>          ? DType::kF32
                   : std::is_same_v<TestType, double>         ? DType::kF64
                   : std::is_same_v<TestType, std::int32_t>   ? DType::kI32
                   : std::is_same_v<TestType, std::int64_t>   ? DType::kI64
                                                              : DType::kU8;
  REQUIRE(ws1::dtype_size(dt) == sizeof(TestType));
  check_contiguous_copies<TestType>(dt);
}

TEST_CASE("misuse throws std::logic_error", "[tensor]") {
  Tensor t(DType::kF32, {3, 4, 5});
  const Tensor tr = t.transpose(0, 1);
  SECTION("view needs contiguous and the same element count") {
    CHECK_THROWS_AS(tr.view({60}), std::logic_error);
    CHECK_THROWS_AS(t.view({7, 9}), std::logic_error);
    CHECK_THROWS_AS(t.view({-1, -1}), std::logic_error);
    CHECK_THROWS_AS(t.view({-1, 7}), std::logic_error);
    CHECK_THROWS_AS(t.view({-2, -30}), std::logic_error);
    CHECK_THROWS_AS(t.view({0, -1}), std::logic_error);
  }
  SECTION("dims out of range, negative dims") {
    CHECK_THROWS_AS(t.slice(3, 0, 1), std::logic_error);
    CHECK_THROWS_AS(t.slice(-1, 0, 1), std::logic_error);
    CHECK_THROWS_AS(t.transpose(0, 3), std::logic_error);
    CHECK_THROWS_AS(t.transpose(-1, 0), std::logic_error);
    CHECK_THROWS_AS(t.select(-1, 0), std::logic_error);
    CHECK_THROWS_WITH(t.select(5, 0), Catch::Contains("dim 5 out of range for shape [3, 4, 5]"));
  }
  SECTION("indices and ranges out of range") {
    CHECK_THROWS_AS(t.slice(1, -1, 2), std::logic_error);
    CHECK_THROWS_AS(t.slice(1, 3, 2), std::logic_error);
    CHECK_THROWS_AS(t.slice(1, 0, 5), std::logic_error);
    CHECK_NOTHROW(t.slice(1, 4, 4));
    CHECK_THROWS_AS(t.select(2, 5), std::logic_error);
    CHECK_THROWS_AS(t.select(2, -1), std::logic_error);
    CHECK_THROWS_AS(t.element({0, 0}), std::logic_error);
    CHECK_THROWS_AS(t.element({0, 0, 0, 0}), std::logic_error);
    CHECK_THROWS_AS(t.element({0, 4, 0}), std::logic_error);
    CHECK_THROWS_AS(t.element({-1, 0, 0}), std::logic_error);
    CHECK_THROWS_AS(tr.element({0, 3, 0}), std::logic_error);
  }
  SECTION("bytes of a non-contiguous tensor") {
    CHECK_THROWS_AS(tr.bytes(), std::logic_error);
    Tensor s = t.slice(2, 0, 2);
    CHECK_THROWS_AS(s.mutable_bytes(), std::logic_error);
  }
}

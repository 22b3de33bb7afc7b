// lib/numeric: exhaustive checks over every bf16 and fp16 bit pattern, and float32 edge cases
// (ties both ways, overflow threshold, subnormals, float32 denormal inputs, NaNs).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ws1/numeric.hpp"

using ws1::bf16;
using ws1::DType;
using ws1::float_bits;
using ws1::float_from_bits;
using ws1::fp16;

namespace {

constexpr std::uint64_t kNanDistance = std::numeric_limits<std::uint64_t>::max();

// Collects mismatches of a loop so one CHECK reports them (65,536 CHECKs would drown the log).
struct Failures {
  int count = 0;
  std::string shown;
  void add(const std::string& what) {
    if (count++ < 8) shown += what + "\n";
  }
};
#define CHECK_NO_FAILURES(f) \
  do {                       \
    INFO((f).shown);         \
    CHECK((f).count == 0);   \
  } while (0)

bf16 B(std::uint32_t bits) { return bf16{static_cast<std::uint16_t>(bits)}; }
fp16 H(std::uint32_t bits) { return fp16{static_cast<std::uint16_t>(bits)}; }

// Codes of a 16-bit format in increasing value order: -inf .. -0, +0 .. +inf (NaNs left out).
std::vector<std::uint16_t> ordered_codes(std::uint16_t inf_code) {
  std::vector<std::uint16_t> out;
  for (int m = inf_code; m >= 0; --m) out.push_back(static_cast<std::uint16_t>(0x8000 | m));
  for (int m = 0; m <= inf_code; ++m) out.push_back(static_cast<std::uint16_t>(m));
  return out;
}

// The value of an fp16 code from its definition, in double (independent of from_fp16).
double fp16_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1f) return m ? std::numeric_limits<double>::quiet_NaN()
                          : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

}  // namespace

TEST_CASE("bit views", "[numeric]") {
  CHECK(float_bits(1.0f) == 0x3f800000u);
  CHECK(float_bits(-0.0f) == 0x80000000u);
  CHECK(float_from_bits(0x40490fdbu) == 3.14159274101257324219f);
  CHECK(ws1::double_bits(1.0) == 0x3ff0000000000000ull);
  CHECK(ws1::double_bits(-0.0) == 0x8000000000000000ull);
  CHECK(ws1::double_from_bits(0x4000000000000000ull) == 2.0);
  // A signaling NaN survives the round trip through a float value (no x87 quieting).
  CHECK(float_bits(float_from_bits(0x7f800001u)) == 0x7f800001u);
  CHECK(float_bits(float_from_bits(0xffa00000u)) == 0xffa00000u);
}

TEST_CASE("bf16: all 65,536 values decode exactly and round-trip", "[numeric][bf16]") {
  Failures f;
  int nans = 0, infs = 0;
  for (std::uint32_t c = 0; c < 65536; ++c) {
    const float v = ws1::from_bf16(B(c));
    if (float_bits(v) != c << 16) f.add(fmt::format("from_bf16({:04x}) = {:08x}", c, float_bits(v)));
    const bool nan_by_bits = (c & 0x7fff) > 0x7f80;
    if (std::isnan(v) != nan_by_bits || ws1::is_nan(B(c)) != nan_by_bits)
      f.add(fmt::format("NaN classification of {:04x}", c));
    if (std::isinf(v) != ((c & 0x7fff) == 0x7f80)) f.add(fmt::format("inf class of {:04x}", c));
    nans += nan_by_bits;
    infs += std::isinf(v);
    const bf16 back = ws1::to_bf16(v);
    if (!nan_by_bits) {
      if (back.bits != c) f.add(fmt::format("to_bf16(from_bf16({:04x})) = {:04x}", c, back.bits));
      if (float_bits(ws1::round_bf16(v)) != float_bits(v)) f.add(fmt::format("round_bf16 {:04x}", c));
    } else {
      // NaN stays NaN, comes back quiet with its sign and payload: exact if it was quiet.
      if (back.bits != (c | 0x0040)) f.add(fmt::format("NaN {:04x} -> {:04x}", c, back.bits));
      if (!ws1::is_nan(back)) f.add(fmt::format("NaN {:04x} lost", c));
    }
  }
  CHECK_NO_FAILURES(f);
  CHECK(nans == 2 * 127);  // mantissa 1..127 under exponent 0xff, both signs
  CHECK(infs == 2);
}

TEST_CASE("bf16: value order and ulp_distance between neighbours", "[numeric][bf16]") {
  const auto codes = ordered_codes(0x7f80);
  Failures f;
  for (std::size_t i = 0; i + 1 < codes.size(); ++i) {
    const float a = ws1::from_bf16(B(codes[i])), b = ws1::from_bf16(B(codes[i + 1]));
    const bool zeros = codes[i] == 0x8000 && codes[i + 1] == 0x0000;
    const std::uint64_t want = zeros ? 0 : 1;
    if (zeros ? !(a == b) : !(a < b)) f.add(fmt::format("order {:04x} {:04x}", codes[i], codes[i + 1]));
    if (ws1::ulp_distance(a, b, DType::kBF16) != want || ws1::ulp_distance(b, a, DType::kBF16) != want)
      f.add(fmt::format("ulp_distance({:04x}, {:04x})", codes[i], codes[i + 1]));
  }
  CHECK_NO_FAILURES(f);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(ws1::ulp_distance(-inf, inf, DType::kBF16) == codes.size() - 2);  // +-0 one point
  CHECK(ws1::ulp_distance(0.0f, -0.0f, DType::kBF16) == 0);
}

TEST_CASE("bf16: float32 edge cases", "[numeric][bf16]") {
  struct Case {
    std::uint32_t in;
    std::uint16_t out;
    const char* what;
  };
  const Case cases[] = {
      {0x3f800000, 0x3f80, "1.0 exact"},
      {0x3f808000, 0x3f80, "tie, even below: down"},
      {0x3f818000, 0x3f82, "tie, odd below: up"},
      {0x3f807fff, 0x3f80, "just below half"},
      {0x3f808001, 0x3f81, "just above half"},
      {0x3f817fff, 0x3f81, "just below half, odd"},
      {0xbf808000, 0xbf80, "negative tie down (magnitude)"},
      {0xbf818000, 0xbf82, "negative tie up (magnitude)"},
      {0xbf808001, 0xbf81, "negative above half"},
      {0x3fff8000, 0x4000, "tie carries into the next binade"},
      {0x3fffffff, 0x4000, "carry into the next binade"},
      {0x7f7f0000, 0x7f7f, "largest finite bf16"},
      {0x7f7f7fff, 0x7f7f, "just below the overflow threshold"},
      {0x7f7f8000, 0x7f80, "overflow threshold (tie, odd below): inf"},
      {0x7f7fffff, 0x7f80, "FLT_MAX: inf"},
      {0xff7f7fff, 0xff7f, "negative just below the threshold"},
      {0xff7f8000, 0xff80, "negative threshold: -inf"},
      {0x7f800000, 0x7f80, "+inf"},
      {0xff800000, 0xff80, "-inf"},
      {0x00000000, 0x0000, "+0"},
      {0x80000000, 0x8000, "-0"},
      {0x00010000, 0x0001, "smallest bf16 subnormal"},
      {0x80010000, 0x8001, "negative smallest subnormal"},
      {0x00000001, 0x0000, "smallest float32 denormal"},
      {0x80000001, 0x8000, "negative float32 denormal keeps the sign"},
      {0x00008000, 0x0000, "denormal tie to even zero"},
      {0x00008001, 0x0001, "denormal just above half"},
      {0x00018000, 0x0002, "denormal tie, odd below: up"},
      {0x00017fff, 0x0001, "denormal just below half"},
      {0x007f8000, 0x0080, "largest subnormal tie: smallest normal"},
      {0x007fffff, 0x0080, "largest float32 denormal: smallest normal"},
      {0x00800000, 0x0080, "smallest float32 normal"},
      {0x7f800001, 0x7fc0, "signaling NaN, payload in low half: quiet"},
      {0xff800001, 0xffc0, "negative signaling NaN: quiet, sign kept"},
      {0x7fa00000, 0x7fe0, "signaling NaN with high payload: kept, quiet"},
      {0x7f810000, 0x7fc1, "signaling NaN: quiet bit added"},
      {0x7fc00000, 0x7fc0, "quiet NaN"},
      {0xffc00000, 0xffc0, "negative quiet NaN"},
      {0x7fffffff, 0x7fff, "all-ones NaN (no rounding carry)"},
      {0xffffffff, 0xffff, "negative all-ones NaN"},
  };
  for (const Case& c : cases) {
    INFO(c.what << fmt::format(" (input {:08x})", c.in));
    CHECK(ws1::to_bf16(float_from_bits(c.in)).bits == c.out);
  }
  CHECK(float_bits(std::ldexp(1.0f, -133)) == 0x00010000u);  // the smallest bf16 subnormal
  CHECK(ws1::round_bf16(1.0f + std::ldexp(1.0f, -8)) == 1.0f);
  CHECK(ws1::round_bf16(1.0f + std::ldexp(3.0f, -8)) == 1.0f + std::ldexp(1.0f, -6));
}

TEST_CASE("fp16: all 65,536 values decode exactly and round-trip", "[numeric][fp16]") {
  Failures f;
  int nans = 0;
  for (std::uint32_t c = 0; c < 65536; ++c) {
    const float v = ws1::from_fp16(H(c));
    const bool nan_by_bits = (c & 0x7fff) > 0x7c00;
    nans += nan_by_bits;
    if (std::isnan(v) != nan_by_bits || ws1::is_nan(H(c)) != nan_by_bits)
      f.add(fmt::format("NaN classification of {:04x}", c));
    if (nan_by_bits) {
      // Payload kept bit for bit in the float32 (signaling stays signaling until to_fp16).
      const std::uint32_t want = ((c & 0x8000u) << 16) | 0x7f800000u | ((c & 0x3ffu) << 13);
      if (float_bits(v) != want) f.add(fmt::format("from_fp16 NaN {:04x} = {:08x}", c, float_bits(v)));
      const fp16 back = ws1::to_fp16(v);
      if (back.bits != (c | 0x0200)) f.add(fmt::format("NaN {:04x} -> {:04x}", c, back.bits));
      continue;
    }
    if (static_cast<double>(v) != fp16_value(static_cast<std::uint16_t>(c)) ||
        std::signbit(v) != ((c & 0x8000) != 0))
      f.add(fmt::format("from_fp16({:04x}) = {}", c, v));
    const fp16 back = ws1::to_fp16(v);
    if (back.bits != c) f.add(fmt::format("to_fp16(from_fp16({:04x})) = {:04x}", c, back.bits));
    if (float_bits(ws1::round_fp16(v)) != float_bits(v)) f.add(fmt::format("round_fp16 {:04x}", c));
  }
  CHECK_NO_FAILURES(f);
  CHECK(nans == 2 * 1023);
}

TEST_CASE("fp16: value order and ulp_distance between neighbours", "[numeric][fp16]") {
  const auto codes = ordered_codes(0x7c00);
  Failures f;
  for (std::size_t i = 0; i + 1 < codes.size(); ++i) {
    const float a = ws1::from_fp16(H(codes[i])), b = ws1::from_fp16(H(codes[i + 1]));
    const bool zeros = codes[i] == 0x8000 && codes[i + 1] == 0x0000;
    const std::uint64_t want = zeros ? 0 : 1;
    if (zeros ? !(a == b) : !(a < b)) f.add(fmt::format("order {:04x} {:04x}", codes[i], codes[i + 1]));
    if (ws1::ulp_distance(a, b, DType::kF16) != want || ws1::ulp_distance(b, a, DType::kF16) != want)
      f.add(fmt::format("ulp_distance({:04x}, {:04x})", codes[i], codes[i + 1]));
  }
  CHECK_NO_FAILURES(f);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(ws1::ulp_distance(-inf, inf, DType::kF16) == codes.size() - 2);
}

TEST_CASE("fp16: float32 edge cases", "[numeric][fp16]") {
  struct Case {
    float in;
    std::uint16_t out;
    const char* what;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const auto sub = [](float k) { return std::ldexp(k, -24); };  // k * smallest subnormal
  const Case cases[] = {
      {1.0f, 0x3c00, "1.0"},
      {float_from_bits(0x3f801000), 0x3c00, "1 + half ulp: tie to even, down"},
      {float_from_bits(0x3f803000), 0x3c02, "1 + 3 half ulps: tie to even, up"},
      {float_from_bits(0x3f800fff), 0x3c00, "just below half"},
      {float_from_bits(0x3f801001), 0x3c01, "just above half"},
      {float_from_bits(0xbf803000), 0xbc02, "negative tie up"},
      {float_from_bits(0x3fffffff), 0x4000, "carry into the next binade"},
      {65504.0f, 0x7bff, "largest finite fp16"},
      {float_from_bits(0x477fefff), 0x7bff, "just below 65520"},
      {65520.0f, 0x7c00, "65520 (tie above the largest finite): inf"},
      {65536.0f, 0x7c00, "65536: inf"},
      {-65520.0f, 0xfc00, "-65520: -inf"},
      {float_from_bits(0xc77fefff), 0xfbff, "negative just below the threshold"},
      {std::numeric_limits<float>::max(), 0x7c00, "FLT_MAX: inf"},
      {inf, 0x7c00, "+inf"},
      {-inf, 0xfc00, "-inf"},
      {0.0f, 0x0000, "+0"},
      {-0.0f, 0x8000, "-0"},
      {std::ldexp(1.0f, -14), 0x0400, "smallest normal"},
      {sub(1023.0f), 0x03ff, "largest subnormal"},
      {sub(1023.5f), 0x0400, "largest subnormal + half: tie to the smallest normal"},
      {sub(1023.25f), 0x03ff, "largest subnormal + quarter"},
      {sub(1.0f), 0x0001, "smallest subnormal"},
      {sub(-1.0f), 0x8001, "negative smallest subnormal"},
      {sub(0.5f), 0x0000, "half the smallest subnormal: tie to even zero"},
      {std::nextafter(sub(0.5f), 1.0f), 0x0001, "just above half the smallest subnormal"},
      {std::nextafter(sub(0.5f), 0.0f), 0x0000, "just below half the smallest subnormal"},
      {sub(-0.5f), 0x8000, "negative half: -0"},
      {sub(1.5f), 0x0002, "subnormal tie, odd below: up"},
      {sub(2.5f), 0x0002, "subnormal tie, even below: down"},
      {sub(3.5f), 0x0004, "subnormal tie 3.5: up"},
      {sub(0.25f), 0x0000, "quarter of the smallest subnormal"},
      {float_from_bits(0x00000001), 0x0000, "float32 denormal"},
      {float_from_bits(0x80000001), 0x8000, "negative float32 denormal keeps the sign"},
      {float_from_bits(0x007fffff), 0x0000, "largest float32 denormal"},
      {float_from_bits(0x7f800001), 0x7e00, "signaling NaN, low payload: quiet"},
      {float_from_bits(0xff800001), 0xfe00, "negative signaling NaN: quiet, sign kept"},
      {float_from_bits(0x7f802000), 0x7e01, "signaling NaN payload bit kept"},
      {float_from_bits(0x7fa00000), 0x7f00, "signaling NaN high payload"},
      {float_from_bits(0x7fc00000), 0x7e00, "quiet NaN"},
      {float_from_bits(0xffffffff), 0xffff, "negative all-ones NaN"},
  };
  for (const Case& c : cases) {
    INFO(c.what << fmt::format(" (input {:08x})", float_bits(c.in)));
    CHECK(ws1::to_fp16(c.in).bits == c.out);
  }
  CHECK(ws1::from_fp16(H(0x0001)) == std::ldexp(1.0f, -24));
  CHECK(ws1::from_fp16(H(0x7bff)) == 65504.0f);
  CHECK(ws1::round_fp16(65519.0f) == 65504.0f);
}

TEST_CASE("conversions are monotone over a float32 sweep", "[numeric]") {
  // Every 251st non-negative float32 pattern (primes stride across all exponent/mantissa
  // positions), plus each pattern's negation: rounding never reverses order.
  Failures f;
  float prev_b = 0.0f, prev_h = 0.0f;
  for (std::uint64_t u = 0; u < 0x7f800000u; u += 251) {
    const float x = float_from_bits(static_cast<std::uint32_t>(u));
    const float b = ws1::round_bf16(x), h = ws1::round_fp16(x);
    if (b < prev_b || h < prev_h) f.add(fmt::format("not monotone at {:08x}", u));
    if (ws1::round_bf16(-x) != -b || ws1::round_fp16(-x) != -h) f.add(fmt::format("not odd at {:08x}", u));
    prev_b = b;
    prev_h = h;
  }
  CHECK_NO_FAILURES(f);
}

TEST_CASE("ulp_distance", "[numeric]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float tiny = std::numeric_limits<float>::denorm_min();
  SECTION("bf16") {
    CHECK(ws1::ulp_distance(1.0f, 1.0078125f, DType::kBF16) == 1);
    CHECK(ws1::ulp_distance(1.0f, 2.0f, DType::kBF16) == 128);
    CHECK(ws1::ulp_distance(-1.0f, 1.0f, DType::kBF16) == 2 * 0x3f80);
    CHECK(ws1::ulp_distance(0.0f, -0.0f, DType::kBF16) == 0);
    const float s = std::ldexp(1.0f, -133);  // smallest bf16 subnormal
    CHECK(ws1::ulp_distance(-s, s, DType::kBF16) == 2);
    CHECK(ws1::ulp_distance(3.3895313892515355e38f, inf, DType::kBF16) == 1);
    CHECK(ws1::ulp_distance(nan, 1.0f, DType::kBF16) == kNanDistance);
    CHECK(ws1::ulp_distance(1.0f, nan, DType::kBF16) == kNanDistance);
    CHECK(ws1::ulp_distance(nan, nan, DType::kBF16) == kNanDistance);
    // Not representable: rounded to bf16 first.
    CHECK(ws1::ulp_distance(1.0f + std::ldexp(1.0f, -9), 1.0f, DType::kBF16) == 0);
    CHECK(ws1::ulp_distance(1.0f + std::ldexp(3.0f, -9), 1.0f, DType::kBF16) == 1);
  }
  SECTION("fp16") {
    CHECK(ws1::ulp_distance(1.0f, 1.0f + std::ldexp(1.0f, -10), DType::kF16) == 1);
    CHECK(ws1::ulp_distance(65504.0f, inf, DType::kF16) == 1);
    CHECK(ws1::ulp_distance(-0.0f, std::ldexp(1.0f, -24), DType::kF16) == 1);
    CHECK(ws1::ulp_distance(-inf, inf, DType::kF16) == 2 * 0x7c00);
    CHECK(ws1::ulp_distance(nan, 0.0f, DType::kF16) == kNanDistance);
  }
  SECTION("f32") {
    CHECK(ws1::ulp_distance(1.0f, std::nextafter(1.0f, 2.0f), DType::kF32) == 1);
    CHECK(ws1::ulp_distance(-tiny, tiny, DType::kF32) == 2);
    CHECK(ws1::ulp_distance(-0.0f, 0.0f, DType::kF32) == 0);
    CHECK(ws1::ulp_distance(std::numeric_limits<float>::max(), inf, DType::kF32) == 1);
    CHECK(ws1::ulp_distance(-inf, inf, DType::kF32) == 2ull * 0x7f800000u);
    CHECK(ws1::ulp_distance(1.0f, nan, DType::kF32) == kNanDistance);
  }
  SECTION("f64 counts float64 steps") {
    CHECK(ws1::ulp_distance(1.0f, std::nextafter(1.0f, 2.0f), DType::kF64) == (1ull << 29));
    CHECK(ws1::ulp_distance(-0.0f, 0.0f, DType::kF64) == 0);
    CHECK(ws1::ulp_distance(-inf, inf, DType::kF64) == 2 * 0x7ff0000000000000ull);
  }
  SECTION("non-float dtype is a programming error") {
    CHECK_THROWS_AS(ws1::ulp_distance(1.0f, 2.0f, DType::kI32), std::logic_error);
    CHECK_THROWS_AS(ws1::ulp_distance(1.0f, 2.0f, DType::kBool), std::logic_error);
  }
}

TEST_CASE("buffer conversions", "[numeric]") {
  const std::vector<float> in{1.0f, -2.5f, 65520.0f, float_from_bits(0x3f818000)};
  std::vector<bf16> b(in.size());
  std::vector<fp16> h(in.size());
  ws1::to_bf16(in, b);
  ws1::to_fp16(in, h);
  for (std::size_t i = 0; i < in.size(); ++i) {
    CHECK(b[i] == ws1::to_bf16(in[i]));
    CHECK(h[i] == ws1::to_fp16(in[i]));
  }
  std::vector<float> back(in.size());
  ws1::from_bf16(b, back);
  for (std::size_t i = 0; i < in.size(); ++i) CHECK(back[i] == ws1::round_bf16(in[i]));
  ws1::from_fp16(h, back);
  for (std::size_t i = 0; i < in.size(); ++i) CHECK(back[i] == ws1::round_fp16(in[i]));
  std::vector<bf16> short_out(in.size() - 1);
  CHECK_THROWS_AS(ws1::to_bf16(in, short_out), std::logic_error);
}

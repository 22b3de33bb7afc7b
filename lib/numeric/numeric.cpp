// float32 <-> bf16 / fp16 with round-to-nearest-even, done on the bit patterns with integer
// arithmetic only: the result does not depend on the FPU's rounding mode, FTZ/DAZ, or on
// FP contraction (the library is also built with -ffp-contract=off).
#include "ws1/numeric.hpp"

#include <bit>
#include <stdexcept>

namespace ws1 {
namespace {

constexpr std::uint32_t kF32Sign = 0x8000'0000u;
constexpr std::uint32_t kF32ExpMask = 0x7f80'0000u;
constexpr std::uint32_t kF32MantMask = 0x007f'ffffu;

bool f32_bits_nan(std::uint32_t b) { return (b & ~kF32Sign) > kF32ExpMask; }

// Drops the low `shift` bits of `value`, rounding to nearest with ties to even (0 < shift < 32).
// A carry out of the kept bits is part of the result: for IEEE encodings it moves the value to
// the next binade or to infinity, which is exactly what rounding up across that edge means.
std::uint32_t shift_right_rne(std::uint32_t value, int shift) {
  const std::uint32_t kept = value >> shift;
  const std::uint32_t dropped = value & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  const bool up = dropped > half || (dropped == half && (kept & 1u) != 0);
  return kept + (up ? 1u : 0u);
}

template <class Out, class In, class F>
void convert_all(std::span<const In> in, std::span<Out> out, F f) {
  if (in.size() != out.size())
    throw std::logic_error("ws1 numeric: buffer conversion with different input and output sizes");
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = f(in[i]);
}

}  // namespace

std::uint32_t float_bits(float f) { return std::bit_cast<std::uint32_t>(f); }
float float_from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }
std::uint64_t double_bits(double d) { return std::bit_cast<std::uint64_t>(d); }
double double_from_bits(std::uint64_t bits) { return std::bit_cast<double>(bits); }

bool is_nan(bf16 h) { return (h.bits & 0x7fffu) > 0x7f80u; }
bool is_nan(fp16 h) { return (h.bits & 0x7fffu) > 0x7c00u; }

// bf16 is float32 with the low 16 mantissa bits dropped: same sign, exponent field and
// subnormal range, so rounding the low half away covers normals, subnormals (and the step from
// the largest subnormal to the smallest normal) and overflow to infinity in one rule.
bf16 to_bf16(float f) {
  const std::uint32_t b = float_bits(f);
  if (f32_bits_nan(b)) {
    // Keep sign and the top payload bits; set the quiet bit so a payload living only in the
    // low half cannot turn into infinity, and a signaling NaN comes out quiet.
    return bf16{static_cast<std::uint16_t>((b >> 16) | 0x0040u)};
  }
  return bf16{static_cast<std::uint16_t>(shift_right_rne(b, 16))};
}

float from_bf16(bf16 h) { return float_from_bits(static_cast<std::uint32_t>(h.bits) << 16); }

float round_bf16(float f) { return from_bf16(to_bf16(f)); }

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Normal range 2^-14 .. 65504,
// subnormals k * 2^-24 for k in 1..1023.
fp16 to_fp16(float f) {
  const std::uint32_t b = float_bits(f);
  const auto sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  const std::uint32_t exp_field = (b & kF32ExpMask) >> 23;
  const std::uint32_t mant = b & kF32MantMask;

  if (exp_field == 0xffu) {
    if (mant == 0) return fp16{static_cast<std::uint16_t>(sign | 0x7c00u)};  // +-inf
    // NaN: top 10 payload bits kept, quiet bit (0x0200) set.
    return fp16{static_cast<std::uint16_t>(sign | 0x7e00u | (mant >> 13))};
  }
  // float32 zeros and subnormals are below 2^-126, far under half the smallest fp16 subnormal
  // (2^-25): they round to a zero of the same sign.
  if (exp_field == 0) return fp16{sign};

  const int e = static_cast<int>(exp_field) - 127;  // value = 1.mant * 2^e
  if (e > 15) return fp16{static_cast<std::uint16_t>(sign | 0x7c00u)};  // >= 65536
  if (e >= -14) {
    // Normal in fp16: re-bias the exponent, round 23 mantissa bits to 10. A carry out of the
    // mantissa bumps the exponent; from e = 15 it reaches 0x7c00, i.e. values >= 65520 -> inf.
    const std::uint32_t wide = (static_cast<std::uint32_t>(e + 15) << 23) | mant;
    return fp16{static_cast<std::uint16_t>(sign | shift_right_rne(wide, 13))};
  }
  // Below 2^-14: the result is a subnormal k * 2^-24 (or zero, or the smallest normal when
  // k rounds up to 1024, whose encoding 0x0400 is exactly that). With the 24-bit significand
  // sig = 1.mant * 2^23, k = sig * 2^(e + 1): shift right by -(e + 1) >= 14.
  const std::uint32_t sig = mant | 0x0080'0000u;
  const int shift = -(e + 1);
  if (shift > 24) return fp16{sign};  // value < 2^-25: below half the smallest subnormal
  return fp16{static_cast<std::uint16_t>(sign | shift_right_rne(sig, shift))};
}

float from_fp16(fp16 h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h.bits & 0x8000u) << 16;
  const std::uint32_t exp_field = (h.bits >> 10) & 0x1fu;
  const std::uint32_t mant = h.bits & 0x03ffu;
  if (exp_field == 0x1fu) return float_from_bits(sign | kF32ExpMask | (mant << 13));  // inf, NaN
  if (exp_field != 0)
    return float_from_bits(sign | ((exp_field - 15 + 127) << 23) | (mant << 13));
  if (mant == 0) return float_from_bits(sign);  // +-0
  // Subnormal mant * 2^-24: normalise so the leading one becomes the implicit bit.
  // mant has its top set bit at position p (0..9); value = 1.xxx * 2^(p - 24).
  const int p = std::bit_width(mant) - 1;
  const std::uint32_t frac = (mant << (23 - p)) & kF32MantMask;
  const auto exp32 = static_cast<std::uint32_t>(p - 24 + 127);
  return float_from_bits(sign | (exp32 << 23) | frac);
}

float round_fp16(float f) { return from_fp16(to_fp16(f)); }

void to_bf16(std::span<const float> in, std::span<bf16> out) {
  convert_all(in, out, [](float f) { return to_bf16(f); });
}
void from_bf16(std::span<const bf16> in, std::span<float> out) {
  convert_all(in, out, [](bf16 h) { return from_bf16(h); });
}
void to_fp16(std::span<const float> in, std::span<fp16> out) {
  convert_all(in, out, [](float f) { return to_fp16(f); });
}
void from_fp16(std::span<const fp16> in, std::span<float> out) {
  convert_all(in, out, [](fp16 h) { return from_fp16(h); });
}

}  // namespace ws1

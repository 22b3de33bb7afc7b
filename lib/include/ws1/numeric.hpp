// Low-precision number formats: bf16 and fp16 storage, float32 <-> bf16/fp16 conversion with
// round-to-nearest-even, raw-bit views, and ULP distances.
#pragma once

#include <cstdint>
#include <span>

#include "ws1/dtype.hpp"

namespace ws1 {

// A bf16 value as stored: the upper 16 bits of an IEEE float32.
struct bf16 {
  std::uint16_t bits = 0;
  friend bool operator==(bf16, bf16) = default;  // raw-bit equality (+0 != -0, NaN == same NaN)
};

// An IEEE 754 binary16 value as stored.
struct fp16 {
  std::uint16_t bits = 0;
  friend bool operator==(fp16, fp16) = default;
};

std::uint32_t float_bits(float f);
float float_from_bits(std::uint32_t bits);
std::uint64_t double_bits(double d);
double double_from_bits(std::uint64_t bits);

// float32 -> bf16, round to nearest, ties to even. NaN stays NaN and is quieted (sign and top
// payload bits kept),
// +-0 keep their sign, values past the largest finite bf16 round to +-inf, subnormals round
// like any other value.
bf16 to_bf16(float f);
float from_bf16(bf16 h);  // exact (a NaN keeps its payload bit for bit, signaling ones too)
// Round a float32 to the nearest bf16 value, returned as float32.
float round_bf16(float f);

// float32 -> IEEE binary16, round to nearest, ties to even (same rules; fp16 has its own
// subnormal range below 2^-14).
fp16 to_fp16(float f);
float from_fp16(fp16 h);  // exact (a NaN keeps its payload, shifted into the float32 mantissa)
float round_fp16(float f);

// Distance in units in the last place of `t` (kBF16, kF16 or kF32) between two values
// already representable in `t`: the number of representable values of `t` from a to b,
// counting +0 and -0 as one point. NaN on either side gives UINT64_MAX; +-inf count as the
// values one past the largest finite value.
// Also: kF64 counts float64 steps (every float is representable there). An input that is not
// representable in `t` is first rounded to `t` (round_bf16 / round_fp16), so the result is the
// distance between the two values as `t` stores them. A non-float `t` is a programming error:
// std::logic_error.
std::uint64_t ulp_distance(float a, float b, DType t);

// NaN tests on the stored bits (no conversion).
bool is_nan(bf16 h);
bool is_nan(fp16 h);

// Element-wise conversions of whole buffers, same rules as the scalar functions. `in` and `out`
// must have the same size (a mismatch is a programming error: std::logic_error).
void to_bf16(std::span<const float> in, std::span<bf16> out);
void from_bf16(std::span<const bf16> in, std::span<float> out);
void to_fp16(std::span<const float> in, std::span<fp16> out);
void from_fp16(std::span<const fp16> in, std::span<float> out);

}  // namespace ws1

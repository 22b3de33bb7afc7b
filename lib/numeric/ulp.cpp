// ULP distances: IEEE encodings are sign-magnitude, and for one sign the magnitude bits count
// the representable values in order (subnormals, normals, then infinity one past the largest
// finite value). The distance is therefore a difference of magnitudes on one side of zero and
// a sum across it, where +0 and -0 (magnitude 0 both) are the same point.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "ws1/numeric.hpp"

namespace ws1 {
namespace {

std::uint64_t signed_magnitude_distance(bool neg_a, std::uint64_t mag_a, bool neg_b,
                                        std::uint64_t mag_b) {
  if (neg_a != neg_b) return mag_a + mag_b;  // at most 2 * 0x7ff0... for f64: fits
  return mag_a > mag_b ? mag_a - mag_b : mag_b - mag_a;
}

std::uint64_t distance16(std::uint16_t a, std::uint16_t b) {
  return signed_magnitude_distance((a & 0x8000u) != 0, a & 0x7fffu, (b & 0x8000u) != 0,
                                   b & 0x7fffu);
}

}  // namespace

std::uint64_t ulp_distance(float a, float b, DType t) {
  if (!dtype_is_float(t))
    throw std::logic_error("ws1::ulp_distance: dtype is not a floating-point type");
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<std::uint64_t>::max();
  switch (t) {
    case DType::kBF16:
      return distance16(to_bf16(a).bits, to_bf16(b).bits);
    case DType::kF16:
      return distance16(to_fp16(a).bits, to_fp16(b).bits);
    case DType::kF32: {
      const std::uint32_t x = float_bits(a), y = float_bits(b);
      return signed_magnitude_distance((x >> 31) != 0, x & 0x7fff'ffffu, (y >> 31) != 0,
                                       y & 0x7fff'ffffu);
    }
    default: {  // kF64: widening a float is exact
      const std::uint64_t x = double_bits(a), y = double_bits(b);
      constexpr std::uint64_t kMag = 0x7fff'ffff'ffff'ffffull;
      return signed_magnitude_distance((x >> 63) != 0, x & kMag, (y >> 63) != 0, y & kMag);
    }
  }
}

}  // namespace ws1

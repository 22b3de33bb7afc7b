// Element access shared by the judges: a row-major walk over the logical elements of two
// tensors of one shape (any strides), and the reads of one element's bits or value.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "ws1/numeric.hpp"
#include "ws1/tensor.hpp"

namespace ws1::judge_detail {

inline void require_defined(const Tensor& t, const char* call, const char* side) {
  if (!t.defined())
    throw std::logic_error(std::string("ws1::") + call + ": the " + side + " tensor is undefined");
}

// Calls f(flat, a_element, b_element) for every logical element in row-major order; `a` and
// `b` must have the same shape. The innermost dimension is a strided inner loop; the outer
// ones advance an odometer, so no copy is made of a non-contiguous view.
template <class F>
void for_each_pair(const Tensor& a, const Tensor& b, F&& f) {
  const Shape& shape = a.shape();
  const std::int64_t n = a.numel();
  if (n == 0) return;
  const std::byte* pa = a.raw();
  const std::byte* pb = b.raw();
  const std::size_t rank = shape.size();
  if (rank == 0) {
    f(std::int64_t{0}, pa, pb);
    return;
  }
  const auto ea = static_cast<std::ptrdiff_t>(dtype_size(a.dtype()));
  const auto eb = static_cast<std::ptrdiff_t>(dtype_size(b.dtype()));
  const std::int64_t inner = shape[rank - 1];
  const std::ptrdiff_t step_a = a.strides()[rank - 1] * ea, step_b = b.strides()[rank - 1] * eb;
  std::vector<std::int64_t> idx(rank - 1, 0);
  std::ptrdiff_t row_a = 0, row_b = 0;  // byte offsets of the current row
  for (std::int64_t flat = 0; flat < n; flat += inner) {
    const std::byte* ra = pa + row_a;
    const std::byte* rb = pb + row_b;
    for (std::int64_t j = 0; j < inner; ++j) f(flat + j, ra + j * step_a, rb + j * step_b);
    for (std::size_t d = rank - 1; d-- > 0;) {
      const std::ptrdiff_t sa = a.strides()[d] * ea, sb = b.strides()[d] * eb;
      if (++idx[d] < shape[d]) {
        row_a += sa;
        row_b += sb;
        break;
      }
      row_a -= (shape[d] - 1) * sa;
      row_b -= (shape[d] - 1) * sb;
      idx[d] = 0;
    }
  }
}

// The multi-index of a row-major flat index.
inline Shape unravel(std::int64_t flat, const Shape& shape) {
  Shape idx(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    if (shape[d] > 0) {
      idx[d] = flat % shape[d];
      flat /= shape[d];
    }
  }
  return idx;
}

// Raw bits of one element, as an unsigned integer of the dtype's width (host byte order).
inline std::uint64_t load_bits(const std::byte* p, std::size_t size) {
  switch (size) {
    case 1: {
      std::uint8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case 2: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

// The value the bits stand for, for reports (an integer is converted to double).
inline double bits_value(std::uint64_t bits, DType t) {
  switch (t) {
    case DType::kBF16:
      return from_bf16(bf16{static_cast<std::uint16_t>(bits)});
    case DType::kF16:
      return from_fp16(fp16{static_cast<std::uint16_t>(bits)});
    case DType::kF32:
      return float_from_bits(static_cast<std::uint32_t>(bits));
    case DType::kF64:
      return double_from_bits(bits);
    case DType::kI32:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(bits));
    case DType::kI64:
      return static_cast<double>(static_cast<std::int64_t>(bits));
    case DType::kBool:
    case DType::kU8:
      return static_cast<double>(bits);
  }
  return 0;
}

inline bool bits_are_nan(std::uint64_t bits, DType t) {
  switch (t) {
    case DType::kBF16:
      return is_nan(bf16{static_cast<std::uint16_t>(bits)});
    case DType::kF16:
      return is_nan(fp16{static_cast<std::uint16_t>(bits)});
    case DType::kF32:
      return std::isnan(float_from_bits(static_cast<std::uint32_t>(bits)));
    case DType::kF64:
      return std::isnan(double_from_bits(bits));
    default:
      return false;
  }
}

// A float dtype's +infinity bits (all exponent bits, no mantissa): with the sign bit cleared,
// bits above it are a NaN. 0 for the others.
inline std::uint64_t inf_bits(DType t) {
  switch (t) {
    case DType::kBF16:
      return 0x7f80;
    case DType::kF16:
      return 0x7c00;
    case DType::kF32:
      return 0x7f800000;
    case DType::kF64:
      return 0x7ff0000000000000;
    default:
      return 0;
  }
}

// A float dtype's sign bit; 0 for the others.
inline std::uint64_t sign_bit(DType t) {
  return dtype_is_float(t) ? std::uint64_t{1} << (8 * dtype_size(t) - 1) : 0;
}

// One element of a bf16, f16 or f32 tensor, widened exactly to float.
inline float load_float(const std::byte* p, DType t) {
  switch (t) {
    case DType::kBF16: {
      bf16 h;
      std::memcpy(&h.bits, p, 2);
      return from_bf16(h);
    }
    case DType::kF16: {
      fp16 h;
      std::memcpy(&h.bits, p, 2);
      return from_fp16(h);
    }
    default: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
  }
}

}  // namespace ws1::judge_detail

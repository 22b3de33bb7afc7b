// Deterministic bf16 test inputs from a fixed seed (no <random>: the same values with every
// standard library), shared by the GPU tests that compare backends bit for bit.
#pragma once

#include <cstdint>

#include "ws1/numeric.hpp"
#include "ws1/tensor.hpp"

namespace ws1_test {

// Marsaglia's xorshift32 from a seed-derived nonzero state.
struct Xorshift32 {
  explicit Xorshift32(std::uint32_t seed) : x(seed * 2654435761u + 1) {}
  std::uint32_t next() {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
  }
  std::uint32_t x;
};

// Values in [-scale, scale] on a 1/1000 grid, rounded to bf16.
inline ws1::Tensor grid_bf16(const ws1::Shape& shape, std::uint32_t seed, float scale) {
  ws1::Tensor t(ws1::DType::kBF16, shape);
  auto* p = t.data<std::uint16_t>();
  Xorshift32 g(seed);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    p[i] = ws1::to_bf16(scale * (static_cast<float>(g.next() % 2001u) - 1000.0f) / 1000.0f).bits;
  return t;
}

}  // namespace ws1_test

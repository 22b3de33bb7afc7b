// Helpers of the elementwise-class op tests (embedding, rope, silu, swiglu, pack) and qk_norm:
// seeded bf16 inputs, raw-bit equality, row slices, and "output of a call".
#pragma once

#include <cstring>
#include <random>

#include "op_test_support.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"

namespace ws1::test {

// Standard normal bf16 values times `scale` from a fixed seed (std::mt19937: the same on
// every libstdc++ build we use).
inline Tensor random_bf16(const Shape& shape, std::uint32_t seed, float scale = 1.0f) {
  Tensor t(DType::kBF16, shape);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto* p = t.data<std::uint16_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = to_bf16(dist(gen) * scale).bits;
  return t;
}

// Same dtype, shape and bytes (logical elements in row-major order).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == cb.nbytes() && std::memcmp(ca.raw(), cb.raw(), ca.nbytes()) == 0;
}

// The tensor `name` of a successful call (op_test_support's get, under the name these tests use).
inline Tensor output(const Result<Tensors>& r, std::string_view name) { return get(r, name); }

// `t`'s elements rounded to bf16 (the "reference rounded once" a candidate must equal).
inline Tensor rounded_bf16(const Tensor& f32) {
  REQUIRE(f32.dtype() == DType::kF32);
  const Tensor c = f32.contiguous();
  Tensor out(DType::kBF16, c.shape());
  for (std::int64_t i = 0; i < c.numel(); ++i)
    out.data<std::uint16_t>()[i] = to_bf16(c.data<float>()[i]).bits;
  return out;
}

// Rows [b, e) of dim 0, as a contiguous copy.
inline Tensor rows(const Tensor& t, std::int64_t b, std::int64_t e) {
  return t.slice(0, b, e).contiguous();
}

// a and b stacked along dim 0 (same dtype and trailing shape).
inline Tensor concat_rows(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == b.dtype());
  Shape s = a.shape();
  s[0] += b.shape()[0];
  Tensor out(a.dtype(), s);
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  std::memcpy(out.raw(), ca.raw(), ca.nbytes());
  std::memcpy(out.raw() + ca.nbytes(), cb.raw(), cb.nbytes());
  return out;
}

// Judges `candidate` against `reference` with the contract's row for (judgment, op, bf16).
inline AccuracyTensor judge_bf16(Judgment j, std::string_view op, std::string name,
                                 const Tensor& candidate, const Tensor& reference) {
  return judge_accuracy(std::move(name), candidate, reference,
                        tolerance(j, op, ContractDType::kBFloat16));
}

}  // namespace ws1::test

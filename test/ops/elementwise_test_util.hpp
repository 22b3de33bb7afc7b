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

inline Tensor i64_tensor(const Shape& shape, const std::vector<std::int64_t>& v) {
  Tensor t(DType::kI64, shape);
  REQUIRE(static_cast<std::int64_t>(v.size()) == t.numel());
  std::copy(v.begin(), v.end(), t.data<std::int64_t>());
  return t;
}

// The elements of a bf16 or f32 tensor as float32, row-major.
inline std::vector<float> floats(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<float> v(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (c.dtype() == DType::kBF16)
      v[i] = from_bf16(bf16{c.data<std::uint16_t>()[i]});
    else if (c.dtype() == DType::kF32)
      v[i] = c.data<float>()[i];
    else
      FAIL("floats: not a bf16 or f32 tensor");
  }
  return v;
}

// Same dtype, shape and bytes (logical elements in row-major order).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == cb.nbytes() && std::memcmp(ca.raw(), cb.raw(), ca.nbytes()) == 0;
}

// The tensor `name` of a successful call (a handle: it shares the result's storage, so it
// outlives a temporary Result).
inline Tensor output(const Result<Tensors>& r, std::string_view name) {
  if (!r.ok()) FAIL(r.error().message());
  const Tensor* t = find_tensor(*r, name);
  REQUIRE(t != nullptr);
  return *t;
}

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

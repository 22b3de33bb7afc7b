// Shared by the logprob op tests (logp, batch_invariant_logp, linear_logp): seeded inputs, row
// slicing, the runner's output-dtype check and the contract's invariance NaN policy.
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "op_support.hpp"
#include "op_test_support.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"

namespace ws1::test::logprob {

inline constexpr std::int64_t kVocab = 151936;  // Qwen3-8B vocabulary (a shape, not a tolerance)

inline const Op& op_named(std::string_view name) {
  const Op* o = find_op_impl(name);
  REQUIRE(o != nullptr);
  return *o;
}

inline Tensor randn_f32(const Shape& shape, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor t(DType::kF32, shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(gen);
  return t;
}

inline std::vector<std::int64_t> random_targets(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<std::int64_t> dist(0, vocab - 1);
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

// A bf16 tensor widened to float32 (exact): the oracle's bf16 dy for the float32 dy.logp input.
inline Tensor widened(const Tensor& t) { return ops::f32_tensor(t.shape(), ops::to_f32(t)); }

// Rows [r0, r1) of a tensor along its first dimension, as an independent contiguous tensor.
inline Tensor rows(const Tensor& t, std::int64_t r0, std::int64_t r1) { return t.slice(0, r0, r1).contiguous(); }

// Rows of `t` picked by `index` (a permutation or subset), along the first dimension.
inline Tensor gather_rows(const Tensor& t, const std::vector<std::int64_t>& index) {
  Shape shape = t.shape();
  shape[0] = static_cast<std::int64_t>(index.size());
  Tensor out(t.dtype(), shape);
  const Tensor c = t.contiguous();
  const std::size_t row_bytes = c.nbytes() / static_cast<std::size_t>(c.shape()[0]);
  for (std::size_t i = 0; i < index.size(); ++i)
    std::memcpy(out.raw() + i * row_bytes, c.raw() + static_cast<std::size_t>(index[i]) * row_bytes, row_bytes);
  return out;
}

// Rows stacked along the first dimension (all parts share dtype and trailing shape).
inline Tensor concat_rows(const std::vector<Tensor>& parts) {
  REQUIRE(!parts.empty());
  Shape shape = parts.front().shape();
  shape[0] = 0;
  for (const Tensor& p : parts) shape[0] += p.shape()[0];
  Tensor out(parts.front().dtype(), shape);
  std::size_t at = 0;
  for (const Tensor& p : parts) {
    const Tensor c = p.contiguous();
    std::memcpy(out.raw() + at, c.raw(), c.nbytes());
    at += c.nbytes();
  }
  return out;
}

// The contract's invariance NaN policy (spec §4.2), "fail" when undeclared.
inline NanPolicy nan_policy() {
  const auto& inv = contract().declarations.invariance;
  return inv ? inv->nan_policy : NanPolicy::kFail;
}

// What the runner does with a candidate's outputs before judging values: each declared output
// must be present with the dtype outputs()[i].candidate_dtype declares (spec §9.5; DESIGN §3.4).
// Returns one line per violation; empty means green.
inline std::vector<std::string> output_dtype_violations(const std::vector<TensorDecl>& declared,
                                                         const Tensors& produced) {
  std::vector<std::string> bad;
  for (const TensorDecl& d : declared) {
    const Tensor* t = find_tensor(produced, d.name);
    if (t == nullptr)
      bad.push_back(d.name + ": missing");
    else if (t->dtype() != d.candidate_dtype)
      bad.push_back(d.name + ": dtype " + std::string(dtype_safetensors_name(t->dtype())) +
                    ", declared " + std::string(dtype_safetensors_name(d.candidate_dtype)));
  }
  return bad;
}

}  // namespace ws1::test::logprob

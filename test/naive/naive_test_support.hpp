// What the naive engine's tests share: the smoke workload's fixtures as inputs, and the FP32
// reference beside the naive result.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "run_test_support.hpp"
#include "ws1/naive.hpp"
#include "ws1/numeric.hpp"
#include "ws1/ref.hpp"

namespace ws1::test {

// The generated inputs of fixture `id` of the smoke workload.
inline Tensors fixture_inputs(const std::string& id) {
  const Workload& w = workload("ws1-smoke");
  RunContext run = w.run_context();
  FixtureGenerator gen;
  auto in = generated_inputs(run, gen, w.spec(id));
  REQUIRE(in.ok());
  Tensors t;
  for (const NamedTensor& n : in->tensors) t.push_back(n);
  return t;
}

inline const Tensor& tensor_named(const Tensors& ts, const std::string& name) {
  const Tensor* t = find_tensor(ts, name);
  if (t == nullptr) FAIL("no tensor " << name);
  return *t;
}

inline OpContext smoke_ctx() { return workload("ws1-smoke").run_context().op_context; }

// ---- tensors in and out ----

// A bf16 tensor of hand-worked values (each must already be a bf16 value).
inline Tensor bf16_of(const Shape& shape, const std::vector<float>& values) {
  Tensor t(DType::kBF16, shape);
  REQUIRE(static_cast<std::int64_t>(values.size()) == t.numel());
  for (std::size_t i = 0; i < values.size(); ++i) {
    REQUIRE(round_bf16(values[i]) == values[i]);
    t.data<std::uint16_t>()[i] = to_bf16(values[i]).bits;
  }
  return t;
}

template <class T>
Tensor tensor_of(DType dtype, const Shape& shape, const std::vector<T>& values) {
  Tensor t(dtype, shape);
  REQUIRE(static_cast<std::int64_t>(values.size()) == t.numel());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}
inline Tensor f32_of(const Shape& shape, const std::vector<float>& v) { return tensor_of(DType::kF32, shape, v); }
inline Tensor i64_of(const Shape& shape, const std::vector<std::int64_t>& v) { return tensor_of(DType::kI64, shape, v); }
inline Tensor bool_of(const Shape& shape, const std::vector<std::uint8_t>& v) { return tensor_of(DType::kBool, shape, v); }

// A bf16 or float32 tensor's values, row-major.
inline std::vector<float> values_of(const Tensor& given) {
  const Tensor t = given.is_contiguous() ? given : given.contiguous();
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = t.dtype() == DType::kF32 ? t.data<float>()[i] : from_bf16(bf16{t.data<std::uint16_t>()[i]});
  return out;
}

inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// The [cols, rows] transpose of a row-major [rows, cols] matrix.
inline std::vector<float> transposed(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
  std::vector<float> t(x.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}

// The naive result of op (forward or backward) on `in`, which must succeed.
inline Tensors naive_run(const std::string& op, const Tensors& in, bool backward, const OpContext& ctx = smoke_ctx()) {
  auto r = backward ? naive::backward(op, in, ctx) : naive::forward(op, in, ctx);
  INFO(op << (backward ? " backward: " : " forward: ") << (r.ok() ? std::string() : r.error().message()));
  REQUIRE(r.ok());
  return std::move(r).value();
}

// `op` on its primary/normal smoke fixture without input `missing` is bad input naming the op
// and the tensor.
inline void check_missing(const std::string& op, const std::string& missing, bool backward = false) {
  INFO(op << " without " << missing);
  Tensors in = fixture_inputs(op + "/primary/normal");
  const auto before = in.size();
  std::erase_if(in, [&](const NamedTensor& t) { return t.name == missing; });
  REQUIRE(in.size() + 1 == before);
  auto r = backward ? naive::backward(op, in, smoke_ctx()) : naive::forward(op, in, smoke_ctx());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ExitCode::kBadInput);
  CHECK_THAT(r.error().message(), Catch::Contains(op) && Catch::Contains(missing));
}

}  // namespace ws1::test

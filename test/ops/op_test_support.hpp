// Shared by the op tests: the oracle files, the contract's rows, and running a reference or a
// candidate against them. Tolerances come from contracts/ws1-c1-v2.json only.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "test_paths.hpp"
#include "ws1/contract.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"
#include "ws1/op.hpp"
#include "ws1/safetensors.hpp"

namespace ws1::test {

inline const Contract& contract() {
  static const Contract c = [] {
    auto r = load_contract(source_root() / "contracts" / "ws1-c1-v2.json");
    if (!r) FAIL(r.error().message());
    return std::move(r).value();
  }();
  return c;
}

// The contract row for (judgment, the op's class, dtype).
inline Tolerance tolerance(Judgment j, std::string_view op, ContractDType dtype) {
  const auto cls = contract().op_class(op);
  REQUIRE(cls.has_value());
  auto th = contract().threshold(j, *cls, dtype);
  REQUIRE(th.ok());
  REQUIRE(th->tolerance.has_value());
  return *th->tolerance;
}

// Standard normal values × scale rounded to bf16, from a fixed seed.
inline Tensor randn_bf16(const Shape& shape, std::uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Tensor t(DType::kBF16, shape);
  auto* p = t.data<std::uint16_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = to_bf16(dist(gen) * scale).bits;
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

inline Tensor i64_tensor(const Shape& shape, const std::vector<std::int64_t>& v) {
  Tensor t(DType::kI64, shape);
  REQUIRE(static_cast<std::int64_t>(v.size()) == t.numel());
  std::copy(v.begin(), v.end(), t.data<std::int64_t>());
  return t;
}

// The output `name` of a call that must have succeeded (its error is the failure message). By
// value: a Tensor is a handle sharing the result's storage, so it outlives a temporary Result.
inline Tensor get(const Result<Tensors>& r, std::string_view name) {
  if (!r.ok()) FAIL(r.error().message());
  const Tensor* t = find_tensor(*r, name);
  REQUIRE(t != nullptr);
  return *t;
}

// Same shape, dtype and bits (the invariance comparator, NaN policy fail).
inline bool bits_equal(const Tensor& x, const Tensor& y) {
  return passed(judge_bitwise("t", x, y, NanPolicy::kFail));
}

// The PyTorch float64 oracle file of `op` (../shared/oracle/pytorch-fp64/, beside the checkout;
// CI has it). Missing data fails the test: a test that passes without its oracle asserts
// nothing.
inline std::optional<SafetensorsFile> oracle(std::string_view op) {
  const auto path = shared_dir() / "oracle" / "pytorch-fp64" / (std::string(op) + ".safetensors");
  if (!std::filesystem::exists(path))
    FAIL("oracle data missing: " << path.string()
                                 << " (the PyTorch float64 oracle of ../shared/oracle beside the checkout)");
  auto f = read_safetensors(path);
  if (!f) FAIL(f.error().message());
  return std::move(f).value();
}

// Oracle tensors renamed to the op's names: {"in.w" -> "weight", ...}.
inline Tensors oracle_inputs(const SafetensorsFile& f, const std::map<std::string, std::string>& rename) {
  Tensors out;
  for (const auto& [from, to] : rename) {
    const Tensor* t = f.find(from);
    REQUIRE(t != nullptr);
    out.push_back({to, *t});
  }
  return out;
}

struct Agreement {
  double max_abs = 0;      // max |got - want|
  double worst_ratio = 0;  // max |got - want| / (atol + rtol |want|)
  std::int64_t violations = 0;
};

// `got` (any float dtype) against `want` (F64 oracle) under `tol`.
inline Agreement agree(const Tensor& got, const Tensor& want, const Tolerance& tol) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(want.dtype() == DType::kF64);
  const Tensor g = got.contiguous();
  const Tensor w = want.contiguous();
  Agreement a;
  for (std::int64_t i = 0; i < g.numel(); ++i) {
    double gv = 0;
    switch (g.dtype()) {
      case DType::kF32: gv = g.data<float>()[i]; break;
      case DType::kF64: gv = g.data<double>()[i]; break;
      default: FAIL("agree: unexpected dtype");
    }
    const double wv = w.data<double>()[i];
    const double err = std::fabs(gv - wv);
    const double allowed = tol.atol + tol.rtol * std::fabs(wv);
    a.max_abs = std::max(a.max_abs, err);
    a.worst_ratio = std::max(a.worst_ratio, err / allowed);
    if (!(err <= allowed)) ++a.violations;
  }
  return a;
}

inline OpContext default_context() {
  OpContext ctx;
  ctx.num_attention_heads = 32;
  ctx.num_key_value_heads = 8;
  ctx.head_dim = 128;
  return ctx;
}

}  // namespace ws1::test

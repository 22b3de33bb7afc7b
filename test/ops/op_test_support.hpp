// Shared by the op tests: the oracle files, the contract's rows, and running a reference or a
// candidate against them. Tolerances come from contracts/ws1-c1-v2.json only.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "test_paths.hpp"
#include "ws1/contract.hpp"
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

// The PyTorch float64 oracle file of `op` (../shared/oracle/pytorch-fp64/), if present.
inline std::optional<SafetensorsFile> oracle(std::string_view op) {
  const auto path = shared_dir() / "oracle" / "pytorch-fp64" / (std::string(op) + ".safetensors");
  if (!std::filesystem::exists(path)) return std::nullopt;
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

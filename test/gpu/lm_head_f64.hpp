// A float64 lm_head (forward logits, backward dhidden and dweight) on the host, from the
// definition in lib/ops/lm_head.cpp: logits = hidden @ weightᵀ, dhidden = dy @ weight (over V),
// dweight = dyᵀ @ hidden (over the rows). The truth both FP32 references are measured against
// (reference_test.cpp): at V = 151936 the order of an FP32 sum decides how far a gold is from it.
#pragma once

#include <vector>

#include "attention_f64.hpp"  // doubles()
#include "op_support.hpp"  // parallel_for (lib/ops, internal)
#include "ws1/op_inputs.hpp"

namespace ws1::test {

struct LmHeadF64 {
  std::vector<double> logits, dhidden, dweight;  // row-major [T, V], [T, H], [V, H]
};

inline LmHeadF64 lm_head_f64(const Tensors& in, bool backward) {
  const ops::LmHeadInputs x = ops::lm_head_inputs("lm_head", in, backward);
  const std::int64_t T = x.rows, H = x.width, V = x.vocab;
  const std::vector<double> h = doubles(x.hidden), w = doubles(x.weight);
  LmHeadF64 r;
  if (!backward) {
    r.logits.assign(static_cast<std::size_t>(T * V), 0.0);
    ops::parallel_for(V, 0, [&](std::int64_t v0, std::int64_t v1) {
      for (std::int64_t t = 0; t < T; ++t)
        for (std::int64_t v = v0; v < v1; ++v) {
          double s = 0;
          for (std::int64_t k = 0; k < H; ++k) s += h[t * H + k] * w[v * H + k];
          r.logits[static_cast<std::size_t>(t * V + v)] = s;
        }
    });
    return r;
  }
  const std::vector<double> dy = doubles(*x.dy);
  r.dhidden.assign(static_cast<std::size_t>(T * H), 0.0);
  r.dweight.assign(static_cast<std::size_t>(V * H), 0.0);
  ops::parallel_for(H, 0, [&](std::int64_t k0, std::int64_t k1) {  // columns of dhidden
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t v = 0; v < V; ++v) {
        const double g = dy[t * V + v];
        for (std::int64_t k = k0; k < k1; ++k) r.dhidden[static_cast<std::size_t>(t * H + k)] += g * w[v * H + k];
      }
  });
  ops::parallel_for(V, 0, [&](std::int64_t v0, std::int64_t v1) {  // rows of dweight
    for (std::int64_t v = v0; v < v1; ++v)
      for (std::int64_t t = 0; t < T; ++t) {
        const double g = dy[t * V + v];
        for (std::int64_t k = 0; k < H; ++k) r.dweight[static_cast<std::size_t>(v * H + k)] += g * h[t * H + k];
      }
  });
  return r;
}

}  // namespace ws1::test

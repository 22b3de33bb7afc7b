// A float64 attention (forward o, backward dq, dk, dv) on the host, from the definition in
// lib/ops/attention.cpp: key j visible to query i iff valid[b, j] and j <= i + (Skv - Sq);
// softmax over the visible keys; dS = P (dP - Dsum), Dsum_i = sum_j P_ij dP_ij. The truth the
// two FP32 references are measured against where they disagree (reference_test.cpp), and the
// distance helpers that test uses. Rows with
// no visible key are NaN, as the references give.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "ws1/numeric.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1::test {

struct AttentionF64 {
  std::vector<double> o, dq, dk, dv;  // row-major, shapes of q, q, k, v
};

inline std::vector<double> doubles(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> v(static_cast<std::size_t>(c.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = from_bf16(bf16{c.data<std::uint16_t>()[i]});
  return v;
}

inline AttentionF64 attention_f64(const Tensors& in, bool backward) {
  const ops::AttentionInputs x = ops::check_attention_inputs(in, backward);
  const ops::AttentionDims& n = x.n;
  const std::vector<double> q = doubles(*x.q), k = doubles(*x.k), v = doubles(*x.v);
  const std::vector<double> dy = backward ? doubles(*x.dy) : std::vector<double>{};
  const double scale = x.scale;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  AttentionF64 r;
  r.o.assign(q.size(), 0.0);
  r.dq.assign(backward ? q.size() : 0, 0.0);
  r.dk.assign(backward ? k.size() : 0, 0.0);
  r.dv.assign(backward ? v.size() : 0, 0.0);
  std::vector<double> p(static_cast<std::size_t>(n.skv)), dp(static_cast<std::size_t>(n.skv));
  for (std::int64_t b = 0; b < n.b; ++b)
    for (std::int64_t h = 0; h < n.hq; ++h) {
      const std::int64_t kvh = b * n.hkv + h / n.group();
      const double* kh = k.data() + kvh * n.skv * n.d;
      const double* vh = v.data() + kvh * n.skv * n.d;
      for (std::int64_t i = 0; i < n.sq; ++i) {
        const std::int64_t row = (b * n.hq + h) * n.sq + i;
        const double* qi = q.data() + row * n.d;
        const std::int64_t limit = std::min(n.skv, std::max<std::int64_t>(0, i + n.offset() + 1));
        double m = -INFINITY;
        for (std::int64_t j = 0; j < n.skv; ++j) {
          const bool seen = j < limit && x.valid[static_cast<std::size_t>(b * n.skv + j)] != 0;
          double s = -INFINITY;
          if (seen) {
            s = 0;
            for (std::int64_t e = 0; e < n.d; ++e) s += qi[e] * kh[j * n.d + e];
            s *= scale;
          }
          p[static_cast<std::size_t>(j)] = s;
          m = std::max(m, s);
        }
        if (m == -INFINITY) {  // no visible key
          for (std::int64_t e = 0; e < n.d; ++e) r.o[static_cast<std::size_t>(row * n.d + e)] = nan;
          if (backward) {
            for (std::int64_t e = 0; e < n.d; ++e) r.dq[static_cast<std::size_t>(row * n.d + e)] = nan;
            for (std::int64_t e = 0; e < n.skv * n.d; ++e) {
              r.dk[static_cast<std::size_t>(kvh * n.skv * n.d + e)] = nan;
              r.dv[static_cast<std::size_t>(kvh * n.skv * n.d + e)] = nan;
            }
          }
          continue;
        }
        double z = 0;
        for (double& pj : p) z += (pj = std::exp(pj - m));
        for (double& pj : p) pj /= z;
        for (std::int64_t j = 0; j < n.skv; ++j)
          for (std::int64_t e = 0; e < n.d; ++e)
            r.o[static_cast<std::size_t>(row * n.d + e)] += p[static_cast<std::size_t>(j)] * vh[j * n.d + e];
        if (!backward) continue;
        const double* dyi = dy.data() + row * n.d;
        double dsum = 0;
        for (std::int64_t j = 0; j < n.skv; ++j) {
          double s = 0;
          for (std::int64_t e = 0; e < n.d; ++e) s += dyi[e] * vh[j * n.d + e];
          dp[static_cast<std::size_t>(j)] = s;
          dsum += p[static_cast<std::size_t>(j)] * s;
        }
        for (std::int64_t j = 0; j < n.skv; ++j) {
          const double pj = p[static_cast<std::size_t>(j)];
          const double ds = pj * (dp[static_cast<std::size_t>(j)] - dsum);
          for (std::int64_t e = 0; e < n.d; ++e) {
            r.dq[static_cast<std::size_t>(row * n.d + e)] += scale * ds * kh[j * n.d + e];
            r.dk[static_cast<std::size_t>((kvh * n.skv + j) * n.d + e)] += scale * ds * qi[e];
            r.dv[static_cast<std::size_t>((kvh * n.skv + j) * n.d + e)] += pj * dyi[e];
          }
        }
      }
    }
  return r;
}

// The largest |x - truth| over the elements where the truth is finite (x float32).
inline double max_abs_error(const Tensor& x, const std::vector<double>& truth) {
  const Tensor c = x.contiguous();
  REQUIRE(static_cast<std::size_t>(c.numel()) == truth.size());
  REQUIRE(c.dtype() == DType::kF32);
  double worst = 0;
  for (std::size_t i = 0; i < truth.size(); ++i)
    if (std::isfinite(truth[i])) worst = std::max(worst, std::fabs(static_cast<double>(c.data<float>()[i]) - truth[i]));
  return worst;
}

// The largest |x - y| (float32 tensors of one shape); NaN against NaN and equal infinities count
// as no difference, a NaN or infinity against anything else as an infinite one.
inline double max_abs_difference(const Tensor& x, const Tensor& y) {
  const Tensor a = x.contiguous(), b = y.contiguous();
  REQUIRE(a.numel() == b.numel());
  REQUIRE(a.dtype() == DType::kF32);
  REQUIRE(b.dtype() == DType::kF32);
  double worst = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double u = a.data<float>()[i], v = b.data<float>()[i];
    if ((std::isnan(u) && std::isnan(v)) || u == v) continue;
    worst = std::max(worst, std::isfinite(u) && std::isfinite(v) ? std::fabs(u - v) : INFINITY);
  }
  return worst;
}

}  // namespace ws1::test

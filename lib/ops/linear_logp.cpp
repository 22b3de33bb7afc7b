// linear_logp's cpu_bf16 candidate (DESIGN §6, NOTES §c; optional 13th row): the selected
// log-softmax of hidden @ weight^T without materialising the [T, V] logits. The FP32
// reference is lib/ref/linear_logp.cpp.
//   inputs   hidden [..., H] bf16, weight [V, H] bf16 (lm_head layout), targets [...] int64
//            (every target in [0, V), else an error)
//   output   logp [...] float32 = logits[t, y] - logsumexp(logits[t]), logits = hidden @ W^T
//            in FP32; FLOAT32 (spec §2.1)
//   backward dy.logp [...] float32 -> dhidden [..., H] and dweight [V, H], bf16, from
//            G = dy * (onehot(y) - softmax(logits)) in FP32:
//            dhidden = G @ W (sum over V), dweight = G^T @ hidden (sum over the rows).
// Orders (every output bit is fixed by the inputs; none depends on the number of rows, the
// blocking or the thread count, except that dweight sums over the rows of the call by
// definition):
//   logits   each logit's sum over H: gemm_cpu's fp32_chunked() (32-wide FP32 fma chunks folded
//            left to right; lm_head's candidate before its rounding);
//   lse      the vocabulary in 1024-wide chunks from index 0, per chunk max and in-order sum of
//            exp(x - max), merged left to right (ws1/op_orders.hpp) — the logits of a chunk are
//            computed, reduced and dropped; this is logp's candidate applied to the FP32 logits;
//   dweight  per vocabulary row, the sum over the rows (fp32_chunked());
//   dhidden  per 1024-wide vocabulary chunk an fp32_chunked sum over the chunk, the chunk
//            partials added left to right in FP32 from 0.0f.
// The candidate's backward recomputes each chunk's logits (one pass for the row lse, one for
// the gradients): it holds O(T * chunk) logits at a time, never [T, V].
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "gemm_cpu.hpp"
#include "logsumexp.hpp"
#include "op_support.hpp"
#include "registry.hpp"

namespace ws1::ops {

LinearLogpInputs check_linear_logp_inputs(std::string_view op, const Tensors& in, bool backward) {
  const Tensor& ht = input(in, op, "hidden", DType::kBF16);
  LinearLogpInputs p;
  p.weight = &input(in, op, "weight", DType::kBF16, 2);
  const Tensor& wt = *p.weight;
  const Tensor& tt = input(in, op, "targets", DType::kI64);
  require(ht.dim() >= 1, op, "hidden", "needs at least one dimension");
  p.width = ht.shape().back();
  require(wt.shape()[1] == p.width, op, "weight",
          fmt::format("shape {} does not fit hidden {} (needs [V, {}])", shape_string(wt.shape()),
                      shape_string(ht.shape()), p.width));
  p.vocab = wt.shape()[0];
  require(p.vocab >= 1, op, "weight", "the vocabulary dimension is empty");
  p.lead.assign(ht.shape().begin(), ht.shape().end() - 1);
  require(tt.shape() == p.lead, op, "targets",
          fmt::format("shape {} does not match hidden {} without its last dimension",
                      shape_string(tt.shape()), shape_string(ht.shape())));
  p.targets = to_i64(tt);
  p.rows = static_cast<std::int64_t>(p.targets.size());
  for (std::size_t i = 0; i < p.targets.size(); ++i)
    require(p.targets[i] >= 0 && p.targets[i] < p.vocab, op, "targets",
            fmt::format("target {} at element {} is outside [0, {})", p.targets[i], i, p.vocab));
  p.hidden = (ht.is_contiguous() ? ht : ht.contiguous()).view({p.rows, p.width});
  if (backward) {
    p.dy = &input(in, op, "dy.logp", DType::kF32);
    require(p.dy->shape() == p.lead, op, "dy.logp",
            fmt::format("shape {} differs from targets {}", shape_string(p.dy->shape()), shape_string(p.lead)));
  }
  return p;
}

namespace {

// lse chunks per logits GEMM call: a blocking choice only (fewer, larger GEMM calls).
constexpr std::int64_t kChunksPerCall = 8;
constexpr std::int64_t kSpan = kLseChunk * kChunksPerCall;

using Problem = LinearLogpInputs;

gemm::Options options(const OpContext& ctx) { return {ctx.threads, true}; }

// FP32 logits of vocabulary rows [v0, v0 + n) for every row, into out [rows, n].
void logits_block(const Problem& p, const Tensor& weight, std::int64_t v0, std::int64_t n,
                  float* out, const gemm::Reduction& order, const OpContext& ctx) {
  const gemm::ConstMatrix wt = gemm::transposed(gemm::matrix(weight));  // [H, V]
  gemm::gemm(gemm::matrix(p.hidden), gemm::block(wt, 0, p.width, v0, n),
             gemm::Matrix{out, DType::kF32, p.rows, n, n}, order, options(ctx));
}

// The candidate's row lse (and target logits), chunk by chunk.
struct RowStats {
  std::vector<float> lse, target_logit;
};

RowStats candidate_stats(const Problem& p, const Tensor& weight, const OpContext& ctx) {
  std::vector<LseState> state(static_cast<std::size_t>(p.rows));
  RowStats s;
  s.target_logit.assign(state.size(), 0.0f);
  std::vector<float> logits(static_cast<std::size_t>(p.rows * std::min(kSpan, p.vocab)));
  for (std::int64_t v0 = 0; v0 < p.vocab; v0 += kSpan) {
    const std::int64_t n = std::min(kSpan, p.vocab - v0);
    logits_block(p, weight, v0, n, logits.data(), gemm::fp32_chunked(), ctx);
    parallel_for(p.rows, ctx.threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t r = b; r < e; ++r) {
        const auto ri = static_cast<std::size_t>(r);
        const float* row = logits.data() + r * n;
        for (std::int64_t c = 0; c < n; c += kLseChunk)
          lse_merge(state[ri], lse_chunk(row + c, std::min(kLseChunk, n - c)));
        const std::int64_t y = p.targets[ri];
        if (y >= v0 && y < v0 + n) s.target_logit[ri] = row[y - v0];
      }
    });
  }
  s.lse.resize(state.size());
  for (std::size_t r = 0; r < state.size(); ++r) s.lse[r] = lse_value(state[r]);
  return s;
}

// G = dy * (onehot(y) - exp(logit - lse)) in place over logits [rows, n] of vocabulary [v0, v0+n).
void to_gradient(const Problem& p, const std::vector<float>& dy, const std::vector<float>& lse,
                 std::int64_t v0, std::int64_t n, float* logits, const OpContext& ctx) {
  parallel_for(p.rows, ctx.threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t r = b; r < e; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      const std::int64_t y = p.targets[ri] - v0;
      float* row = logits + r * n;
      for (std::int64_t j = 0; j < n; ++j)
        row[j] = dy[ri] * ((j == y ? 1.0f : 0.0f) - std::exp(row[j] - lse[ri]));
    }
  });
}

Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const Problem p = check_linear_logp_inputs(op, in, false);
    const Tensor& weight = *p.weight;
    std::vector<float> out(static_cast<std::size_t>(p.rows));
    if (p.rows == 0) {
      // nothing to compute
    } else {
      const RowStats s = candidate_stats(p, weight, ctx);
      for (std::size_t r = 0; r < out.size(); ++r) out[r] = s.target_logit[r] - s.lse[r];
    }
    return Tensors{{"logp", f32_tensor(p.lead, std::move(out))}};
  });
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const Problem p = check_linear_logp_inputs(op, in, true);
    const Tensor& weight = *p.weight;
    const std::vector<float> dy = to_f32(*p.dy);
    Shape dh_shape = p.lead;
    dh_shape.push_back(p.width);
    const gemm::ConstMatrix hm = gemm::matrix(p.hidden), wm = gemm::matrix(weight);
    if (p.rows == 0)
      return Tensors{{"dhidden", Tensor(DType::kBF16, dh_shape)}, {"dweight", Tensor(DType::kBF16, weight.shape())}};

    const RowStats s = candidate_stats(p, weight, ctx);
    Tensor dw(DType::kBF16, weight.shape());
    std::vector<float> dh(static_cast<std::size_t>(p.rows * p.width), 0.0f);
    std::vector<float> part(dh.size());
    std::vector<float> g(static_cast<std::size_t>(p.rows * std::min(kSpan, p.vocab)));
    for (std::int64_t v0 = 0; v0 < p.vocab; v0 += kSpan) {
      const std::int64_t n = std::min(kSpan, p.vocab - v0);
      logits_block(p, weight, v0, n, g.data(), gemm::fp32_chunked(), ctx);
      to_gradient(p, dy, s.lse, v0, n, g.data(), ctx);
      const gemm::ConstMatrix gm = gemm::matrix(g.data(), p.rows, n);
      // dweight rows [v0, v0+n): sums over the rows, rounded once to bf16.
      gemm::gemm(gemm::transposed(gm), hm,
                 gemm::Matrix{dw.data<std::uint16_t>() + v0 * p.width, DType::kBF16, n, p.width, p.width},
                 gemm::fp32_chunked(), options(ctx));
      // dhidden: one partial per 1024-wide chunk, added left to right.
      for (std::int64_t c = 0; c < n; c += kLseChunk) {
        const std::int64_t cn = std::min(kLseChunk, n - c);
        gemm::gemm(gemm::block(gm, 0, p.rows, c, cn), gemm::block(wm, v0 + c, cn, 0, p.width),
                   gemm::Matrix{part.data(), DType::kF32, p.rows, p.width, p.width},
                   gemm::fp32_chunked(), options(ctx));
        for (std::size_t i = 0; i < dh.size(); ++i) dh[i] += part[i];
      }
    }
    return Tensors{{"dhidden", bf16_tensor(dh_shape, dh)}, {"dweight", std::move(dw)}};
  });
}

class LinearLogp final : public Op {
 public:
  LinearLogp() : Op(*find_op("linear_logp")) {}
  std::vector<TensorDecl> outputs() const override { return {{"logp", DType::kF32}}; }
  // The two gradient products, as lm_head's; the algorithm also recomputes the logits (they are
  // never stored) and multiplies G in two bf16 parts (hi + lo) into dhidden and dweight (D30).
  OpWork work(const Tensors& in, bool backward) const override {
    OpWork w = projection_work(in, backward);
    if (backward && w.gemms.size() == 2) {
      const GemmShape dhidden = w.gemms[0], dweight = w.gemms[1];
      w.algorithm_gemms = {{dhidden.m, dweight.m, dhidden.n}, dhidden, dhidden, dweight, dweight};
    }
    return w;
  }
  std::vector<TensorDecl> gradients() const override {
    return {{"dhidden", DType::kBF16}, {"dweight", DType::kBF16}};
  }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return forward(name(), in, ctx);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return backward(name(), in, ctx);
  }
};

}  // namespace

const Op& linear_logp_op() {
  static const LinearLogp op;
  return op;
}

}  // namespace ws1::ops

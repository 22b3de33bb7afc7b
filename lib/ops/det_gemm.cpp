// det_gemm (DESIGN §3.1 Option A, §6; spec §9.2, §9.3, §11.1 items 1-2; NOTES §c):
//   c[M,N] = a[M,K] @ b[K,N]; inputs a, b bf16; gradient seed dy.c [M,N] bf16. The FP32
// reference (spec §3.1, §11.1 item 2) is lib/ref/det_gemm.cpp.
//
// Candidate (cpu_bf16), Option A: FP32 throughout, one rounding to bf16 at the output, with the
// contract's declared K split (ctx.k_shards = t, ws1check_declarations.det_gemm_k_split):
//   shard r = [r*K/t, (r+1)*K/t); p_r = one FP32 fma chain over the shard in increasing k,
//   from 0.0f; c = bf16(((p_0 + p_1) + p_2) + ...), the adds in FP32.
// A tensor-parallel rank's call (ctx.k_partial) returns its p (one chain over the K it holds,
// float32, unrounded), so t ranks' partials added in rank order and rounded once give the TP=1
// bits exactly (the tp transforms). Rows never interact: row i of c does not depend on M.
// Backward: da (over N) and db (over M) are single FP32 fma chains rounded once; no split (a
// row-parallel GEMM's backward reduces nothing across ranks). db is a sum over the call's rows,
// so it depends on M by definition; da's rows are independent.

#include <algorithm>
#include <string>
#include <vector>

#include "gemm_cpu.hpp"
#include "op_support.hpp"
#include "ws1/numeric.hpp"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

namespace ws1::ops {

DetGemmInputs det_gemm_inputs(std::string_view op, const Tensors& in, bool with_dy) {
  const Tensor& a = input(in, op, "a", DType::kBF16, 2);
  const Tensor& b = input(in, op, "b", DType::kBF16, 2);
  require(b.shape()[0] == a.shape()[1], op, "b",
          "shape " + shape_string(b.shape()) + " does not fit a " + shape_string(a.shape()) +
              " (needs [K, N] with K = " + std::to_string(a.shape()[1]) + ")");
  if (!with_dy) return {a, b};
  const Tensor& dy = input(in, op, "dy.c", DType::kBF16, 2);
  const Shape want = {a.shape()[0], b.shape()[1]};
  require(dy.shape() == want, op, "dy.c",
          "shape " + shape_string(dy.shape()) + " (expected c's shape " + shape_string(want) + ")");
  return {a, b, &dy};
}

std::int64_t det_gemm_shards(std::string_view op, const OpContext& ctx) {
  require(ctx.k_shards >= 1, op, "k_shards",
          "must be >= 1 (contract: ws1check_declarations.det_gemm_k_split.shards), got " +
              std::to_string(ctx.k_shards));
  return ctx.k_partial ? 1 : ctx.k_shards;
}

namespace {

// One FP32 fma chain over the whole reduction, from 0.0f (a single leaf of the fold).
gemm::Reduction chain(std::int64_t length) {
  return {gemm::Reduction::Kind::kFold, std::max<std::int64_t>(length, 1), false, false};
}

gemm::Options options(const OpContext& ctx) { return {ctx.threads, true}; }

Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const DetGemmInputs x = det_gemm_inputs(op, in, false);
    const gemm::ConstMatrix a = gemm::matrix(x.a), b = gemm::matrix(x.b);
    const std::int64_t t = det_gemm_shards(op, ctx);
    const std::int64_t M = a.rows, K = a.cols, N = b.cols;
    std::vector<float> total(static_cast<std::size_t>(M * N), 0.0f);
    for (std::int64_t r = 0; r < t; ++r) {
      const std::int64_t lo = r * K / t, hi = (r + 1) * K / t;
      const Tensor p = gemm::gemm(gemm::block(a, 0, M, lo, hi - lo), gemm::block(b, lo, hi - lo, 0, N),
                                  DType::kF32, chain(hi - lo), options(ctx));
      const float* pv = p.data<float>();
      for (std::size_t i = 0; i < total.size(); ++i) total[i] = r == 0 ? pv[i] : total[i] + pv[i];
    }
    Tensor c(ctx.k_partial ? DType::kF32 : DType::kBF16, {M, N});
    if (ctx.k_partial)
      std::copy(total.begin(), total.end(), c.data<float>());
    else
      to_bf16(total, {c.data<bf16>(), total.size()});
    return Tensors{{"c", std::move(c)}};
  });
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return guarded(op, [&] {
    const DetGemmInputs x = det_gemm_inputs(op, in, true);
    const gemm::ConstMatrix a = gemm::matrix(x.a), b = gemm::matrix(x.b), g = gemm::matrix(*x.dy);
    Tensor da = gemm::gemm(g, gemm::transposed(b), DType::kBF16, chain(b.cols), options(ctx));  // over N
    Tensor db = gemm::gemm(gemm::transposed(a), g, DType::kBF16, chain(a.rows), options(ctx));  // over M
    return Tensors{{"da", std::move(da)}, {"db", std::move(db)}};
  });
}

class DetGemm final : public Op {
 public:
  DetGemm() : Op(*find_op("det_gemm")) {}
  std::vector<TensorDecl> outputs() const override { return {{"c", DType::kBF16}}; }
  std::vector<TensorDecl> gradients() const override {
    return {{"da", DType::kBF16}, {"db", DType::kBF16}};
  }
  // The declared K split: a rank's FP32 partial of its contiguous shard (ctx.k_partial), the
  // partials added in rank order and rounded once, is the TP=1 result bit for bit.
  std::optional<KSplit> k_split() const override { return KSplit{"a", "b", "c"}; }
  OpWork work(const Tensors& in, bool backward) const override {
    const Tensor* a = find_tensor(in, "a");
    const Tensor* b = find_tensor(in, "b");
    if (a == nullptr || b == nullptr || a->dim() != 2 || b->dim() != 2) return {};
    const std::int64_t m = a->shape()[0], k = a->shape()[1], n = b->shape()[1];
    if (!backward) return {{{m, n, k}}, 0.0};
    return {{{m, k, n}, {k, n, m}}, 0.0};  // da = dy · bᵀ, db = aᵀ · dy
  }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return forward(name(), in, ctx);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return backward(name(), in, ctx);
  }
};

}  // namespace

const Op& det_gemm_op() {
  static const DetGemm op;
  return op;
}

}  // namespace ws1::ops

// det_gemm, eager bf16 (lib/ref/det_gemm.cpp: c = a @ b, no bias, so there is no addmm to fuse):
//   forward:  c = torch.matmul(a, b)          bf(FP32 sum over K), one rounding per output
//   backward: da = bf(dy.c @ b^T), db = bf(a^T @ dy.c)   (mm's autograd node, each one rounding)
// Like the reference, it reads neither ctx.k_shards nor ctx.k_partial: eager matmul has no
// declared K split, and c is always bf16.
#include "../ref/gemm_inputs.hpp"
#include "support.hpp"

namespace ws1::naive {

Tensors det_gemm_forward(const Call& call) {
  const ref::DetGemmInputs x = ref::read_det_gemm_inputs(call, false);
  std::vector<float> c(static_cast<std::size_t>(x.m * x.n));
  matmul_bf16(x.a.data(), x.b.data(), c.data(), x.m, x.k, x.n, false, call.ctx().threads);
  return {{"c", bf16_tensor({x.m, x.n}, c)}};
}

Tensors det_gemm_backward(const Call& call) {
  const ref::DetGemmInputs x = ref::read_det_gemm_inputs(call, true);
  const std::vector<float>& g = x.dy;
  const unsigned threads = call.ctx().threads;
  // da [M, K] = bf(g [M, N] @ b^T): b [K, N] is the [n, k] layout of b^T.
  std::vector<float> da(static_cast<std::size_t>(x.m * x.k));
  matmul_bf16(g.data(), x.b.data(), da.data(), x.m, x.n, x.k, true, threads);
  // db [K, N] = bf(a^T [K, M] @ g [M, N]).
  const std::vector<float> at = ref::transposed(x.a, x.m, x.k);
  std::vector<float> db(static_cast<std::size_t>(x.k * x.n));
  matmul_bf16(at.data(), g.data(), db.data(), x.k, x.m, x.n, false, threads);
  return {{"da", bf16_tensor({x.m, x.k}, da)}, {"db", bf16_tensor({x.k, x.n}, db)}};
}

}  // namespace ws1::naive

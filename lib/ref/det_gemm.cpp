// det_gemm's FP32 reference: c[M, N] = a[M, K] @ b[K, N] of the bf16 inputs widened to FP32,
// FP32 out. Backward (dy.c [M, N] bf16): da = dy @ b^T (sum over N), db = a^T @ dy (sum over M).
// The contract's K split (ctx.k_shards) and a tensor-parallel rank's partial (ctx.k_partial)
// describe the candidate's order only: the reference is the plain product of the a and b it is
// given (on a rank's call, that rank's slices, i.e. its FP32 partial), so it reads neither.
#include "gemm_inputs.hpp"

namespace ws1::ref {

Tensors det_gemm_forward(const Call& call) {
  const DetGemmInputs x = read_det_gemm_inputs(call, false);
  std::vector<float> c(static_cast<std::size_t>(x.m * x.n));
  matmul(x.a.data(), x.b.data(), c.data(), x.m, x.k, x.n, false, call.ctx().threads);
  return {{"c", f32_tensor({x.m, x.n}, std::move(c))}};
}

Tensors det_gemm_backward(const Call& call) {
  const DetGemmInputs x = read_det_gemm_inputs(call, true);
  const std::vector<float>& g = x.dy;
  const unsigned threads = call.ctx().threads;
  // da[M, K] = g[M, N] @ b^T: b [K, N] is already the [n, k] layout matmul takes.
  std::vector<float> da(static_cast<std::size_t>(x.m * x.k));
  matmul(g.data(), x.b.data(), da.data(), x.m, x.n, x.k, true, threads);
  // db[K, N] = a^T[K, M] @ g[M, N].
  const std::vector<float> at = transposed(x.a, x.m, x.k);
  std::vector<float> db(static_cast<std::size_t>(x.k * x.n));
  matmul(at.data(), g.data(), db.data(), x.k, x.m, x.n, false, threads);
  return {{"da", f32_tensor({x.m, x.k}, std::move(da))}, {"db", f32_tensor({x.k, x.n}, std::move(db))}};
}

}  // namespace ws1::ref

// det_gemm's FP32 reference: c[M, N] = a[M, K] @ b[K, N] of the bf16 inputs widened to FP32,
// FP32 out. Backward (dy.c [M, N] bf16): da = dy @ b^T (sum over N), db = a^T @ dy (sum over M).
// The contract's K split (ctx.k_shards) and a tensor-parallel rank's partial (ctx.k_partial)
// describe the candidate's order only: the reference is the plain product of the a and b it is
// given (on a rank's call, that rank's slices, i.e. its FP32 partial), so it reads neither.
#include "support.hpp"

namespace ws1::ref {

namespace {

struct Operands {
  std::int64_t m, k, n;
  std::vector<float> a, b;
};

Operands read_operands(const Call& call) {
  const Tensor& a = call.tensor("a", DType::kBF16, 2);
  const Tensor& b = call.tensor("b", DType::kBF16, 2);
  call.expect(b.shape()[0] == a.shape()[1], "b",
              "shape " + shape_text(b.shape()) + " cannot multiply a " + shape_text(a.shape()) +
                  ": its rows must equal a's " + std::to_string(a.shape()[1]) + " columns");
  return {a.shape()[0], a.shape()[1], b.shape()[1], call.floats("a", DType::kBF16, 2),
          call.floats("b", DType::kBF16, 2)};
}

}  // namespace

Tensors det_gemm_forward(const Call& call) {
  const Operands x = read_operands(call);
  std::vector<float> c(static_cast<std::size_t>(x.m * x.n));
  matmul(x.a.data(), x.b.data(), c.data(), x.m, x.k, x.n, false, call.ctx().threads);
  return {{"c", f32_tensor({x.m, x.n}, std::move(c))}};
}

Tensors det_gemm_backward(const Call& call) {
  const Operands x = read_operands(call);
  const Tensor& dy = call.tensor("dy.c", DType::kBF16, 2);
  call.expect(dy.shape() == Shape{x.m, x.n}, "dy.c",
              "shape " + shape_text(dy.shape()) + " should be c's " + shape_text({x.m, x.n}));
  const std::vector<float> g = call.floats("dy.c", DType::kBF16, 2);
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

// det_gemm (DESIGN §3.1 Option B, §6; spec §9.2, §9.3, §11.1 items 1-2; NOTES §c):
//   c[M,N] = a[M,K] @ b[K,N]; inputs a, b bf16; gradient seed dy.c [M,N] bf16.
//
// Reference (spec §3.1, §11.1 item 2): FP32 GEMM of the upcast inputs, FP32 output (never the
// bf16 tree: the gold is FP32). Order: 32-wide fma chunks folded in FP32 (gemm_cpu.hpp).
// Backward: da = dy @ b^T, db = a^T @ dy, the same FP32 GEMM, FP32 outputs.
//
// Candidate (cpu_bf16) = the declared tree, exactly as the contract's accumulation exception
// states it (ctx.k_tree_leaf, 32 in ws1-c1-v2): the reduction range [lo,hi) is a leaf when
// hi - lo <= k_tree_leaf, otherwise it splits at mid = lo + (hi - lo) / 2 (element space, the
// kernel k_tree_naive quoted in spec §9.2, not upstream's later leaf-space reference); a leaf
// is an FP32 fma chain from 0.0f in k order rounded to bf16; a merge is
// bf16(float(left) + float(right)); the output is the bf16 root.
// Because the split depends only on hi - lo, the subtree over [K/2, K) is the tree of a K - K/2
// GEMM: a contiguous half-K GEMM is a child of the root, so for K > k_tree_leaf
//   C(a, b) == bf16(float(C(a[:, :K/2], b[:K/2])) + float(C(a[:, K/2:], b[K/2:])))  bitwise
// (the tp2 invariance transform). Rows never interact: row i of c does not depend on M.
// Backward "with the same tree" (DESIGN §6): da = dy @ b^T reduces over N and db = a^T @ dy
// reduces over M, each with the same declared tree shape (leaf k_tree_leaf, bf16 leaves and
// merges) over its own reduction dimension, bf16 outputs. db's tree is over the rows in the
// call, so db depends on M by definition (a sum over rows); da's rows are independent.
#include "det_gemm.hpp"

#include <string>

#include "gemm_cpu.hpp"
#include "op_support.hpp"

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

std::int64_t det_gemm_tree_leaf(std::string_view op, const OpContext& ctx) {
  require(ctx.k_tree_leaf >= 1, op, "k_tree_leaf",
          "must be >= 1 (contract: ws1check_declarations.accumulation_exceptions.det_gemm.k_tree_leaf), got " +
              std::to_string(ctx.k_tree_leaf));
  return ctx.k_tree_leaf;
}

namespace {

enum class Path { kReference, kCandidate };

gemm::Reduction reduction_for(Path path, std::string_view op, const OpContext& ctx) {
  if (path == Path::kReference) return gemm::fp32_chunked();
  return gemm::bf16_tree(det_gemm_tree_leaf(op, ctx));
}

DType out_dtype(Path path) { return path == Path::kReference ? DType::kF32 : DType::kBF16; }

gemm::Options options(const OpContext& ctx) { return {ctx.threads, true}; }

Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx, Path path) {
  return guarded(op, [&] {
    const DetGemmInputs x = det_gemm_inputs(op, in, false);
    const gemm::Reduction red = reduction_for(path, op, ctx);
    return Tensors{{"c", gemm::gemm(gemm::matrix(x.a), gemm::matrix(x.b), out_dtype(path), red, options(ctx))}};
  });
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx, Path path) {
  return guarded(op, [&] {
    const DetGemmInputs x = det_gemm_inputs(op, in, true);
    const gemm::Reduction red = reduction_for(path, op, ctx);
    const gemm::ConstMatrix a = gemm::matrix(x.a), b = gemm::matrix(x.b), g = gemm::matrix(*x.dy);
    Tensor da = gemm::gemm(g, gemm::transposed(b), out_dtype(path), red, options(ctx));  // over N
    Tensor db = gemm::gemm(gemm::transposed(a), g, out_dtype(path), red, options(ctx));  // over M
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
  // Option B's mid split puts K/2 at the top of the tree, so two ranks of half K each give
  // the tree's two halves and the bf16 all-reduce is its last merge (TP=2 == TP=1 bitwise).
  std::optional<KSplit> k_split() const override { return KSplit{"a", "b", "c"}; }
  OpWork work(const Tensors& in, bool backward) const override {
    const Tensor* a = find_tensor(in, "a");
    const Tensor* b = find_tensor(in, "b");
    if (a == nullptr || b == nullptr || a->dim() != 2 || b->dim() != 2) return {};
    const std::int64_t m = a->shape()[0], k = a->shape()[1], n = b->shape()[1];
    if (!backward) return {{{m, n, k}}, 0.0};
    return {{{m, k, n}, {k, n, m}}, 0.0};  // da = dy · bᵀ, db = aᵀ · dy
  }
  Result<Tensors> reference_forward(const Tensors& in, const OpContext& ctx) const override {
    return forward(name(), in, ctx, Path::kReference);
  }
  Result<Tensors> reference_backward(const Tensors& in, const OpContext& ctx) const override {
    return backward(name(), in, ctx, Path::kReference);
  }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return forward(name(), in, ctx, Path::kCandidate);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return backward(name(), in, ctx, Path::kCandidate);
  }
};

}  // namespace

const Op& det_gemm_op() {
  static const DetGemm op;
  return op;
}

}  // namespace ws1::ops

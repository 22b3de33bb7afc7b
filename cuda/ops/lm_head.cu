// lm_head on cuda_bf16: logits[T,V] = hidden[T,H] · weight[V,H]ᵀ (bf16 out); backward
// dhidden[T,H] = dy[T,V] · weight (sum over V) and dweight[V,H] = dyᵀ · hidden (sum over T),
// bf16 out. Same contract as the cpu_bf16 candidate (lib/ops/lm_head.cpp): hidden [..., H]
// whose leading dims are the rows, outputs in the same shapes, the same input checks
// (lm_head_inputs).
//
// Kernels: det_gemm's products (det_gemm_wgmma.cuh): on Hopper the persistent wgmma/TMA
// kernel; where TMA cannot take the operands (a row stride not a multiple of 8 elements) the
// CUDA-core kernel, by the same rules. K order, every output element: FP32 from zero over k in
// 16-wide steps in increasing k (the tensor core sums each step's products in its own order;
// the CUDA-core kernel is a plain fma chain); a K above kLongK (promote_long_k) in shards of kPromoteK k, each
// from zero, the shard sums added in FP32 (round to nearest) in increasing k; rounded once to
// bf16 at the store. The one CTA that owns a tile reduces its whole K (no split-K across CTAs,
// no atomics). The kernel is chosen by the operands' layout and alignment, never by T: a row
// of logits / dhidden depends on that row's hidden / dy only (batch-invariant); dweight sums
// over the rows of the call in increasing row order (deterministic; it depends on the rows by
// definition; shards above kLongK rows).
// Not bit-equal to cpu_bf16 (32-wide fma chunks folded in FP32). Both are FP32 accumulations
// judged against the reference.
#include <climits>
#include <string>

#include "det_gemm_wgmma.cuh"
#include "registry.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/launch_region.cuh"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

constexpr std::string_view kOp = "lm_head";
using detgemm::Major;

// C[M,N] (bf16, row stride N) = A · B over K (det_gemm_wgmma.cuh).
void lm_gemm(const bf16* a, std::int64_t lda, Major la, const bf16* b, std::int64_t ldb, Major lb, int M, int N, int K,
             bf16* c) {
  if (M == 0 || N == 0) return;
  detgemm::Problem q = detgemm::product(a, lda, la, b, ldb, lb, M, N, K, 0, K, 1, c, N, false);
  detgemm::promote_long_k(q);  // K above kLongK: shards of kPromoteK folded in FP32
  DeviceArray<float> scratch(detgemm::scratch_floats(q));  // the n256 tiles' running shard total
  q.scratch = scratch.get();
  if (const detgemm::Status s = detgemm::launch_product(q); !s) check(s.error, s.what);
}

// The kernels index with 32-bit rows, columns and k.
void require_int_extents(const ws1::ops::LmHeadInputs& x) {
  auto fits = [](std::int64_t v) { return v <= INT_MAX; };
  ws1::ops::require(fits(x.rows) && fits(x.width), kOp, "hidden",
                    "shape " + ws1::shape_string(x.hidden.shape()) + " exceeds the kernels' 32-bit extents");
  ws1::ops::require(fits(x.vocab), kOp, "weight",
                    "shape " + ws1::shape_string(x.weight.shape()) + " exceeds the kernels' 32-bit extents");
}

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::LmHeadInputs x = ws1::ops::lm_head_inputs(kOp, in, false);
    require_int_extents(x);
    const int T = static_cast<int>(x.rows), H = static_cast<int>(x.width), V = static_cast<int>(x.vocab);
    const DeviceArray<bf16> hidden = upload_bf16(x.hidden), weight = upload_bf16(x.weight);
    DeviceArray<bf16> logits = poisoned<bf16>(static_cast<std::size_t>(x.rows * x.vocab));
    launch_region("lm_head.fwd", [&] {
      // logits[t, v] = sum over h of hidden[t, h] * weight[v, h]: A = hidden [T][H], B(h, v) = weight[v][h].
      lm_gemm(hidden.get(), H, Major::kK, weight.get(), H, Major::kK, T, V, H, logits.get());
    });
    return ws1::Tensors{{"logits", download_bf16(logits, x.logits_shape)}};
  });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::LmHeadInputs x = ws1::ops::lm_head_inputs(kOp, in, true);
    require_int_extents(x);
    const int T = static_cast<int>(x.rows), H = static_cast<int>(x.width), V = static_cast<int>(x.vocab);
    const DeviceArray<bf16> hidden = upload_bf16(x.hidden), weight = upload_bf16(x.weight), dy = upload_bf16(*x.dy);
    DeviceArray<bf16> dhidden = poisoned<bf16>(static_cast<std::size_t>(x.rows * x.width));
    DeviceArray<bf16> dweight = poisoned<bf16>(static_cast<std::size_t>(x.vocab * x.width));
    launch_region("lm_head.bwd", [&] {
      // dhidden[t, h] = sum over v of dy[t, v] * weight[v, h]: A = dy [T][V], B = weight [V][H].
      lm_gemm(dy.get(), V, Major::kK, weight.get(), H, Major::kMN, T, H, V, dhidden.get());
      // dweight[v, h] = sum over t of dy[t, v] * hidden[t, h]: A = dyᵀ (dy is [T][V]), B = hidden [T][H].
      lm_gemm(dy.get(), V, Major::kMN, hidden.get(), H, Major::kMN, V, H, T, dweight.get());
    });
    return ws1::Tensors{{"dhidden", download_bf16(dhidden, x.hidden.shape())},
                        {"dweight", download_bf16(dweight, x.weight.shape())}};
  });
}

}  // namespace

const CudaOp& lm_head_cuda() {
  static const CudaOp op{kOp, forward, backward,
                         "cuda_bf16.lm_head.wgmma_tma.v1:wgmma_gemm_kernel_nt[128x256x64s4,st16],fallback_gemm_kernel_fp32",
                         "cuda_bf16.lm_head.wgmma_tma.v1:wgmma_gemm_kernel_nn[128x128x64s6,st16],"
                         "wgmma_gemm_kernel_tn[128x256x64s4,st16],fallback_gemm_kernel_fp32"};
  return op;
}

}  // namespace ws1cuda

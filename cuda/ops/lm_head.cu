// lm_head on cuda_bf16: logits[T,V] = hidden[T,H] · weight[V,H]ᵀ (bf16 out); backward
// dhidden[T,H] = dy[T,V] · weight (sum over V) and dweight[V,H] = dyᵀ · hidden (sum over T),
// bf16 out. Same contract as the cpu_bf16 candidate (lib/ops/lm_head.cpp): hidden [..., H]
// whose leading dims are the rows, outputs in the same shapes, the same input checks
// (lm_head_inputs).
//
// Kernels: the tile GEMM of gemm_tiles.cuh (mma_gemm_kernel: bf16 tensor-core mma.sync,
// FP32 accumulators, 128 x 128 tiles of 256 threads, K in 32-wide slices through a 4-stage
// cp.async pipeline), once per product: NT for the logits, NN for dhidden, TN for dweight.
// K order, every output element: k in 16-wide mma steps in increasing k, each step added to one
// FP32 accumulator; the one block that owns a tile reduces its whole K (no split-K, no atomics),
// rounded once to bf16 at the store. A row of logits / dhidden depends on that row's hidden /
// dy only (batch-invariant); dweight sums over the rows of the call in increasing row order in
// 16-row mma steps (deterministic; it depends on the rows by definition).
// Not bit-equal to cpu_bf16 (32-wide fma chunks folded in FP32): the tensor core sums each
// 16-product step in its own order. Both are FP32 accumulations judged against the reference.
#include <climits>
#include <string>

#include "gemm_tiles.cuh"
#include "lm_head.hpp"
#include "op_support.hpp"
#include "registry.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/launch_region.cuh"

namespace ws1cuda {
namespace {

constexpr std::string_view kOp = "lm_head";
using gemm::Major;

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
      gemm::launch_mma_gemm<Major::kK, Major::kK>(gemm::make_operand(hidden.get(), H),
                                                  gemm::make_operand(weight.get(), H), T, V, H,
                                                  gemm::StoreBf16{logits.get(), T, V}, "mma_gemm_bf16_nt");
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
      gemm::launch_mma_gemm<Major::kK, Major::kMN>(gemm::make_operand(dy.get(), V),
                                                   gemm::make_operand(weight.get(), H), T, H, V,
                                                   gemm::StoreBf16{dhidden.get(), T, H}, "mma_gemm_bf16_nn");
      // dweight[v, h] = sum over t of dy[t, v] * hidden[t, h]: A = dyᵀ (dy is [T][V]), B = hidden [T][H].
      gemm::launch_mma_gemm<Major::kMN, Major::kMN>(gemm::make_operand(dy.get(), V),
                                                    gemm::make_operand(hidden.get(), H), V, H, T,
                                                    gemm::StoreBf16{dweight.get(), V, H}, "mma_gemm_bf16_tn");
    });
    return ws1::Tensors{{"dhidden", download_bf16(dhidden, x.hidden.shape())},
                        {"dweight", download_bf16(dweight, x.weight.shape())}};
  });
}

}  // namespace

const CudaOp& lm_head_cuda() {
  static const CudaOp op{kOp, forward, backward, "mma_gemm_bf16_nt", "mma_gemm_bf16_nn,mma_gemm_bf16_tn"};
  return op;
}

}  // namespace ws1cuda

// silu on cuda_bf16 (lib/ops/silu.cpp states the definition): y = x * sigmoid(x), elementwise.
//
// Forward and backward are each one map_kernel (elementwise.cuh): grid-stride over 16-byte
// vectors of 8 bf16 per thread, the n % 8 tail one element per thread. Per element, in FP32,
// with the CPU candidate's operations in its order, each rounded separately (no contraction):
//   forward   s = 1 / (1 + expf(-x));  y  = x * s
//   backward  dx = dy * (s * (1 + x * (1 - s)))
// and one bf16 rounding (nearest even) of the result. No reduction, so nothing depends on the
// grid. Bit-equal to cpu_bf16 except where CUDA's expf and glibc's differ by an ulp and that
// moves the result across a bf16 rounding boundary (rare; elementwise.cuh sigmoid_f32).
#include "elementwise.cuh"
#include "registry.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

namespace ew = elementwise;

struct SiluForward {
  static constexpr int kIn = 1, kOut = 1;  // x -> y
  __device__ void operator()(const float (&in)[1], float (&out)[1]) const {
    out[0] = __fmul_rn(in[0], ew::sigmoid_f32(in[0]));
  }
};

struct SiluBackward {
  static constexpr int kIn = 2, kOut = 1;  // x, dy.y -> dx
  __device__ void operator()(const float (&in)[2], float (&out)[1]) const {
    const float x = in[0], dy = in[1];
    out[0] = __fmul_rn(dy, ew::silu_derivative(x, ew::sigmoid_f32(x)));
  }
};

constexpr std::string_view kOp = "silu";

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const auto inputs = ws1::ops::pointwise_inputs<1>(kOp, in, {"x"});
    return ew::run_map<SiluForward>("silu.fwd", "map_kernel<SiluForward>", inputs, {"y"});
  });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const auto inputs = ws1::ops::pointwise_inputs<2>(kOp, in, {"x", "dy.y"});
    return ew::run_map<SiluBackward>("silu.bwd", "map_kernel<SiluBackward>", inputs, {"dx"});
  });
}

}  // namespace

const CudaOp& silu_cuda() {
  static const CudaOp op{kOp, forward, backward, "map_kernel<SiluForward>",
                         "map_kernel<SiluBackward>"};
  return op;
}

}  // namespace ws1cuda

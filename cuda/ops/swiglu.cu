// swiglu on cuda_bf16 (lib/ops/swiglu.cpp states the definition): y = silu(gate) * up,
// elementwise over same-shape gate and up.
//
// Forward and backward are each one map_kernel (elementwise.cuh): grid-stride over 16-byte
// vectors of 8 bf16 per thread, the n % 8 tail one element per thread; the backward writes
// dgate and dup from one pass. Per element, in FP32, with the CPU candidate's operations in
// its order, each rounded separately (no contraction):
//   forward   s = 1 / (1 + expf(-g));  y = (g * s) * u
//   backward  dgate = (dy * u) * (s * (1 + g * (1 - s)));  dup = dy * (g * s)
// and one bf16 rounding (nearest even) per output. No reduction. Bit-equal to cpu_bf16 except
// where CUDA's expf and glibc's differ by an ulp and that moves a result across a bf16 rounding
// boundary (rare; elementwise.cuh sigmoid_f32).
#include "elementwise.cuh"
#include "registry.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

namespace ew = elementwise;

struct SwigluForward {
  static constexpr int kIn = 2, kOut = 1;  // gate, up -> y
  __device__ void operator()(const float (&in)[2], float (&out)[1]) const {
    const float g = in[0], u = in[1];
    out[0] = __fmul_rn(__fmul_rn(g, ew::sigmoid_f32(g)), u);
  }
};

struct SwigluBackward {
  static constexpr int kIn = 3, kOut = 2;  // gate, up, dy.y -> dgate, dup
  __device__ void operator()(const float (&in)[3], float (&out)[2]) const {
    const float g = in[0], u = in[1], dy = in[2];
    const float s = ew::sigmoid_f32(g);
    out[0] = __fmul_rn(__fmul_rn(dy, u), ew::silu_derivative(g, s));
    out[1] = __fmul_rn(dy, __fmul_rn(g, s));
  }
};

constexpr std::string_view kOp = "swiglu";

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const auto inputs = ws1::ops::pointwise_inputs<2>(kOp, in, {"gate", "up"});
    return ew::run_map<SwigluForward>("swiglu.fwd", "map_kernel<SwigluForward>", inputs, {"y"});
  });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const auto inputs = ws1::ops::pointwise_inputs<3>(kOp, in, {"gate", "up", "dy.y"});
    return ew::run_map<SwigluBackward>("swiglu.bwd", "map_kernel<SwigluBackward>", inputs,
                                       {"dgate", "dup"});
  });
}

}  // namespace

const CudaOp& swiglu_cuda() {
  static const CudaOp op{kOp, forward, backward, "map_kernel<SwigluForward>",
                         "map_kernel<SwigluBackward>"};
  return op;
}

}  // namespace ws1cuda

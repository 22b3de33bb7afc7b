// rope on cuda_bf16 (lib/ops/rope.cpp states the definition): rotary position embedding,
// GPT-NeoX "rotate half" pairs (i, i + D/2), token-major x [T, H, D] with positions [T] or
// head-major x [B, H, S, D] with positions [S] or [B, S].
//
// Two kernels per direction:
//   rope_table_kernel   cos/sin per (position slot k, i < D/2), one entry per thread: the angle
//                       positions[k] * inv_freq[i] formed exactly in double, cos and sin in
//                       double (sincos), each rounded once to float32 — the CPU's table.
//                       inv_freq comes from the host (rope_inputs: the float32 rounding of the
//                       double 1/theta^(2i/D), computed once with the host's pow).
//   rope_rotate_kernel  one thread per (row, 8 consecutive i): 16-byte loads of x[i..i+7] and
//                       x[i+h..i+h+7], 2 x 32-byte table loads; per element the CPU's
//                           lo = fma(x[i],   c, -(sign * (x[i+h] * s)))
//                           hi = fma(x[i+h], c,   sign * (x[i]   * s))
//                       (sign +1 forward into y, -1 backward from dy.y into dx) with explicit
//                       __fmaf_rn / __fmul_rn, rounded to bf16 once. Rows whose D/2 is not a
//                       multiple of 8 take one i per thread.
// No reduction: every element is its own fixed FP32 expression, so nothing depends on the grid.
// Bit-equal to cpu_bf16 given the same float32 table; the table itself can differ from the
// CPU's where CUDA's double sin/cos (at most 2 double ulps off) and glibc's round to different
// float32 values, i.e. only where the exact value lies within a few double ulps of a float32
// rounding boundary (probability of order 2^-28 per entry).
#include "elementwise.cuh"
#include "registry.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

namespace ew = elementwise;
using ws1::ops::RopeLayout;

constexpr std::string_view kOp = "rope";
constexpr std::string_view kTableKernel = "rope_table_kernel";
constexpr std::string_view kRotateKernel = "rope_rotate_kernel";

__global__ void __launch_bounds__(ew::kThreads)
    rope_table_kernel(float* cos_t, float* sin_t, const std::int64_t* positions,
                      const float* inv_freq, std::int64_t slots, std::int64_t half) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t e = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; e < slots * half;
       e += stride) {
    const std::int64_t k = e / half, i = e - k * half;
    // Exact: a position < 2^29 times a float32 has at most 53 significant bits.
    const double angle = static_cast<double>(positions[k]) * static_cast<double>(inv_freq[i]);
    double s = 0.0, c = 0.0;
    sincos(angle, &s, &c);
    cos_t[e] = __double2float_rn(c);
    sin_t[e] = __double2float_rn(s);
  }
}

template <int V>
__device__ __forceinline__ void load_f32(const float* p, float (&f)[V]) {
  if constexpr (V == ew::kVec) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    const float4 b = *reinterpret_cast<const float4*>(p + 4);
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w;
    f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  } else {
    f[0] = *p;
  }
}

// V consecutive pairs per thread: V = 8 needs D/2 % 8 == 0 (16-byte aligned halves and
// 32-byte aligned table rows).
template <int V>
__global__ void __launch_bounds__(ew::kThreads)
    rope_rotate_kernel(__nv_bfloat16* out, const __nv_bfloat16* v, const float* cos_t,
                       const float* sin_t, RopeLayout l, float sign) {
  const std::int64_t half = l.dim / 2, per_row = half / V;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t item = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
       item < l.rows * per_row; item += stride) {
    const std::int64_t row = item / per_row, i = (item - row * per_row) * V;
    const std::int64_t t = l.slot(row) * half + i, o = row * l.dim + i;
    float lo[V], hi[V], c[V], s[V];
    ew::load_bf16<V>(v + o, lo);
    ew::load_bf16<V>(v + o + half, hi);
    load_f32<V>(cos_t + t, c);
    load_f32<V>(sin_t + t, s);
    float y_lo[V], y_hi[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      y_lo[j] = __fmaf_rn(lo[j], c[j], -__fmul_rn(sign, __fmul_rn(hi[j], s[j])));
      y_hi[j] = __fmaf_rn(hi[j], c[j], __fmul_rn(sign, __fmul_rn(lo[j], s[j])));
    }
    ew::store_bf16<V>(out + o, y_lo);
    ew::store_bf16<V>(out + o + half, y_hi);
  }
}

// Forward rotates x by +angle into y; backward rotates dy.y by -angle into dx.
ws1::Tensors run(const ws1::Tensors& in, const ws1::OpContext& ctx, bool backward) {
  const ws1::ops::RopeInputs r = ws1::ops::rope_inputs(kOp, in, ctx, backward);
  const RopeLayout& l = r.layout;
  const std::int64_t half = l.dim / 2;
  const auto slots = static_cast<std::int64_t>(r.positions.size());
  const DeviceArray<std::int64_t> positions = ew::upload_vector(r.positions);
  const DeviceArray<float> inv_freq = ew::upload_vector(r.inv_freq);
  const DeviceArray<bf16> v = upload_bf16(*r.v);
  DeviceArray<float> cos_t(static_cast<std::size_t>(slots * half));
  DeviceArray<float> sin_t(cos_t.size());
  auto out = poisoned<bf16>(v.size());
  launch_region(backward ? "rope.bwd" : "rope.fwd", [&] {
    if (slots * half == 0 || l.rows == 0) return;  // nothing to rotate
    rope_table_kernel<<<ew::grid_for(slots * half, ew::kThreads), ew::kThreads>>>(
        cos_t.get(), sin_t.get(), positions.get(), inv_freq.get(), slots, half);
    check_launch(kTableKernel);
    const float sign = backward ? -1.0f : 1.0f;
    if (half % ew::kVec == 0)
      rope_rotate_kernel<ew::kVec>
          <<<ew::grid_for(l.rows * (half / ew::kVec), ew::kThreads), ew::kThreads>>>(
              out.get(), v.get(), cos_t.get(), sin_t.get(), l, sign);
    else
      rope_rotate_kernel<1><<<ew::grid_for(l.rows * half, ew::kThreads), ew::kThreads>>>(
          out.get(), v.get(), cos_t.get(), sin_t.get(), l, sign);
    check_launch(kRotateKernel);
  });
  return ws1::Tensors{{backward ? "dx" : "y", download_bf16(out, r.v->shape())}};
}

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] { return run(in, ctx, false); });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] { return run(in, ctx, true); });
}

}  // namespace

const CudaOp& rope_cuda() {
  static const CudaOp op{kOp, forward, backward, "rope_table_kernel,rope_rotate_kernel",
                         "rope_table_kernel,rope_rotate_kernel"};
  return op;
}

}  // namespace ws1cuda

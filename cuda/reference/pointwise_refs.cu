// FP32 references on the device for: rms_norm, qk_norm, rope, swiglu, silu, embedding, pack.
// Each reproduces its CPU reference (lib/ops/<op>.cpp): the same input checks (so bad input
// gets the same one-line error), the same output names and shapes, float32 values of the same
// FP32 definition; cu_seqlens is pack's int64 host scan, as on the CPU.
//
// Two kernel shapes:
//  - map: out[i] = f(i) for every element of one FP32 output, f a small functor over the
//    inputs widened exactly to FP32 (silu, swiglu, rope, embedding, pack, and the second pass of
//    the norm's dweight). Each element is written once by one thread: nothing depends on the grid.
//  - norm rows: one block per row with a fixed-order block reduction (kernel_support.cuh), and
//    dweight in two fixed passes (rows in chunks of kDwRows in row order, then the chunk sums in
//    chunk order). No float atomics anywhere, so every run gives the same bits.
// Sums run in another order than the CPU's (its 32-wide chunks, its one-pass dweight): the two
// agree within FP32 rounding (test/gpu/reference_test.cpp, the contract's float32 rows). Where
// nvcc would contract a*b+c into an FMA that the CPU (-ffp-contract=off) rounds twice, the
// operations are written as __fmul_rn/__fadd_rn so the per-element arithmetic is the CPU's.
// expf, sqrtf and / are the IEEE-accurate forms (no --use_fast_math in cuda/meson.build).
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <vector>

#include "host_vectors.cuh"
#include "reference_ops.hpp"
#include "reference_support.cuh"
#include "ws1cuda/kernel_support.cuh"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

namespace ws1cuda::reference {
namespace {

constexpr const char* kEngine = "cuda_fp32 (FP32 kernels on bf16 inputs widened to FP32)";
constexpr int kThreads = 256;                         // block size of every kernel here
constexpr std::int64_t kMaxBlocks = 65535;            // grids stride over the rest
constexpr std::int64_t kDwRows = 256;                 // rows per dweight chunk (first pass)

// A grid of `blocks` blocks, capped at kMaxBlocks (the kernels loop over the rest).
unsigned capped(std::int64_t blocks) { return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxBlocks)); }

// ---- map: one FP32 output element per functor call ----

template <class F>
__global__ void map_kernel(float* out, std::int64_t n, F f) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = f(i);
}

// The float32 host tensor of `shape` whose element i (row-major) is f(i). Starts poisoned, so
// an element the kernel missed is a NaN the comparison reports.
template <class F>
ws1::Tensor mapped(const ws1::Shape& shape, const F& f) {
  const std::int64_t n = ws1::numel(shape);
  DeviceArray<float> out = poisoned<float>(static_cast<std::size_t>(n));
  if (n > 0) {
    map_kernel<<<capped(blocks_for(n, kThreads)), kThreads>>>(out.get(), n, f);
    check_launch(F::kName);
  }
  return download_f32(out, shape);
}

// sigmoid_f32 of elementwise.hpp: 1 / (1 + exp(-x)), expf overflowing to +inf gives 0.
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
// s * (1 + x * (1 - s)): silu's derivative at x with s = sigmoid(x), each operation rounded.
__device__ __forceinline__ float silu_slope(float x, float s) {
  return __fmul_rn(s, __fadd_rn(1.0f, __fmul_rn(x, 1.0f - s)));
}

// ---- silu: y = x * s; dx = dy * silu_slope ----

struct SiluY {
  static constexpr const char* kName = "map_kernel<silu.y>";
  const float* x;
  __device__ float operator()(std::int64_t i) const { return x[i] * sigmoid(x[i]); }
};
struct SiluDx {
  static constexpr const char* kName = "map_kernel<silu.dx>";
  const float *x, *dy;
  __device__ float operator()(std::int64_t i) const { return dy[i] * silu_slope(x[i], sigmoid(x[i])); }
};

ws1::Tensors silu_forward(const ws1::Tensors& in, const ws1::OpContext&) {
  const ws1::Tensor& xt = *ws1::ops::pointwise_inputs<1>("silu", in, {"x"})[0];
  const DeviceArray<float> x = widened(xt);
  return {{"y", mapped(xt.shape(), SiluY{x.get()})}};
}

ws1::Tensors silu_backward(const ws1::Tensors& in, const ws1::OpContext&) {
  const auto [xt, dyt] = ws1::ops::pointwise_inputs<2>("silu", in, {"x", "dy.y"});
  const DeviceArray<float> x = widened(*xt), dy = widened(*dyt);
  return {{"dx", mapped(xt->shape(), SiluDx{x.get(), dy.get()})}};
}

// ---- swiglu: y = (g * s) * u; dgate = (dy * u) * silu_slope; dup = dy * (g * s) ----

struct SwigluY {
  static constexpr const char* kName = "map_kernel<swiglu.y>";
  const float *g, *u;
  __device__ float operator()(std::int64_t i) const { return (g[i] * sigmoid(g[i])) * u[i]; }
};
struct SwigluDgate {
  static constexpr const char* kName = "map_kernel<swiglu.dgate>";
  const float *g, *u, *dy;
  __device__ float operator()(std::int64_t i) const { return (dy[i] * u[i]) * silu_slope(g[i], sigmoid(g[i])); }
};
struct SwigluDup {
  static constexpr const char* kName = "map_kernel<swiglu.dup>";
  const float *g, *dy;
  __device__ float operator()(std::int64_t i) const { return dy[i] * (g[i] * sigmoid(g[i])); }
};

ws1::Tensors swiglu_forward(const ws1::Tensors& in, const ws1::OpContext&) {
  const auto [gt, ut] = ws1::ops::pointwise_inputs<2>("swiglu", in, {"gate", "up"});
  const DeviceArray<float> g = widened(*gt), u = widened(*ut);
  return {{"y", mapped(gt->shape(), SwigluY{g.get(), u.get()})}};
}

ws1::Tensors swiglu_backward(const ws1::Tensors& in, const ws1::OpContext&) {
  const auto [gt, ut, dyt] = ws1::ops::pointwise_inputs<3>("swiglu", in, {"gate", "up", "dy.y"});
  const DeviceArray<float> g = widened(*gt), u = widened(*ut), dy = widened(*dyt);
  return {{"dgate", mapped(gt->shape(), SwigluDgate{g.get(), u.get(), dy.get()})},
          {"dup", mapped(gt->shape(), SwigluDup{g.get(), dy.get()})}};
}

// ---- rope: rotate each D-wide row by its position's angles (sign +1) or back (sign -1) ----
// cos/sin as the CPU forms them: angle = position * inv_freq exactly in double, cos and sin in
// double, each rounded once to float32 (double sin/cos on the device may differ from the host's
// in the last double ulp, which survives the rounding to float32 only near a tie).

struct RopeRotate {
  static constexpr const char* kName = "map_kernel<rope>";
  const float* v;
  const std::int64_t* positions;
  const float* inv_freq;
  ws1::ops::RopeLayout layout;
  float sign;
  __device__ float operator()(std::int64_t i) const {
    const std::int64_t dim = layout.dim, half = dim / 2;
    const std::int64_t row = i / dim, j = i % dim, k = j < half ? j : j - half;
    const double angle = static_cast<double>(positions[layout.slot(row)]) * static_cast<double>(inv_freq[k]);
    double sd = 0.0, cd = 0.0;
    sincos(angle, &sd, &cd);
    const float c = static_cast<float>(cd), s = static_cast<float>(sd);
    const float a = v[row * dim + k], b = v[row * dim + k + half];  // the pair (k, k + D/2)
    if (j < half) return fmaf(a, c, -(sign * __fmul_rn(b, s)));
    return fmaf(b, c, sign * __fmul_rn(a, s));
  }
};

ws1::Tensors rope(const ws1::Tensors& in, const ws1::OpContext& ctx, bool backward) {
  const ws1::ops::RopeInputs r = ws1::ops::rope_inputs("rope", in, ctx, backward);
  const DeviceArray<float> v = widened(*r.v), inv_freq = to_device(r.inv_freq);
  const DeviceArray<std::int64_t> positions = to_device(r.positions);
  const RopeRotate f{v.get(), positions.get(), inv_freq.get(), r.layout, backward ? -1.0f : 1.0f};
  return {{backward ? "dx" : "y", mapped(r.v->shape(), f)}};
}
ws1::Tensors rope_forward(const ws1::Tensors& in, const ws1::OpContext& ctx) { return rope(in, ctx, false); }
ws1::Tensors rope_backward(const ws1::Tensors& in, const ws1::OpContext& ctx) { return rope(in, ctx, true); }

// ---- embedding: y = table rows; dtable row v = sum of the dy rows of the tokens with id v ----

struct EmbeddingY {
  static constexpr const char* kName = "map_kernel<embedding.y>";
  const float* table;
  const std::int64_t* ids;
  std::int64_t hidden;
  __device__ float operator()(std::int64_t i) const { return table[ids[i / hidden] * hidden + i % hidden]; }
};
// Element (v, c) of dtable: +0 when no token has id v (group_of[v] < 0), else the sum from +0,
// left to right in increasing token index, of column c of that id's dy rows (the CPU's order).
struct EmbeddingDtable {
  static constexpr const char* kName = "map_kernel<embedding.dtable>";
  const float* dy;
  const std::int64_t* tokens;    // token indices sorted by id, stable
  const std::int64_t* starts;    // group g's tokens are tokens[starts[g] .. starts[g+1])
  const std::int64_t* group_of;  // [V]: the group of id v, or -1
  std::int64_t hidden;
  __device__ float operator()(std::int64_t i) const {
    const std::int64_t grp = group_of[i / hidden], c = i % hidden;
    float acc = 0.0f;
    if (grp < 0) return acc;
    for (std::int64_t k = starts[grp]; k < starts[grp + 1]; ++k) acc = __fadd_rn(acc, dy[tokens[k] * hidden + c]);
    return acc;
  }
};

ws1::Tensors embedding_forward(const ws1::Tensors& in, const ws1::OpContext&) {
  const ws1::ops::EmbeddingInputs g = ws1::ops::embedding_inputs("embedding", in, false);
  const DeviceArray<float> table = widened(*g.table);
  const DeviceArray<std::int64_t> ids = to_device(g.ids);
  return {{"y", mapped(g.out_shape, EmbeddingY{table.get(), ids.get(), g.hidden})}};
}

ws1::Tensors embedding_backward(const ws1::Tensors& in, const ws1::OpContext&) {
  const ws1::ops::EmbeddingInputs g = ws1::ops::embedding_inputs("embedding", in, true);
  // The summation order on the host (T ids, cheap): tokens grouped by id, increasing index.
  std::vector<std::int64_t> tokens(g.ids.size());
  std::iota(tokens.begin(), tokens.end(), std::int64_t{0});
  std::stable_sort(tokens.begin(), tokens.end(), [&](std::int64_t a, std::int64_t b) {
    return g.ids[static_cast<std::size_t>(a)] < g.ids[static_cast<std::size_t>(b)];
  });
  std::vector<std::int64_t> starts, group_of(static_cast<std::size_t>(g.vocab), -1);
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    const std::int64_t id = g.ids[static_cast<std::size_t>(tokens[k])];
    if (group_of[static_cast<std::size_t>(id)] < 0) {
      group_of[static_cast<std::size_t>(id)] = static_cast<std::int64_t>(starts.size());
      starts.push_back(static_cast<std::int64_t>(k));
    }
  }
  starts.push_back(static_cast<std::int64_t>(tokens.size()));
  const DeviceArray<float> dy = widened(*g.dy);
  const DeviceArray<std::int64_t> tokens_d = to_device(tokens), starts_d = to_device(starts),
                                  group_of_d = to_device(group_of);
  const EmbeddingDtable f{dy.get(), tokens_d.get(), starts_d.get(), group_of_d.get(), g.hidden};
  return {{"dtable", mapped({g.vocab, g.hidden}, f)}};
}

// ---- pack: packed row k = x row active[k]; dx row r = dy.packed row k where active[k] = r ----
// (a row-index map; map[r] < 0: an inactive row, +0)

struct MoveRows {
  static constexpr const char* kName = "map_kernel<pack>";
  const float* src;
  const std::int64_t* from;  // output row -> source row, or -1
  std::int64_t width;
  __device__ float operator()(std::int64_t i) const {
    const std::int64_t r = from[i / width];
    return r < 0 ? 0.0f : src[r * width + i % width];
  }
};

ws1::Tensor i64_tensor(const std::vector<std::int64_t>& v) {
  ws1::Tensor t(ws1::DType::kI64, {static_cast<std::int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<std::int64_t>());
  return t;
}

ws1::Tensors pack_forward(const ws1::Tensors& in, const ws1::OpContext&) {
  const ws1::ops::PackInputs r = ws1::ops::pack_inputs("pack", in, false);
  const ws1::ops::Packing& p = r.packing;
  const DeviceArray<float> x = widened(*r.x);
  const DeviceArray<std::int64_t> from = to_device(p.active);
  return {{"packed", mapped(p.packed_shape, MoveRows{x.get(), from.get(), p.width})},
          {"cu_seqlens", i64_tensor(p.cu_seqlens)}};
}

ws1::Tensors pack_backward(const ws1::Tensors& in, const ws1::OpContext&) {
  const ws1::ops::PackInputs r = ws1::ops::pack_inputs("pack", in, true);
  const ws1::ops::Packing& p = r.packing;
  std::vector<std::int64_t> slot(static_cast<std::size_t>(p.rows), -1);
  for (std::size_t k = 0; k < p.active.size(); ++k)
    slot[static_cast<std::size_t>(p.active[k])] = static_cast<std::int64_t>(k);
  const DeviceArray<float> dy = widened(*r.dy);
  const DeviceArray<std::int64_t> from = to_device(slot);
  return {{"dx", mapped(r.x->shape(), MoveRows{dy.get(), from.get(), p.width})}};
}

// ---- rms_norm / qk_norm: y = (x * rstd) * w, rstd = 1 / sqrt(mean(x^2) + eps) per row ----
// Backward with g = dy * w:  dx = rstd*g - x * (rstd^3 * sum(g*x) / W),
//                            dweight = sum over rows of fma(dy*x, rstd, acc).
// Every thread of a row's block walks its strided elements in order; block_sum then adds the
// per-thread sums in a fixed tree (blockDim is always kThreads).

__device__ __forceinline__ float row_rstd(const float* x, std::int64_t width, float eps, float* scratch) {
  float part = 0.0f;
  for (std::int64_t i = threadIdx.x; i < width; i += blockDim.x) part = fmaf(x[i], x[i], part);
  const float mean = block_sum(part, scratch) / static_cast<float>(width);
  return 1.0f / sqrtf(mean + eps);
}

__global__ void norm_forward_kernel(float* y, const float* x, const float* w, std::int64_t rows, std::int64_t width,
                                    float eps) {
  __shared__ float scratch[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * width;
    const float rstd = row_rstd(xr, width, eps, scratch);
    for (std::int64_t i = threadIdx.x; i < width; i += blockDim.x) y[r * width + i] = __fmul_rn(xr[i], rstd) * w[i];
  }
}

__global__ void norm_backward_kernel(float* dx, float* rstd_out, const float* x, const float* w, const float* dy,
                                     std::int64_t rows, std::int64_t width, float eps, float inv_width) {
  __shared__ float scratch[32];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * width, *dyr = dy + r * width;
    const float rs = row_rstd(xr, width, eps, scratch);
    float part = 0.0f;
    for (std::int64_t i = threadIdx.x; i < width; i += blockDim.x) part = fmaf(__fmul_rn(dyr[i], w[i]), xr[i], part);
    const float coef = rs * rs * rs * block_sum(part, scratch) * inv_width;  // left to right, as the CPU
    for (std::int64_t i = threadIdx.x; i < width; i += blockDim.x)
      dx[r * width + i] = __fsub_rn(__fmul_rn(rs, __fmul_rn(dyr[i], w[i])), __fmul_rn(xr[i], coef));
    if (threadIdx.x == 0) rstd_out[r] = rs;
  }
}

// dweight, first pass: partial[k, c] = the sum over chunk k's rows (kDwRows each, in row
// order, from +0) of fma(dy*x, rstd, acc) in column c. One thread per (chunk, column).
__global__ void dweight_chunks_kernel(float* partial, const float* x, const float* dy, const float* rstd,
                                      std::int64_t rows, std::int64_t width, std::int64_t chunks) {
  const std::int64_t c = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (c >= width) return;
  for (std::int64_t k = blockIdx.y; k < chunks; k += gridDim.y) {
    float acc = 0.0f;
    const std::int64_t end = (k + 1) * kDwRows < rows ? (k + 1) * kDwRows : rows;
    for (std::int64_t r = k * kDwRows; r < end; ++r)
      acc = fmaf(__fmul_rn(dy[r * width + c], x[r * width + c]), rstd[r], acc);
    partial[k * width + c] = acc;
  }
}
// Second pass: dweight[c] = the chunk sums of column c in chunk order, from +0.
struct ChunkSums {
  static constexpr const char* kName = "map_kernel<rms_norm.dweight>";
  const float* partial;
  std::int64_t chunks, width;
  __device__ float operator()(std::int64_t c) const {
    float acc = 0.0f;
    for (std::int64_t k = 0; k < chunks; ++k) acc = __fadd_rn(acc, partial[k * width + c]);
    return acc;
  }
};

ws1::Tensors norm_forward(std::string_view op, const ws1::Tensors& in, const ws1::OpContext& ctx) {
  // The reference is all FP32 whatever ctx.rms_norm_order says (that order is the candidate's).
  const ws1::ops::NormInputs s = ws1::ops::check_norm_inputs(op, in, false);
  const DeviceArray<float> x = widened(*s.x), w = widened(*s.weight);
  DeviceArray<float> y = poisoned<float>(x.size());
  if (s.rows > 0) {
    norm_forward_kernel<<<capped(s.rows), kThreads>>>(y.get(), x.get(), w.get(), s.rows, s.width,
                                                                   static_cast<float>(ctx.rms_norm_eps));
    check_launch("norm_forward_kernel");
  }
  return {{"y", download_f32(y, s.x->shape())}};
}

ws1::Tensors norm_backward(std::string_view op, const ws1::Tensors& in, const ws1::OpContext& ctx) {
  const ws1::ops::NormInputs s = ws1::ops::check_norm_inputs(op, in, true);
  const DeviceArray<float> x = widened(*s.x), w = widened(*s.weight), dy = widened(*s.dy);
  DeviceArray<float> dx = poisoned<float>(x.size()), rstd = poisoned<float>(static_cast<std::size_t>(s.rows));
  const std::int64_t chunks = (s.rows + kDwRows - 1) / kDwRows;
  DeviceArray<float> partial = poisoned<float>(static_cast<std::size_t>(chunks * s.width));
  if (s.rows > 0) {
    norm_backward_kernel<<<capped(s.rows), kThreads>>>(
        dx.get(), rstd.get(), x.get(), w.get(), dy.get(), s.rows, s.width, static_cast<float>(ctx.rms_norm_eps),
        1.0f / static_cast<float>(s.width));
    check_launch("norm_backward_kernel");
    const dim3 grid(blocks_for(s.width, kThreads), capped(chunks));
    dweight_chunks_kernel<<<grid, kThreads>>>(partial.get(), x.get(), dy.get(), rstd.get(), s.rows, s.width, chunks);
    check_launch("dweight_chunks_kernel");
  }
  return {{"dx", download_f32(dx, s.x->shape())},
          {"dweight", mapped(s.weight->shape(), ChunkSums{partial.get(), chunks, s.width})}};
}

ws1::Tensors rms_norm_forward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return norm_forward("rms_norm", in, ctx);
}
ws1::Tensors rms_norm_backward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return norm_backward("rms_norm", in, ctx);
}
// qk_norm is rms_norm over head_dim, after its own check that x's last dimension is head_dim.
ws1::Tensors qk_norm_forward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  ws1::ops::check_qk_norm_head_dim("qk_norm", in, ctx);
  return norm_forward("qk_norm", in, ctx);
}
ws1::Tensors qk_norm_backward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  ws1::ops::check_qk_norm_head_dim("qk_norm", in, ctx);
  return norm_backward("qk_norm", in, ctx);
}

// ---- the table ----

using Fn = ws1::Tensors (*)(const ws1::Tensors&, const ws1::OpContext&);

DeviceRef own_kernels(Fn forward, Fn backward) {
  return {kEngine, false,
          [forward](const ws1::Tensors& in, const ws1::OpContext& ctx, cublasHandle_t) { return forward(in, ctx); },
          [backward](const ws1::Tensors& in, const ws1::OpContext& ctx, cublasHandle_t) { return backward(in, ctx); }};
}

}  // namespace

void add_pointwise_refs(Table& t) {
  t.emplace("rms_norm", own_kernels(rms_norm_forward, rms_norm_backward));
  t.emplace("qk_norm", own_kernels(qk_norm_forward, qk_norm_backward));
  t.emplace("rope", own_kernels(rope_forward, rope_backward));
  t.emplace("swiglu", own_kernels(swiglu_forward, swiglu_backward));
  t.emplace("silu", own_kernels(silu_forward, silu_backward));
  t.emplace("embedding", own_kernels(embedding_forward, embedding_backward));
  t.emplace("pack", own_kernels(pack_forward, pack_backward));
}

}  // namespace ws1cuda::reference

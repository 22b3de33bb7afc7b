// linear_logp on cuda_bf16 (lib/ops/linear_logp.cpp states the definition): logp[t] =
// logits[t, y] - logsumexp(logits[t]) with logits = hidden @ weight^T, FLOAT32 out, without the
// [T, V] logits in memory; backward dhidden = G @ W and dweight = G^T @ hidden (bf16) with
// G = dy * (onehot(y) - softmax(logits)).
//
// Logits tiles are tensor-core products of the bf16 inputs with FP32 accumulation
// (logprob.cuh, namespace tile: mma.sync m16n8k16 bf16, k in increasing 16-wide steps over H);
// a logit's bits depend on its row of hidden and its row of weight only, so every kernel that
// recomputes a tile gets the same logits. Kernels, in launch order:
//   linear_logp_state_kernel  grid (rows / 128, V / 1024): one CTA per 128 rows x one 1024-wide
//                             vocabulary chunk, 8 tiles of 128 columns in order. Per tile each
//                             thread takes the max, then the sum of expf(x - max), of its 8
//                             logits of each of its rows (columns in increasing order) and
//                             merges that into its running state (lse_merge); after the last
//                             tile the 4 lanes of a row merge by a fixed xor butterfly (1, 2)
//                             and the 4 warps along N in warp order. One (max, sum) per
//                             (row, chunk); the thread holding a row's target logit writes it.
//   logprob_row_kernel        (logp.cu) the chunk states of a row merged left to right: lse,
//                             logp = target logit - lse.
// Backward, after the same two kernels (lse of every row), per vocabulary slab [v0, v0 + S)
// (S a multiple of 1024 sized so the G scratch stays near 2^26 elements):
//   linear_logp_grad_kernel     recomputes the slab's logits tiles, G = dy * (onehot -
//                               expf(x - lse)) in FP32 (the CPU's operations), stored as two
//                               bf16 [T, S] scratches G_hi = bf16(G), G_lo = bf16(G - G_hi): the
//                               tensor cores take bf16, and G alone in bf16 would add up to
//                               |dhidden| * 2^-9 to dhidden (0.03 at |dhidden| ~ 16, next to the
//                               gradient atol 0.05); hi + lo keeps ~16 bits.
//   linear_logp_dhidden_kernel  dhidden[T, H] += (G_hi + G_lo)_slab @ W[slab] (per 16-wide k step
//                               the hi products, then the lo ones): the FP32 accumulators of the
//                               previous slab are reloaded (an exact round trip), so every
//                               element sums all of V in increasing 16-wide steps whatever S is
//                               (S depends on T; the result must not); the last slab rounds once.
//   linear_logp_dweight_kernel  dweight[slab, H] = G_hi_slab^T @ hidden: each element sums the
//                               tokens in increasing 16-wide steps (fixed for a given call: the
//                               parameter gradient reduces over the call's tokens), rounded once.
// Memory besides inputs and outputs: chunk states rows x V/1024 x 8 B; G_hi and G_lo rows x S x
// 2 B each and, with more than one slab, FP32 dhidden partials rows x H x 4 B (at 8192 x 151936
// x 4096: S = 8192, 128 MiB each, 384 MiB in all). No atomics; every launch's result is fixed by
// its inputs.
// Not bit-equal to cpu_bf16: the tensor cores' k16 sums differ from the CPU's 32-wide FMA chains,
// the per-chunk lse runs in the tile order above, and G enters the products as bf16 (hi + lo for
// dhidden, hi for dweight).
#include <algorithm>
#include <string_view>

#include "logprob.cuh"
#include "ws1cuda/launch_region.cuh"
#include "logsumexp.hpp"
#include "op_support.hpp"
#include "registry.hpp"

namespace ws1cuda {
namespace logprob {
namespace {

using tile::Acc;
using tile::frag_col;
using tile::frag_row;
using tile::kFragsM;
using tile::kFragsN;
using tile::Matrix;

constexpr std::int64_t kGradBudget = std::int64_t{1} << 26;  // G scratch elements per slab (about)
constexpr std::int64_t kMaxGridX = 0x7fffffff, kMaxGridY = 65535;
constexpr std::int64_t kMaxSlab = kMaxGridY * tile::kN / kChunk * kChunk;
constexpr int kWarpsN = tile::kN / tile::kWarpN;
constexpr std::size_t kSmem1 = tile::kSmemBytes<1>, kSmem2 = tile::kSmemBytes<2>;  // 60 / 90 KiB
static_assert(kChunk % tile::kN == 0);

__device__ __forceinline__ int warp_id() { return static_cast<int>(threadIdx.x >> 5); }
__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x & 31); }

// The state of this thread's 8 logits of its row (mi, half) in the tile at column n0: max,
// then sum of expf(x - max), columns in increasing order; columns >= vocab left out.
__device__ __forceinline__ Lse thread_row_state(const Acc& acc, int mi, int half, std::int64_t n0, int warp_n,
                                                int lane, std::int64_t vocab) {
  float m = -INFINITY;
#pragma unroll
  for (int ni = 0; ni < kFragsN; ++ni)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float x = acc[mi][ni][2 * half + e];
      if (n0 + frag_col(warp_n, lane, ni, e) < vocab) m = x > m ? x : m;
    }
  if (m == -INFINITY) return {m, 0.0f};
  float s = 0.0f;
#pragma unroll
  for (int ni = 0; ni < kFragsN; ++ni)
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if (n0 + frag_col(warp_n, lane, ni, e) < vocab) s = __fadd_rn(s, expf(__fsub_rn(acc[mi][ni][2 * half + e], m)));
  return {m, s};
}

__global__ void __launch_bounds__(tile::kThreads, 1)
    linear_logp_state_kernel(Matrix hidden, Matrix weight, std::int64_t nchunks, const std::int64_t* targets,
                             Lse* states, float* target_logit) {
  extern __shared__ __align__(16) unsigned short smem[];
  const int warp = warp_id(), lane = lane_id(), warp_m = warp % 2, warp_n = warp / 2;
  const std::int64_t rows = hidden.rows, vocab = weight.rows;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * tile::kM, chunk = blockIdx.y;
  std::int64_t y[kFragsM][2];
  Lse run[kFragsM][2];
#pragma unroll
  for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::int64_t r = m0 + frag_row(warp_m, lane, mi, 2 * h);
      y[mi][h] = r < rows ? targets[r] : -1;
      run[mi][h] = lse_empty();
    }
  for (int t = 0; t < kChunk / tile::kN; ++t) {
    const std::int64_t n0 = chunk * kChunk + t * tile::kN;
    if (n0 >= vocab) break;  // the same for the whole block
    Acc acc;
    tile::zero(acc);
    tile::mma_tile<true, true>(hidden, weight, m0, n0, hidden.cols, acc, smem);
#pragma unroll
    for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        lse_merge(run[mi][h], thread_row_state(acc, mi, h, n0, warp_n, lane, vocab));
#pragma unroll
        for (int ni = 0; ni < kFragsN; ++ni)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (n0 + frag_col(warp_n, lane, ni, e) == y[mi][h])
              target_logit[m0 + frag_row(warp_m, lane, mi, 2 * h)] = acc[mi][ni][2 * h + e];
      }
  }
  // The 4 lanes holding a row: butterfly over lane bits 0 and 1 (lse_merge is commutative, so
  // the lanes agree).
#pragma unroll
  for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int off = 1; off <= 2; off <<= 1) {
        const Lse other{__shfl_xor_sync(0xffffffffu, run[mi][h].max, off),
                        __shfl_xor_sync(0xffffffffu, run[mi][h].sum, off)};
        lse_merge(run[mi][h], other);
      }
  // The warps along N, in warp order (mma_tile ended with a barrier: the pipeline's shared
  // memory is free).
  Lse* part = reinterpret_cast<Lse*>(smem);  // [kWarpsN][kM]
  if ((lane & 3) == 0) {
#pragma unroll
    for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
      for (int h = 0; h < 2; ++h) part[warp_n * tile::kM + frag_row(warp_m, lane, mi, 2 * h)] = run[mi][h];
  }
  __syncthreads();
  const int row = static_cast<int>(threadIdx.x);
  if (row < tile::kM && m0 + row < rows) {
    Lse acc = part[row];
#pragma unroll
    for (int w = 1; w < kWarpsN; ++w) lse_merge(acc, part[w * tile::kM + row]);
    states[(m0 + row) * nchunks + chunk] = acc;
  }
}

// Stores two adjacent values (columns c, c + 1) of a row as bf16 / FP32; `pair_ok` when the row
// pointer + c is aligned for the pair (even row length); columns >= limit are left out.
__device__ __forceinline__ void store_bf16_pair(unsigned short* p, std::int64_t c, std::int64_t limit, float a,
                                                float b, bool pair_ok) {
  if (pair_ok && c + 1 < limit) {
    *reinterpret_cast<unsigned*>(p) = f32_to_bf16_bits(a) | (static_cast<unsigned>(f32_to_bf16_bits(b)) << 16);
  } else {
    if (c < limit) p[0] = f32_to_bf16_bits(a);
    if (c + 1 < limit) p[1] = f32_to_bf16_bits(b);
  }
}
__device__ __forceinline__ void store_f32_pair(float* p, std::int64_t c, std::int64_t limit, float a, float b,
                                               bool pair_ok) {
  if (pair_ok && c + 1 < limit) {
    *reinterpret_cast<float2*>(p) = make_float2(a, b);
  } else {
    if (c < limit) p[0] = a;
    if (c + 1 < limit) p[1] = b;
  }
}

// G of columns [v0, v_end) into g_hi and g_lo [rows, ldg] (column v at v - v0; ldg even):
// g_hi = bf16(G), g_lo = bf16(G - g_hi) (the difference is exact in FP32).
__global__ void __launch_bounds__(tile::kThreads, 2)
    linear_logp_grad_kernel(Matrix hidden, Matrix weight, std::int64_t v0, std::int64_t v_end,
                            const std::int64_t* targets, const float* dy, const float* lse, unsigned short* g_hi,
                            unsigned short* g_lo, std::int64_t ldg) {
  extern __shared__ __align__(16) unsigned short smem[];
  const int warp = warp_id(), lane = lane_id(), warp_m = warp % 2, warp_n = warp / 2;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * tile::kM;
  const std::int64_t n0 = v0 + static_cast<std::int64_t>(blockIdx.y) * tile::kN;
  Acc acc;
  tile::zero(acc);
  tile::mma_tile<true, true>(hidden, weight, m0, n0, hidden.cols, acc, smem);
#pragma unroll
  for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::int64_t r = m0 + frag_row(warp_m, lane, mi, 2 * h);
      if (r >= hidden.rows) continue;
      const std::int64_t y = targets[r];
      const float d = dy[r], l = lse[r];
#pragma unroll
      for (int ni = 0; ni < kFragsN; ++ni) {
        const std::int64_t c = n0 + frag_col(warp_n, lane, ni, 0);  // even
        float hi[2], lo[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = expf(__fsub_rn(acc[mi][ni][2 * h + e], l));
          const float gv = __fmul_rn(d, __fsub_rn(c + e == y ? 1.0f : 0.0f, p));
          hi[e] = bf16_bits_to_f32(f32_to_bf16_bits(gv));
          lo[e] = __fsub_rn(gv, hi[e]);
        }
        const std::int64_t at = r * ldg + (c - v0);
        store_bf16_pair(g_hi + at, c, v_end, hi[0], hi[1], true);
        store_bf16_pair(g_lo + at, c, v_end, lo[0], lo[1], true);
      }
    }
}

// dhidden += (G_hi + G_lo)_slab @ W_slab: `partial` holds the FP32 sums of the earlier slabs
// (read unless `first`, written unless `last`); the last slab writes bf16 dhidden.
__global__ void __launch_bounds__(tile::kThreads, 2)
    linear_logp_dhidden_kernel(Matrix g_hi, Matrix g_lo, Matrix w_slab, float* partial, bool first, bool last,
                               unsigned short* dhidden) {
  extern __shared__ __align__(16) unsigned short smem[];
  const int warp = warp_id(), lane = lane_id(), warp_m = warp % 2, warp_n = warp / 2;
  const std::int64_t rows = g_hi.rows, width = w_slab.cols;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * tile::kM;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * tile::kN;
  const bool pair_ok = width % 2 == 0;
  Acc acc;
#pragma unroll
  for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
    for (int ni = 0; ni < kFragsN; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t r = m0 + frag_row(warp_m, lane, mi, e), c = n0 + frag_col(warp_n, lane, ni, e);
        acc[mi][ni][e] = !first && r < rows && c < width ? partial[r * width + c] : 0.0f;
      }
  const Matrix g[2] = {g_hi, g_lo};
  tile::mma_tile<true, false, 2>(g, w_slab, m0, n0, g_hi.cols, acc, smem);
#pragma unroll
  for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::int64_t r = m0 + frag_row(warp_m, lane, mi, 2 * h);
      if (r >= rows) continue;
#pragma unroll
      for (int ni = 0; ni < kFragsN; ++ni) {
        const std::int64_t c = n0 + frag_col(warp_n, lane, ni, 0);
        const float a = acc[mi][ni][2 * h], b = acc[mi][ni][2 * h + 1];
        if (last)
          store_bf16_pair(dhidden + r * width + c, c, width, a, b, pair_ok);
        else
          store_f32_pair(partial + r * width + c, c, width, a, b, pair_ok);
      }
    }
}

// dweight[v0 + i, :] = sum over tokens of G_slab[t, i] * hidden[t, :]; g_t is the [T, S] G_hi
// scratch read as A = G^T (MN-major). G_lo is left out: hidden is small (unit logits need
// |hidden| ~ 1/sqrt(H)), so G's bf16 rounding stays far below dweight's own.
__global__ void __launch_bounds__(tile::kThreads, 2)
    linear_logp_dweight_kernel(Matrix g_t, Matrix hidden, std::int64_t v0, unsigned short* dweight) {
  extern __shared__ __align__(16) unsigned short smem[];
  const int warp = warp_id(), lane = lane_id(), warp_m = warp % 2, warp_n = warp / 2;
  const std::int64_t slab = g_t.cols, width = hidden.cols;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.x) * tile::kM;
  const std::int64_t n0 = static_cast<std::int64_t>(blockIdx.y) * tile::kN;
  const bool pair_ok = width % 2 == 0;
  Acc acc;
  tile::zero(acc);
  tile::mma_tile<false, false>(g_t, hidden, m0, n0, hidden.rows, acc, smem);
#pragma unroll
  for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const std::int64_t i = m0 + frag_row(warp_m, lane, mi, 2 * h);
      if (i >= slab) continue;
#pragma unroll
      for (int ni = 0; ni < kFragsN; ++ni) {
        const std::int64_t c = n0 + frag_col(warp_n, lane, ni, 0);
        store_bf16_pair(dweight + (v0 + i) * width + c, c, width, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1],
                        pair_ok);
      }
    }
}

unsigned grid_dim(std::int64_t n, std::int64_t per_block) { return blocks_for(n, per_block); }
unsigned short* bits(DeviceArray<bf16>& a) { return reinterpret_cast<unsigned short*>(a.get()); }

struct Inputs {
  ws1::ops::LinearLogpInputs p;
  DeviceArray<bf16> hidden, weight;
  DeviceArray<std::int64_t> ids;
  Matrix h, w;  // hidden [rows, H], weight [V, H]
};

// Checks (ws1::ops::check_linear_logp_inputs, then this backend's grid limits) and uploads.
Inputs upload(std::string_view op, const ws1::Tensors& in, bool backward) {
  Inputs d{ws1::ops::check_linear_logp_inputs(op, in, backward), {}, {}, {}, {}, {}};
  const auto& p = d.p;
  ws1::ops::require((p.vocab + kChunk - 1) / kChunk <= kMaxGridY, op, "weight",
                    "vocabulary too wide for a cuda_bf16 launch");
  ws1::ops::require((p.width + tile::kN - 1) / tile::kN <= kMaxGridY, op, "hidden",
                    "hidden width too large for a cuda_bf16 launch");
  ws1::ops::require((p.rows + tile::kM - 1) / tile::kM <= kMaxGridX, op, "hidden",
                    "too many rows for a cuda_bf16 launch");
  if (p.rows == 0) return d;
  d.hidden = upload_bf16(p.hidden);
  d.weight = upload_bf16(*p.weight);
  d.ids = upload_i64(*ws1::find_tensor(in, "targets"));
  d.h = tile::matrix(d.hidden.get(), p.width, p.rows, p.width);
  d.w = tile::matrix(d.weight.get(), p.width, p.vocab, p.width);
  return d;
}

// logp and lse (unless nullptr) of every row; rows > 0.
void row_stats(const Inputs& d, float* logp, float* lse) {
  const std::int64_t nchunks = (d.p.vocab + kChunk - 1) / kChunk;
  DeviceArray<Lse> states(static_cast<std::size_t>(d.p.rows * nchunks));
  DeviceArray<float> target_logit = poisoned<float>(static_cast<std::size_t>(d.p.rows));
  allow_smem(linear_logp_state_kernel, kSmem1);
  const dim3 grid(grid_dim(d.p.rows, tile::kM), static_cast<unsigned>(nchunks));
  launch_region("linear_logp.lse", [&] {
    linear_logp_state_kernel<<<grid, tile::kThreads, kSmem1>>>(d.h, d.w, nchunks, d.ids.get(), states.get(),
                                                               target_logit.get());
    check_launch("linear_logp_state_kernel");
    launch_row_logp(states.get(), d.p.rows, nchunks, target_logit.get(), RowTargets{d.ids.get(), 0, false}, logp,
                    lse);
  });
}

// Vocabulary columns per backward slab: a multiple of kChunk, G near kGradBudget elements.
std::int64_t slab_width(std::int64_t rows, std::int64_t vocab) {
  const std::int64_t whole = (vocab + kChunk - 1) / kChunk * kChunk;
  const std::int64_t s = std::max<std::int64_t>(kGradBudget / rows / kChunk * kChunk, kChunk);
  return std::min({s, whole, kMaxSlab});
}

ws1::Tensors forward(std::string_view op, const ws1::Tensors& in) {
  const Inputs d = upload(op, in, false);
  if (d.p.rows == 0) return {{"logp", ws1::Tensor(ws1::DType::kF32, d.p.lead)}};
  DeviceArray<float> logp = poisoned<float>(static_cast<std::size_t>(d.p.rows));
  row_stats(d, logp.get(), nullptr);
  return {{"logp", download_f32(logp, d.p.lead)}};
}

ws1::Tensors backward(std::string_view op, const ws1::Tensors& in) {
  const Inputs d = upload(op, in, true);
  const auto& p = d.p;
  ws1::Shape dh_shape = p.lead;
  dh_shape.push_back(p.width);
  if (p.rows == 0)
    return {{"dhidden", ws1::Tensor(ws1::DType::kBF16, dh_shape)},
            {"dweight", ws1::Tensor(ws1::DType::kBF16, p.weight->shape())}};
  const DeviceArray<float> dy = upload_f32(*p.dy);
  DeviceArray<float> lse = poisoned<float>(static_cast<std::size_t>(p.rows));
  DeviceArray<bf16> dhidden = poisoned<bf16>(static_cast<std::size_t>(p.rows * p.width));
  DeviceArray<bf16> dweight = poisoned<bf16>(static_cast<std::size_t>(p.vocab * p.width));
  {
    DeviceArray<float> logp(static_cast<std::size_t>(p.rows));
    row_stats(d, logp.get(), lse.get());
  }
  const std::int64_t slab = slab_width(p.rows, p.vocab);
  DeviceArray<bf16> g_hi(static_cast<std::size_t>(p.rows * slab)), g_lo(g_hi.size());
  DeviceArray<float> partial(slab < p.vocab ? static_cast<std::size_t>(p.rows * p.width) : 0);
  allow_smem(linear_logp_grad_kernel, kSmem1);
  allow_smem(linear_logp_dhidden_kernel, kSmem2);
  allow_smem(linear_logp_dweight_kernel, kSmem1);
  launch_region("linear_logp.grad", [&] {
    for (std::int64_t v0 = 0; v0 < p.vocab; v0 += slab) {
      const std::int64_t v_end = std::min(v0 + slab, p.vocab), n = v_end - v0;
      const dim3 grad_grid(grid_dim(p.rows, tile::kM), grid_dim(n, tile::kN));
      linear_logp_grad_kernel<<<grad_grid, tile::kThreads, kSmem1>>>(d.h, d.w, v0, v_end, d.ids.get(), dy.get(),
                                                                     lse.get(), bits(g_hi), bits(g_lo), slab);
      check_launch("linear_logp_grad_kernel");
      if (p.width == 0) continue;  // empty gradients: nothing to launch
      // G [rows, n] of the slab (row stride S) and W's rows [v0, v_end).
      const Matrix ghi = tile::matrix(g_hi.get(), slab, p.rows, n), glo = tile::matrix(g_lo.get(), slab, p.rows, n);
      const Matrix w_slab = tile::matrix(d.weight.get() + v0 * p.width, p.width, n, p.width);
      const dim3 dh_grid(grid_dim(p.rows, tile::kM), grid_dim(p.width, tile::kN));
      linear_logp_dhidden_kernel<<<dh_grid, tile::kThreads, kSmem2>>>(ghi, glo, w_slab, partial.get(), v0 == 0,
                                                                      v_end == p.vocab, bits(dhidden));
      check_launch("linear_logp_dhidden_kernel");
      const dim3 dw_grid(grid_dim(n, tile::kM), grid_dim(p.width, tile::kN));
      linear_logp_dweight_kernel<<<dw_grid, tile::kThreads, kSmem1>>>(ghi, d.h, v0, bits(dweight));
      check_launch("linear_logp_dweight_kernel");
    }
  });
  return {{"dhidden", download_bf16(dhidden, dh_shape)}, {"dweight", download_bf16(dweight, p.weight->shape())}};
}

}  // namespace
}  // namespace logprob

namespace {

constexpr std::string_view kOp = "linear_logp";

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] { return logprob::forward(kOp, in); });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] { return logprob::backward(kOp, in); });
}

}  // namespace

const CudaOp& linear_logp_cuda() {
  static const CudaOp op{kOp, forward, backward, "linear_logp_state_kernel,logprob_row_kernel",
                         "linear_logp_state_kernel,logprob_row_kernel,linear_logp_grad_kernel,"
                         "linear_logp_dhidden_kernel,linear_logp_dweight_kernel"};
  return op;
}

}  // namespace ws1cuda

// linear_logp on cuda_bf16 (lib/ops/linear_logp.cpp states the definition): logp[t] =
// logits[t, y] - logsumexp(logits[t]) with logits = hidden @ weight^T, FLOAT32 out, without the
// [T, V] logits in memory; backward dhidden = G @ W and dweight = G^T @ hidden (bf16) with
// G = dy * (onehot(y) - softmax(logits)).
//
// The logits are det_gemm's tensor-core product (det_gemm_wgmma.cuh: wgmma from TMA-loaded
// shared memory, FP32 accumulation from zero over H in increasing 16-wide k steps, no shards)
// with a fused epilogue in place of its store: a logit's bits depend on its row of hidden and
// its row of weight only, never on the tile, the grid or the number of rows, so forward and
// backward see the same logits. Kernels, in launch order:
//   wgmma_gemm_kernel + RowLse  logits in 128 x 256 tiles; per tile each consumer thread takes,
//                               for each of its two rows, the max, then the sum of
//                               expf(x - max), of its 64 logits of the row (columns in
//                               increasing order, columns >= V left out); the 4 lanes of a row
//                               merge by a fixed xor butterfly (1, 2) (lse_merge). One (max,
//                               sum) per (row, 256-wide column tile); the lane holding a row's
//                               target logit writes it.
//   logprob_row_kernel          (logp.cu) the tile states of a row merged left to right: lse,
//                               logp = target logit - lse.
// Backward, after the same two kernels (lse of every row), per vocabulary slab [v0, v0 + S)
// (S a multiple of 1024 sized so the G scratch stays near 2^26 elements):
//   wgmma_gemm_kernel + Grad    the slab's logits again (the same bits), G = dy * (onehot -
//                               expf(x - lse)) in FP32 (the CPU's operations), stored as two
//                               bf16 [T, S] scratches G_hi = bf16(G), G_lo = bf16(G - G_hi): the
//                               tensor cores take bf16, and G alone in bf16 would add up to
//                               |dhidden| * 2^-9 to dhidden (0.03 at |dhidden| ~ 16, next to the
//                               gradient atol 0.05); hi + lo keeps ~16 bits.
//   wgmma_gemm_kernel           dhidden[T, H] (+)= (G_hi + G_lo)_slab @ W[slab] (det_gemm's
//                               product with A in two parts, Problem::a_lo): shards of 512
//                               vocabulary columns, each summed from zero from G_hi, then from
//                               G_lo, all of them folded in FP32 in vocabulary order; the FP32
//                               total of the previous slabs is the next slab's start
//                               (Problem::c_in), so the fold is the same whatever S is (S
//                               depends on T; the result must not); the last slab rounds once.
//   wgmma_gemm_kernel           dweight[slab, H] = (G_hi + G_lo)_slab^T @ hidden (det_gemm's
//                               product with A in two parts, its store): each element sums the
//                               tokens in increasing 16-wide steps from G_hi, then from G_lo,
//                               in shards of 512 above 16384 tokens (promote_long_k), folded in
//                               FP32, rounded once (fixed for a given call: the parameter
//                               gradient reduces over the call's tokens). G_hi alone put 2 of
//                               16384 elements of the smoke scaled_logit dweight past atol on
//                               the H200 (|hidden| large there).
// A hidden width that is not a multiple of 8 (TMA needs 16-byte row strides) is uploaded with
// its rows padded by zero columns: the products' zeros add nothing (TMA reads zeros past H all
// the same).
// Memory besides inputs and outputs: tile states rows x V/256 x 8 B; G_hi and G_lo rows x S x
// 2 B each and, with more than one slab, FP32 dhidden partials rows x H x 4 B (at 8192 x 151936
// x 4096: S = 8192, 128 MiB each, 384 MiB in all, and 39 MiB of tile states). No atomics; every launch's result is fixed by
// its inputs.
// Not bit-equal to cpu_bf16: the tensor cores' k16 sums differ from the CPU's 32-wide FMA chains,
// the lse runs in the tile order above, dhidden folds 512-wide shards, and G enters the products
// as two bf16 parts.
#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string_view>

#include "det_gemm_wgmma.cuh"
#include "logprob.cuh"
#include "ws1cuda/launch_region.cuh"
#include "registry.hpp"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

namespace ws1cuda {
namespace logprob {
namespace {

using detgemm::Major;

constexpr std::int64_t kGradBudget = std::int64_t{1} << 26;  // G scratch elements per slab (about)

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

constexpr int kTileAcc = detgemm::kFusedBN / 2;  // a consumer thread's logits of a tile
static_assert(sizeof(Lse) == 8 && alignof(Lse) == 8);

// Forward epilogue: the (max, sum) of each row's logits in the tile, and the target's logit.
struct RowLse {
  Lse* states;  // [rows][tiles]
  std::int64_t tiles;
  const std::int64_t* targets;
  float* target_logit;
  __device__ void operator()(const float (&res)[kTileAcc], const detgemm::Fragment& f) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = f.row0 + 8 * h;
      float m = -INFINITY;
#pragma unroll
      for (int j = 0; j < kTileAcc / 4; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float x = res[4 * j + 2 * h + e];
          if (f.col0 + 8 * j + e < f.N) m = x > m ? x : m;
        }
      Lse st{m, 0.0f};
      if (m != -INFINITY) {
#pragma unroll
        for (int j = 0; j < kTileAcc / 4; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (f.col0 + 8 * j + e < f.N) st.sum = __fadd_rn(st.sum, expf(__fsub_rn(res[4 * j + 2 * h + e], m)));
      }
      // The 4 lanes of the row: butterfly over lane bits 0 and 1 (lse_merge commutes, so the
      // lanes agree).
#pragma unroll
      for (int off = 1; off <= 2; off <<= 1)
        lse_merge(st, Lse{__shfl_xor_sync(0xffffffffu, st.max, off), __shfl_xor_sync(0xffffffffu, st.sum, off)});
      if (row >= f.M) continue;
      if ((f.lane & 3) == 0) states[row * tiles + f.tn] = st;
      const std::int64_t y = targets[row];
#pragma unroll
      for (int j = 0; j < kTileAcc / 4; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          if (f.col0 + 8 * j + e == y) target_logit[row] = res[4 * j + 2 * h + e];
    }
  }
};

// Backward epilogue: G of the slab's columns (product column c is vocabulary column v0 + c)
// into g_hi and g_lo [rows, ldg] (ldg even): g_hi = bf16(G), g_lo = bf16(G - g_hi) (the
// difference is exact in FP32).
struct Grad {
  const std::int64_t* targets;
  const float* dy;
  const float* lse;
  std::int64_t v0;
  unsigned short* g_hi;
  unsigned short* g_lo;
  std::int64_t ldg;
  __device__ void operator()(const float (&res)[kTileAcc], const detgemm::Fragment& f) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = f.row0 + 8 * h;
      if (row >= f.M) continue;
      const std::int64_t y = targets[row] - v0;
      const float d = dy[row], l = lse[row];
#pragma unroll
      for (int j = 0; j < kTileAcc / 4; ++j) {
        const int c = f.col0 + 8 * j;  // even
        float hi[2], lo[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = expf(__fsub_rn(res[4 * j + 2 * h + e], l));
          const float gv = __fmul_rn(d, __fsub_rn(c + e == y ? 1.0f : 0.0f, p));
          hi[e] = bf16_bits_to_f32(f32_to_bf16_bits(gv));
          lo[e] = __fsub_rn(gv, hi[e]);
        }
        const std::int64_t at = static_cast<std::int64_t>(row) * ldg + c;
        store_bf16_pair(g_hi + at, c, f.N, hi[0], hi[1], true);
        store_bf16_pair(g_lo + at, c, f.N, lo[0], lo[1], true);
      }
    }
  }
};

unsigned short* bits(DeviceArray<bf16>& a) { return reinterpret_cast<unsigned short*>(a.get()); }

struct Inputs {
  ws1::ops::LinearLogpInputs p;
  DeviceArray<bf16> hidden, weight;  // rows of ld elements: H, or H padded with zero columns
  DeviceArray<std::int64_t> ids;
  std::int64_t ld = 0;
};

// t [n][H] on the device with rows of ld >= H elements (the columns past H zero).
DeviceArray<bf16> upload_rows(const ws1::Tensor& t, std::int64_t n, std::int64_t width, std::int64_t ld) {
  DeviceArray<bf16> dense = upload_bf16(t);
  if (ld == width) return dense;
  DeviceArray<bf16> padded = zeros<bf16>(static_cast<std::size_t>(n * ld));
  if (width > 0)
    WS1_CUDA(cudaMemcpy2DAsync(padded.get(), static_cast<std::size_t>(ld) * sizeof(bf16), dense.get(),
                               static_cast<std::size_t>(width) * sizeof(bf16), static_cast<std::size_t>(width) * sizeof(bf16),
                               static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice));
  return padded;
}

// Checks (ws1::ops::check_linear_logp_inputs, then this backend's extents) and uploads.
Inputs upload(std::string_view op, const ws1::Tensors& in, bool backward) {
  Inputs d{ws1::ops::check_linear_logp_inputs(op, in, backward), {}, {}, {}, 0};
  const auto& p = d.p;
  const auto tiles = [](std::int64_t n, std::int64_t t) { return (n + t - 1) / t; };
  ws1::ops::require(p.vocab <= INT_MAX && tiles(p.vocab, detgemm::kFusedBN) * tiles(p.rows, detgemm::kBM) <= INT_MAX,
                    op, "weight", "vocabulary too wide for a cuda_bf16 launch");
  ws1::ops::require(p.width <= INT_MAX - 8 && p.rows <= INT_MAX, op, "hidden",
                    "shape " + ws1::shape_string(p.hidden.shape()) + " exceeds the kernels' 32-bit extents");
  if (p.rows == 0) return d;
  d.ld = std::max<std::int64_t>((p.width + 7) / 8 * 8, 8);  // TMA: 16-byte row strides, a nonempty box
  d.hidden = upload_rows(p.hidden, p.rows, p.width, d.ld);
  d.weight = upload_rows(*p.weight, p.vocab, p.width, d.ld);
  d.ids = upload_i64(*ws1::find_tensor(in, "targets"));
  return d;
}

// The logits product of hidden with weight's rows [v0, v0 + n) (the columns of the product),
// over the padded width (its zeros add nothing).
detgemm::Problem logits_product(const Inputs& d, std::int64_t v0, std::int64_t n) {
  const int K = static_cast<int>(d.ld);
  return detgemm::product(d.hidden.get(), d.ld, Major::kK, d.weight.get() + v0 * d.ld, d.ld, Major::kK,
                          static_cast<int>(d.p.rows), static_cast<int>(n), K, 0, K, 1, nullptr, 0, true);
}

void launch(const detgemm::Problem& q) {
  if (const detgemm::Status s = detgemm::launch_product(q); !s) check(s.error, s.what);
}

// dhidden (+)= (G_hi + G_lo) · W over the slab's vocabulary [v0, v0 + n) (g_hi, g_lo [rows][ldg]):
// shards of kPromoteK columns from v0 (v0 is a multiple of kChunk, so the shards are those of
// the whole vocabulary wherever the slabs begin), each summed from G_hi, then from G_lo, each
// from zero, folded in FP32 in that order after `in` (FP32 [rows][ld], the earlier slabs' total;
// nullptr for the first slab); the total goes to `out`: FP32 [rows][ld] (it may be `in`), or,
// for the last slab, bf16 dhidden [rows][H]. The fold order is the same for every slab width
// (which depends on the number of rows; the result must not).
detgemm::Problem dhidden_product(const Inputs& d, const bf16* g_hi, const bf16* g_lo, std::int64_t ldg, std::int64_t v0,
                                 std::int64_t n, const float* in, void* out) {
  const bool last = v0 + n == d.p.vocab;
  const int K = static_cast<int>(n);
  detgemm::Problem q = detgemm::product(g_hi, ldg, Major::kK, d.weight.get() + v0 * d.ld, d.ld, Major::kMN,
                                        static_cast<int>(d.p.rows), static_cast<int>(d.p.width), K, 0, K, 1, out,
                                        last ? d.p.width : d.ld, !last);
  q.shard_len = detgemm::kPromoteK;
  q.shards = (K + detgemm::kPromoteK - 1) / detgemm::kPromoteK;
  q.split = 0;
  q.a_lo = g_lo;
  q.c_in = in;
  q.ld_in = d.ld;
  return q;
}

// dweight's rows [v0, v0 + n) = (G_hi + G_lo)ᵀ · hidden over the call's tokens (g_hi, g_lo
// [rows][ldg]): the tokens in increasing 16-wide steps, G_hi's then G_lo's, in shards of
// kPromoteK above kLongK tokens (lm_head's rule), folded in FP32, rounded once.
detgemm::Problem dweight_product(const Inputs& d, const bf16* g_hi, const bf16* g_lo, std::int64_t ldg, std::int64_t n,
                                 bf16* out) {
  const int T = static_cast<int>(d.p.rows);
  detgemm::Problem q = detgemm::product(g_hi, ldg, Major::kMN, d.hidden.get(), d.ld, Major::kMN, static_cast<int>(n),
                                        static_cast<int>(d.p.width), T, 0, T, 1, out, d.p.width, false);
  detgemm::promote_long_k(q);
  q.a_lo = g_lo;
  return q;
}

template <class Epi>
void launch_logits(const detgemm::Problem& q, const Epi& epi) {
  if (!detgemm::wgmma_applies(q)) throw std::logic_error("linear_logp: the logits product does not fit the wgmma kernel");
  if (const detgemm::Status s = detgemm::launch_wgmma_fused(q, epi); !s) check(s.error, s.what);
}

// logp and lse (unless nullptr) of every row; rows > 0.
void row_stats(const Inputs& d, float* logp, float* lse) {
  const std::int64_t tiles = (d.p.vocab + detgemm::kFusedBN - 1) / detgemm::kFusedBN;
  DeviceArray<Lse> states(static_cast<std::size_t>(d.p.rows * tiles));
  DeviceArray<float> target_logit = poisoned<float>(static_cast<std::size_t>(d.p.rows));
  launch_region("linear_logp.lse", [&] {
    launch_logits(logits_product(d, 0, d.p.vocab), RowLse{states.get(), tiles, d.ids.get(), target_logit.get()});
    launch_row_logp(states.get(), d.p.rows, tiles, target_logit.get(), RowTargets{d.ids.get(), 0, false}, logp, lse);
  });
}

// Vocabulary columns per backward slab: a multiple of kChunk, G near kGradBudget elements.
std::int64_t slab_width(std::int64_t rows, std::int64_t vocab) {
  const std::int64_t whole = (vocab + kChunk - 1) / kChunk * kChunk;
  const std::int64_t s = std::max<std::int64_t>(kGradBudget / rows / kChunk * kChunk, kChunk);
  return std::min(s, whole);
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
  DeviceArray<float> partial(slab < p.vocab ? static_cast<std::size_t>(p.rows * d.ld) : 0);
  DeviceArray<float> dw_scratch;  // the n256 tiles' running total over G_hi, G_lo and the shards
  launch_region("linear_logp.grad", [&] {
    for (std::int64_t v0 = 0; v0 < p.vocab; v0 += slab) {
      const std::int64_t v_end = std::min(v0 + slab, p.vocab), n = v_end - v0;
      launch_logits(logits_product(d, v0, n), Grad{d.ids.get(), dy.get(), lse.get(), v0, bits(g_hi), bits(g_lo), slab});
      if (p.width == 0) continue;  // empty gradients: nothing to launch
      launch(dhidden_product(d, g_hi.get(), g_lo.get(), slab, v0, n, v0 == 0 ? nullptr : partial.get(),
                             v_end == p.vocab ? static_cast<void*>(dhidden.get()) : partial.get()));
      detgemm::Problem q = dweight_product(d, g_hi.get(), g_lo.get(), slab, n, dweight.get() + v0 * p.width);
      if (dw_scratch.size() < detgemm::scratch_floats(q)) dw_scratch = DeviceArray<float>(detgemm::scratch_floats(q));
      q.scratch = dw_scratch.get();
      launch(q);
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
  static const CudaOp op{kOp, forward, backward,
                         "cuda_bf16.linear_logp.wgmma_tma.v2:wgmma_gemm_kernel_nt[128x256x64s4,row_lse],logprob_row_kernel",
                         "cuda_bf16.linear_logp.wgmma_tma.v2:wgmma_gemm_kernel_nt[128x256x64s4,row_lse],logprob_row_kernel,"
                         "wgmma_gemm_kernel_nt[128x256x64s4,grad_hi_lo],linear_logp_dhidden_kernel,"
                         "wgmma_gemm_kernel_tn[128x256x64s4,st16],fallback_gemm_kernel_fp32"};
  return op;
}

}  // namespace ws1cuda

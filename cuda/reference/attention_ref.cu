// FP32 reference on the device for attention: the definition of lib/ops/attention.cpp (its top
// comment) with its input checks (check_attention_inputs), outputs and conventions:
//   forward   o [B, Hq, Sq, D] float32;   backward dq, dk, dv (shapes of q, k, v) float32.
//   query head h reads kv head h / (Hq / Hkv); s_ij = (q_i . k_j) * scale, scale from the
//   checks (float32 of 1/sqrt(D)); key j visible to query i iff key_mask[b, j] and
//   j <= i + (Skv - Sq); P = softmax over the visible keys (max-subtracted, expf), 0 elsewhere;
//   o = P V. Backward: dP = dO Vᵀ, Dsum_i = sum_j P_ij dP_ij, dS = P ∘ (dP - Dsum),
//   dq = scale * dS K, dk = scale * dSᵀ Q and dv = Pᵀ dO summed over the query heads of the
//   group and their queries.
//   A query row with no visible key gives NaN, as the CPU reference (and PyTorch): its o and dq
//   rows, and dk, dv of every key of every kv head of that batch row.
// How: per (batch b, kv head), the G = Hq / Hkv query heads that read it are contiguous in q
// ([G * Sq, D] rows), so every product is one cublasSgemm on FP32 operands (the bf16 inputs
// widened exactly): S = Q Kᵀ [G * Sq, Skv], the row softmax in place (one block per row, own
// kernel), o = P V; backward dP = dO Vᵀ, dS in place of dP, dq = dS K, dk = dSᵀ Q (its sum over
// G * Sq rows is the group-and-queries sum), dv = Pᵀ dO. No atomics: cuBLAS's default atomics
// mode is off, so every sum has one order.
// Against the CPU reference: the GEMMs sum in cuBLAS's order, not the CPU's fma chains, and
// the softmax sum is a block tree: FP32 rounding only. Keys outside a row's causal limit enter
// the GEMMs with P = 0 (the CPU skips them): the same result for finite v, which bf16 fixtures
// always have.
#include <math_constants.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "host_vectors.cuh"
#include "reference_ops.hpp"
#include "reference_support.cuh"
#include "ws1cuda/kernel_support.cuh"
#include "ws1/op_inputs.hpp"

namespace ws1cuda::reference {
namespace {

using ws1::ops::AttentionDims;
using ws1::ops::AttentionInputs;
using ws1::ops::kAttentionOp;

constexpr const char* kEngine = "cuda_fp32 (cublasSgemm per 32-long K slice, pairwise tree, + FP32 kernels on bf16 operands widened to FP32)";
constexpr int kThreads = 256;  // a multiple of 32 (block_sum / block_max)

// Keys [0, limit) pass the causal test for query i (bottom-right alignment).
__host__ __device__ __forceinline__ std::int64_t causal_limit(std::int64_t i, std::int64_t sq, std::int64_t skv) {
  const std::int64_t l = i + (skv - sq) + 1;
  return l < 0 ? 0 : (l > skv ? skv : l);
}

// One block per row r of a group's scores s [G * Sq, Skv] (query i = r % Sq): raw q . k in,
// P out. valid: the batch row's key_mask [Skv]; empty: its rows without a visible key [Sq]
// (their P is all 0; the callers write NaN for them).
__global__ void softmax_rows_kernel(float* s, std::int64_t sq, std::int64_t skv, float scale,
                                    const std::uint8_t* valid, const std::uint8_t* empty) {
  __shared__ float scratch[32];
  const std::int64_t r = blockIdx.x, i = r % sq;
  float* row = s + r * skv;
  if (empty[i] != 0) {  // block-uniform
    for (std::int64_t j = threadIdx.x; j < skv; j += blockDim.x) row[j] = 0.0f;
    return;
  }
  const std::int64_t limit = causal_limit(i, sq, skv);
  // The score is rounded once (__fmul_rn: no fma contraction into the exponent's argument), as
  // the CPU's s = dot * scale, so the max is one of the scores the exponents see.
  float m = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < limit; j += blockDim.x) {
    if (valid[j] == 0) continue;
    const float x = __fmul_rn(row[j], scale);
    m = x > m ? x : m;
  }
  m = block_max(m, scratch);
  float sum = 0.0f;
  for (std::int64_t j = threadIdx.x; j < skv; j += blockDim.x) {
    const float e = j < limit && valid[j] != 0 ? expf(__fmul_rn(row[j], scale) - m) : 0.0f;
    row[j] = e;
    sum += e;
  }
  sum = block_sum(sum, scratch);  // its barrier orders the writes above before the reads below
  for (std::int64_t j = threadIdx.x; j < skv; j += blockDim.x) row[j] = row[j] / sum;
}

// One block per row r of P and dP [G * Sq, Skv]: dP becomes dS = P ∘ (dP - Dsum), Dsum the
// row's sum of P ∘ dP over its causal keys; 0 past the causal limit and on empty rows.
__global__ void dscores_rows_kernel(const float* p, float* dp, std::int64_t sq, std::int64_t skv,
                                    const std::uint8_t* empty) {
  __shared__ float scratch[32];
  const std::int64_t r = blockIdx.x, i = r % sq;
  const float* prow = p + r * skv;
  float* drow = dp + r * skv;
  if (empty[i] != 0) {  // block-uniform
    for (std::int64_t j = threadIdx.x; j < skv; j += blockDim.x) drow[j] = 0.0f;
    return;
  }
  const std::int64_t limit = causal_limit(i, sq, skv);
  float part = 0.0f;
  for (std::int64_t j = threadIdx.x; j < limit; j += blockDim.x) part += prow[j] * drow[j];
  const float dsum = block_sum(part, scratch);  // barrier: every read above precedes the writes
  for (std::int64_t j = threadIdx.x; j < skv; j += blockDim.x)
    drow[j] = j < limit ? prow[j] * (drow[j] - dsum) : 0.0f;
}

// dst[r, e] = src[r, e] * factor for the rows [G * Sq, D] of a group, NaN on rows whose query
// (r % Sq) has no visible key.
__global__ void store_rows_kernel(const float* src, float* dst, std::int64_t n, std::int64_t d, std::int64_t sq,
                                  const std::uint8_t* empty, float factor) {
  const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  dst[idx] = empty[(idx / d) % sq] != 0 ? CUDART_NAN_F : src[idx] * factor;
}

// dst = src * factor, or all NaN when `poison`.
__global__ void store_block_kernel(const float* src, float* dst, std::int64_t n, float factor, bool poison) {
  const std::int64_t idx = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= n) return;
  dst[idx] = poison ? CUDART_NAN_F : src[idx] * factor;
}

// A non-owning view of n floats of `a` from element `at` (a GEMM operand inside a larger array).
DeviceArray<float> view(DeviceArray<float>& a, std::int64_t at, std::int64_t n) {
  return DeviceArray<float>::borrow(a.get() + at, static_cast<std::size_t>(n));
}

// The host side of the masks: which query rows of each batch row see no key ([B, Sq], 1 =
// none), and which batch rows hold one (their dk, dv are NaN).
struct EmptyRows {
  std::vector<std::uint8_t> rows;
  std::vector<bool> batch;
};

EmptyRows empty_rows(const AttentionInputs& x) {
  const AttentionDims& n = x.n;
  EmptyRows e;
  e.rows.assign(static_cast<std::size_t>(n.b * n.sq), 0);
  e.batch.assign(static_cast<std::size_t>(n.b), false);
  for (std::int64_t b = 0; b < n.b; ++b) {
    const auto* valid = x.valid.data() + b * n.skv;
    const std::int64_t first = std::find(valid, valid + n.skv, std::uint8_t{1}) - valid;  // Skv: none
    for (std::int64_t i = 0; i < n.sq; ++i) {
      const bool none = causal_limit(i, n.sq, n.skv) <= first;
      e.rows[static_cast<std::size_t>(b * n.sq + i)] = none ? 1 : 0;
      if (none && n.skv > 0) e.batch[static_cast<std::size_t>(b)] = true;  // as the CPU's `poisoned`
    }
  }
  return e;
}

ws1::Tensors attention(const ws1::Tensors& in, cublasHandle_t h, bool backward) {
  const AttentionInputs x = ws1::ops::check_attention_inputs(in, backward);
  const AttentionDims& n = x.n;
  const ws1::Shape& q_shape = x.q->shape();
  const ws1::Shape& kv_shape = x.k->shape();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  if (n.b == 0 || n.sq == 0 || n.skv == 0) {
    // No product to run. Without keys every query row is empty (o, dq NaN); without queries
    // dk and dv are +0, as the CPU reference.
    const auto q_size = static_cast<std::size_t>(ws1::numel(q_shape));
    const auto kv_size = static_cast<std::size_t>(ws1::numel(kv_shape));
    if (!backward) return {{"o", ws1::ops::f32_tensor(q_shape, std::vector<float>(q_size, nan))}};
    return {{"dq", ws1::ops::f32_tensor(q_shape, std::vector<float>(q_size, nan))},
            {"dk", ws1::Tensor(ws1::DType::kF32, kv_shape)},
            {"dv", ws1::Tensor(ws1::DType::kF32, kv_shape)}};
  }
  const std::int64_t group = n.group();
  const int rows = extent(group * n.sq, kAttentionOp, "q");  // the rows of a group's products
  const int skv = extent(n.skv, kAttentionOp, "k");
  const int d = extent(n.d, kAttentionOp, "q");
  const std::int64_t q_block = group * n.sq * n.d, kv_block = n.skv * n.d;  // elements per group

  const EmptyRows empty = empty_rows(x);
  const DeviceArray<std::uint8_t> valid_d = to_device(x.valid), empty_d = to_device(empty.rows);
  DeviceArray<float> q = widened(*x.q), k = widened(*x.k), v = widened(*x.v);
  DeviceArray<float> dy = backward ? widened(*x.dy) : DeviceArray<float>();
  const std::size_t q_size = q.size(), kv_size = k.size();
  DeviceArray<float> o = backward ? DeviceArray<float>() : poisoned<float>(q_size);
  DeviceArray<float> dq = backward ? poisoned<float>(q_size) : DeviceArray<float>();
  DeviceArray<float> dk = backward ? poisoned<float>(kv_size) : DeviceArray<float>();
  DeviceArray<float> dv = backward ? poisoned<float>(kv_size) : DeviceArray<float>();

  for (std::int64_t b = 0; b < n.b; ++b) {
    const std::uint8_t* valid_b = valid_d.get() + b * n.skv;
    const std::uint8_t* empty_b = empty_d.get() + b * n.sq;
    for (std::int64_t kv = 0; kv < n.hkv; ++kv) {
      const std::int64_t q_at = (b * n.hq + kv * group) * n.sq * n.d;  // query heads kv*G .. kv*G+G-1
      const std::int64_t kv_at = (b * n.hkv + kv) * n.skv * n.d;
      DeviceArray<float> qg = view(q, q_at, q_block), kh = view(k, kv_at, kv_block), vh = view(v, kv_at, kv_block);

      DeviceArray<float> p = gemm(h, qg, false, kh, true, rows, skv, d);  // raw scores [G*Sq, Skv]
      softmax_rows_kernel<<<static_cast<unsigned>(rows), kThreads>>>(p.get(), n.sq, n.skv, x.scale, valid_b, empty_b);
      check_launch("softmax_rows_kernel");

      if (!backward) {
        const DeviceArray<float> og = gemm(h, p, false, vh, false, rows, d, skv);
        store_rows_kernel<<<blocks_for(q_block, kThreads), kThreads>>>(og.get(), o.get() + q_at, q_block, n.d, n.sq,
                                                                       empty_b, 1.0f);
        check_launch("store_rows_kernel(o)");
        continue;
      }
      DeviceArray<float> dog = view(dy, q_at, q_block);
      DeviceArray<float> ds = gemm(h, dog, false, vh, true, rows, skv, d);  // dP, then dS in place
      dscores_rows_kernel<<<static_cast<unsigned>(rows), kThreads>>>(p.get(), ds.get(), n.sq, n.skv, empty_b);
      check_launch("dscores_rows_kernel");

      const DeviceArray<float> dqg = gemm(h, ds, false, kh, false, rows, d, skv);
      store_rows_kernel<<<blocks_for(q_block, kThreads), kThreads>>>(dqg.get(), dq.get() + q_at, q_block, n.d, n.sq,
                                                                     empty_b, x.scale);
      check_launch("store_rows_kernel(dq)");
      const bool poison = empty.batch[static_cast<std::size_t>(b)];
      const DeviceArray<float> dkh = gemm(h, ds, true, qg, false, skv, d, rows);
      store_block_kernel<<<blocks_for(kv_block, kThreads), kThreads>>>(dkh.get(), dk.get() + kv_at, kv_block, x.scale,
                                                                       poison);
      check_launch("store_block_kernel(dk)");
      const DeviceArray<float> dvh = gemm(h, p, true, dog, false, skv, d, rows);
      store_block_kernel<<<blocks_for(kv_block, kThreads), kThreads>>>(dvh.get(), dv.get() + kv_at, kv_block, 1.0f,
                                                                       poison);
      check_launch("store_block_kernel(dv)");
    }
  }
  if (!backward) return {{"o", download_f32(o, q_shape)}};
  return {{"dq", download_f32(dq, q_shape)}, {"dk", download_f32(dk, kv_shape)}, {"dv", download_f32(dv, kv_shape)}};
}

}  // namespace

void add_attention_refs(Table& t) {
  t.emplace("attention",
            DeviceRef{kEngine, true,
                      [](const ws1::Tensors& in, const ws1::OpContext&, cublasHandle_t h) {
                        return attention(in, h, false);
                      },
                      [](const ws1::Tensors& in, const ws1::OpContext&, cublasHandle_t h) {
                        return attention(in, h, true);
                      }});
}

}  // namespace ws1cuda::reference

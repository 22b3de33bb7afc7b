// attention's backward on Hopper tensor cores (sm_90a), head_dim 128: two kernels with no atomics.
// dq per block of query rows: a first pass over the key tiles in order for each row's lse2 and
// dsum (written out for the second kernel), then a second pass for dq; dk and dv per key tile over
// the query tiles in order. Self-contained like the forward, so that a standalone probe can
// include it.
//
// What an element computes (the declared order of this backward; the op's definition is at the
// top of lib/ops/attention.cpp). Keys by rank as in the forward; x = s * (scale log2 e) with s by
// wgmma (k16 steps over d in order), for a visible (query i, key j):
//   dp = dO_i . V_j (wgmma, k16 steps over d);
//   lse2_i, dsum_i: an online softmax over the key tiles in order (the forward's: the tile's
//          maximum m by the quad butterfly, l = l 2^(m_old - m) + sum_j 2^(x - m) and the same
//          for a = sum_j 2^(x - m) dp, each tile's sum along the lane's columns in order, then the
//          quad butterfly); lse2 = m + log2(l), dsum = a / l (+inf and 0 without a visible key).
//          dsum = sum_j p_ij dp_ij equals dO_i . o_i and is formed from the same dp bits that ds
//          takes, so that a row of ds sums to ~0 however large dp (one dominant key included);
//   p = 2^(x - lse2_i) (ex2.approx of one fma), ds = p * (dp - dsum_i) (FP32), else p = ds = 0;
//   dq_i = scale * sum_j ds_ij K_j: k16 steps of keys in order (128-key tiles in order), each step
//          adding hi = bf16(ds), then lo = bf16(ds - hi) (~16 significand bits: a row of ds sums to
//          ~0, and one bf16 rounding of it breaks the gradient contract);
//   dv_j = sum_i p_ij dO_i, dk_j = scale * sum_i ds_ij Q_i: the group's query heads in order, for
//          each the 64-row query tiles counted from the batch row's q0 (so that padding on the left
//          groups the same queries into the same k16 steps), k16 steps of queries in order; ds as
//          hi then lo (fp16's 11 bits were red on outlier-channel inputs, dq and dk both), p as
//          one of two operands (BwdOperands):
//          kFp16P: p in fp16 (11 significand bits; p <= 1), one product, against an fp16 copy of
//            dO scaled per column: column d of the (batch row, kv head)'s visible rows of the group
//            is multiplied by 2^-c_d, c_d = (the exponent of its largest magnitude) - 14, so that
//            every bf16 value within 2^31 of the column's largest is exact in fp16 and nothing
//            overflows (gradients of 1e-6 as of 1e4); dv is multiplied back by 2^c_d, exactly.
//            Rows that see no key enter as zeros.
//          kBf16Split: hi then lo of p against dO in bf16 (p V cancels where dO changes sign, as
//            P V does in the forward; one bf16 rounding of p was red): two products.
// Every sum has one order fixed by the element's own keys or queries: deterministic and batch
// invariant. Rounded to bf16 once at the end; keys without a valid rank get 0 (the caller's zeros).
#pragma once

#include "attention_wgmma.cuh"

namespace ws1cuda::attn {

enum class BwdOperands { kFp16P, kBf16Split };

struct BwdArgs {
  float* lse2 = nullptr;  // [B * Hq * Sq]: written by the dq kernel's first pass, read by dk/dv
  float* dsum = nullptr;
  const unsigned* do_colmax = nullptr;  // kFp16P: [B * Hkv][128], dO's column maxima as |x|'s FP32 bits
  bool stats_given = false;  // lse2 and dsum hold the statistics already: no first pass
  const int* vis = nullptr;     // [B][Sq]
  const int* kidx = nullptr;    // [B][Skv]: the valid keys' positions by rank
  const int* nvalid = nullptr;  // [B]
  const int* q0 = nullptr;      // [B]: first query that sees a key
  bf16* dq = nullptr;           // like q
  bf16* dk = nullptr;           // like k, zeros where no valid key
  bf16* dv = nullptr;
  int b = 0, hkv = 0, sq = 0, skv = 0, group = 1;
  float scale = 0.0f, scale_log2 = 0.0f;
  int tiles_per_kv = 0;  // dq: ceil(group * Sq / kBM)
};

// ---- Shared pieces -------------------------------------------------------------------------------

// hi + lo bf16 A fragments of an FP32 C block (m64nN: 8 j + 2 r pairs per k16 step j), ~16 bits.
template <int kSteps>
__device__ __forceinline__ void split_fragments(const float (&c)[8 * kSteps], std::uint32_t (&hi)[kSteps][4],
                                                std::uint32_t (&lo)[kSteps][4]) {
#pragma unroll
  for (int j = 0; j < kSteps; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float x0 = c[8 * j + 2 * r], x1 = c[8 * j + 2 * r + 1];
      hi[j][r] = pack_bf162(x0, x1);
      lo[j][r] = pack_bf162(bf16_rest(x0), bf16_rest(x1));
    }
}

// acc (m64n128) += A B over kSteps k16 steps, hi then lo at each; B N-major in shared memory at
// `b` (k16 step j at b + 2048 j; the two 64-column halves `half` bytes apart).
template <int kSteps>
__device__ __forceinline__ void issue_split_rs(float (&acc)[64], const std::uint32_t (&hi)[kSteps][4],
                                               const std::uint32_t (&lo)[kSteps][4], std::uint32_t b,
                                               std::uint32_t half) {
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    const std::uint64_t db = detgemm::smem_desc(b + 2048 * j, half, 1024);
    wgmma_rs_m64n128k16<false>(acc, hi[j], db);
    wgmma_rs_m64n128k16<false>(acc, lo[j], db);
  }
}

// acc (m64n128) += A B over kSteps k16 steps, A in fp16 (one wgmma a step); B as issue_split_rs's.
template <int kSteps>
__device__ __forceinline__ void issue_f16_rs(float (&acc)[64], const std::uint32_t (&a)[kSteps][4], std::uint32_t b,
                                             std::uint32_t half) {
#pragma unroll
  for (int j = 0; j < kSteps; ++j) wgmma_rs_m64n128k16<true>(acc, a[j], detgemm::smem_desc(b + 2048 * j, half, 1024));
}

// ---- dO's fp16 copy (kFp16P) -----------------------------------------------------------------------

// The scale exponent of a column from its largest magnitude's FP32 bits: the exponent minus 14,
// so that the largest times 2^-c lies in [2^14, 2^15); 0 for a zero column; clamped to +-100
// (inf and NaN give inf and NaN either way).
__device__ __forceinline__ int column_exponent(unsigned bits) {
  if (bits == 0) return 0;
  const int e = static_cast<int>((bits >> 23) & 0xffu) - 127 - 14;
  return e < -100 ? -100 : (e > 100 ? 100 : e);
}
__device__ __forceinline__ float pow2(int e) { return __int_as_float((127 + e) << 23); }  // |e| <= 126

// Column maxima of dO over the rows that see a key (vis[b][i] > 0), per (batch row, kv head):
// block (kColRows rows, query head), 16 threads a row (8 columns each), atomicMax into colmax
// [B * Hkv][128] (zeroed first; a maximum has no order).
inline constexpr int kColRows = 256;
__global__ void __launch_bounds__(256) attention_do_colmax_kernel(const bf16* dout, const int* vis, int hq, int hkv,
                                                                  int sq, unsigned* colmax) {
  __shared__ unsigned part[16][kD];
  const int head = static_cast<int>(blockIdx.y), b = head / hq, i0 = static_cast<int>(blockIdx.x) * kColRows;
  const int c8 = static_cast<int>(threadIdx.x % 16) * 8, r16 = static_cast<int>(threadIdx.x / 16);
  unsigned mx[8] = {};
  for (int i = i0 + r16; i < min(i0 + kColRows, sq); i += 16) {
    if (vis[static_cast<std::int64_t>(b) * sq + i] <= 0) continue;
    const uint4 w = *reinterpret_cast<const uint4*>(dout + (static_cast<std::int64_t>(head) * sq + i) * kD + c8);
    const unsigned x[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      mx[2 * k] = max(mx[2 * k], (x[k] << 16) & 0x7fffffffu);
      mx[2 * k + 1] = max(mx[2 * k + 1], x[k] & 0x7fff0000u);
    }
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) part[r16][c8 + k] = mx[k];
  __syncthreads();
  if (threadIdx.x < kD) {
    unsigned m = 0;
    for (int r = 0; r < 16; ++r) m = max(m, part[r][threadIdx.x]);
    const int bkv = b * hkv + (head % hq) / (hq / hkv);
    if (m != 0) atomicMax(colmax + static_cast<std::int64_t>(bkv) * kD + threadIdx.x, m);
  }
}

// dO's fp16 copy: dO * 2^-c_d per column; rows that see no key become zeros. 16 threads a row.
__global__ void __launch_bounds__(256) attention_do_to_f16_kernel(const bf16* dout, const int* vis, int hq, int hkv,
                                                                  int sq, std::int64_t rows, const unsigned* colmax,
                                                                  __half* do16) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * 16 + threadIdx.x / 16;
  if (r >= rows) return;  // whole 16-lane groups
  const int c8 = static_cast<int>(threadIdx.x % 16) * 8;
  const int head = static_cast<int>(r / sq), i = static_cast<int>(r % sq), b = head / hq;
  const bool seen = vis[static_cast<std::int64_t>(b) * sq + i] > 0;
  const uint4 w = seen ? *reinterpret_cast<const uint4*>(dout + r * kD + c8) : make_uint4(0, 0, 0, 0);
  const unsigned* cm = colmax + static_cast<std::int64_t>(b * hkv + (head % hq) / (hq / hkv)) * kD + c8;
  unsigned x[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int k = 0; k < 4; ++k)
    x[k] = pack_half2(__fmul_rn(__uint_as_float(x[k] << 16), pow2(-column_exponent(cm[2 * k]))),
                      __fmul_rn(__uint_as_float(x[k] & 0xffff0000u), pow2(-column_exponent(cm[2 * k + 1]))));
  *reinterpret_cast<uint4*>(do16 + r * kD + c8) = make_uint4(x[0], x[1], x[2], x[3]);
}

// ---- dq ------------------------------------------------------------------------------------------

// CTA: the forward's row block (row_block), 3 warpgroups as the forward. Shared memory: Q and dO
// of the block (two 64-column halves each), then a ring of kDqStages (K, V) key tiles loaded as
// K is in the forward ({64 d, 128 keys} halves): K-major B for S = Q K^T and dP = dO V^T, and the
// same K bytes N-major for dq += ds K. The key tiles stream twice: the statistics pass, then dq.
inline constexpr int kDqStages = 2;
struct DqLayout {
  static constexpr int kQ = 0, kDo = 32768, kStage0 = 65536, kStageBytes = 65536;
  static constexpr int kBars = kStage0 + kDqStages * kStageBytes;  // full_q, full[S], empty[S]
  static constexpr int kBytes = kBars + 64 + 1024;
};

__global__ void __launch_bounds__(kThreads, 1)
    attention_dq_wgmma_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_do,
                              const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                              const BwdArgs p) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  using L = DqLayout;
  using namespace ws1cuda::detgemm;
  unsigned char* smem = aligned_dynamic_smem();
  const std::uint32_t base = smem_u32(smem);
  const std::uint32_t full_q = base + L::kBars, full0 = full_q + 8, empty0 = full0 + 8 * kDqStages;
  const int wg = warpgroup_index();
  const RowBlock rb = row_block(p.b, p.hkv, p.sq, p.group, p.tiles_per_kv, p.vis);
  const int passes = p.stats_given ? 1 : 2;

  if (threadIdx.x == 0) {
    mbar_init(full_q, 1);
    for (int s = 0; s < kDqStages; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, 8);  // one arrival per consumer warp
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x == 0 && rb.n_tiles > 0) {
      mbar_expect_tx(full_q, 4 * 16384);
      for (int dh = 0; dh < 2; ++dh) {
        tma_load_2d(base + L::kQ + dh * 16384, &map_q, full_q, 64 * dh, static_cast<int>(rb.q_row0));
        tma_load_2d(base + L::kDo + dh * 16384, &map_do, full_q, 64 * dh, static_cast<int>(rb.q_row0));
      }
      for (int t = 0; t < passes * rb.n_tiles; ++t) {
        const int s = t % kDqStages, key0 = (t % rb.n_tiles) * kBN;
        mbar_wait(empty0 + 8 * s, (static_cast<unsigned>(t / kDqStages) & 1u) ^ 1u);
        const std::uint32_t sk = base + L::kStage0 + s * L::kStageBytes;
        mbar_expect_tx(full0 + 8 * s, L::kStageBytes);
        for (int dh = 0; dh < 2; ++dh) {
          tma_load_3d(sk + dh * 16384, &map_k, full0 + 8 * s, 64 * dh, key0, rb.bkv);
          tma_load_3d(sk + 32768 + dh * 16384, &map_v, full0 + 8 * s, 64 * dh, key0, rb.bkv);
        }
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int c = wg - 1, tid = static_cast<int>(threadIdx.x) % 128, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, cq = lane % 4;
    const int my_row0 = rb.r0 + 64 * c + 16 * warp + g;
    const bool active = rb.r0 + 64 * c < rb.rows;
    int count[2];
    float lse[2], dsum[2], m[2], l[2], a[2];
    const auto stat_row = [&](int h) { return static_cast<std::int64_t>(rb.bkv) * rb.rows + my_row0 + 8 * h; };
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const bool in = my_row0 + 8 * h < rb.rows;
      count[h] = in ? rb.vis[(my_row0 + 8 * h) % p.sq] : 0;
      lse[h] = in && p.stats_given ? p.lse2[stat_row(h)] : INFINITY;
      dsum[h] = in && p.stats_given ? p.dsum[stat_row(h)] : 0.0f;
      m[h] = -INFINITY;
      l[h] = a[h] = 0.0f;
    }
    // The statistics of the lane's rows once the first pass has seen every tile (or none).
    const auto finish_stats = [&] {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const bool any = count[h] > 0;
        lse[h] = any ? __fadd_rn(m[h], log2f(l[h])) : INFINITY;
        dsum[h] = any ? __fdiv_rn(a[h], l[h]) : 0.0f;
        if (my_row0 + 8 * h < rb.rows && cq == 0) {
          p.lse2[stat_row(h)] = lse[h];
          p.dsum[stat_row(h)] = dsum[h];
        }
      }
    };
    if (rb.n_tiles > 0) mbar_wait(full_q, 0);
    // S and dP of key tile kt from ring slot t % kDqStages (waited, not released).
    const auto products = [&](int t, float (&sc)[64], float (&dp)[64]) {
      const int s = t % kDqStages;
      mbar_wait(full0 + 8 * s, static_cast<unsigned>(t / kDqStages) & 1u);
      const std::uint32_t sk = base + L::kStage0 + s * L::kStageBytes, sv = sk + 32768;
#pragma unroll
      for (int i = 0; i < 64; ++i) sc[i] = dp[i] = 0.0f;
      fence_acc(sc);
      fence_acc(dp);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < kD / 16; ++j) {
        const std::uint32_t a_off = (j / 4) * 16384 + c * 8192 + (j % 4) * 32, b_off = (j / 4) * 16384 + (j % 4) * 32;
        wgmma_m64n128k16<0, 0>(sc, smem_desc(base + L::kQ + a_off, 16, 1024), smem_desc(sk + b_off, 16, 1024));
      }
#pragma unroll
      for (int j = 0; j < kD / 16; ++j) {
        const std::uint32_t a_off = (j / 4) * 16384 + c * 8192 + (j % 4) * 32, b_off = (j / 4) * 16384 + (j % 4) * 32;
        wgmma_m64n128k16<0, 0>(dp, smem_desc(base + L::kDo + a_off, 16, 1024), smem_desc(sv + b_off, 16, 1024));
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_acc(sc);
      fence_acc(dp);
    };
    const auto release = [&](int t) {
      __syncwarp();  // the lanes' shared-memory reads of the stage come before the release
      if (lane == 0) mbar_arrive(empty0 + 8 * (t % kDqStages));
    };
    const auto visible = [&](int kt, int i) { return kt * kBN + 8 * (i / 4) + 2 * cq + (i % 2) < count[(i / 2) % 2]; };
    // Ring slots 0 .. n_tiles - 1: the statistics pass; then dq.
    if (passes == 2) {
      for (int kt = 0; kt < rb.n_tiles; ++kt) {
        if (active) {
          float sc[64], dp[64];
          products(kt, sc, dp);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            float mx = -INFINITY;
#pragma unroll
            for (int q = 0; q < 16; ++q)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int i = 4 * q + 2 * h + e;
                mx = fmaxf(mx, visible(kt, i) ? sc[i] : -INFINITY);
              }
            mx = quad_max4(mx);
            // No key of this tile visible to the row: nothing changes (every lane still takes
            // part in the butterflies, whose shuffles name the whole warp).
            const bool none = mx == -INFINITY;
            const float m_new = none ? m[h] : fmaxf(m[h], __fmul_rn(mx, p.scale_log2));
            const float alpha = none ? 1.0f : ex2(__fsub_rn(m[h], m_new));
            float sum = 0.0f, dsp = 0.0f;
#pragma unroll
            for (int q = 0; q < 16; ++q)
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int i = 4 * q + 2 * h + e;
                const float pr = visible(kt, i) ? ex2(__fmaf_rn(sc[i], p.scale_log2, -m_new)) : 0.0f;
                sum = __fadd_rn(sum, pr);
                dsp = __fmaf_rn(pr, dp[i], dsp);
              }
            sum = quad_sum4(sum);
            dsp = quad_sum4(dsp);
            if (!none) {
              l[h] = __fmaf_rn(l[h], alpha, sum);
              a[h] = __fmaf_rn(a[h], alpha, dsp);
              m[h] = m_new;
            }
          }
        } else {
          mbar_wait(full0 + 8 * (kt % kDqStages), static_cast<unsigned>(kt / kDqStages) & 1u);
        }
        release(kt);
      }
      if (active) finish_stats();
    }
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    for (int kt = 0; kt < rb.n_tiles; ++kt) {
      const int t = (passes - 1) * rb.n_tiles + kt;
      if (active) {
        float sc[64], dp[64];
        products(t, sc, dp);
#pragma unroll
        for (int i = 0; i < 64; ++i) {
          const int h = (i / 2) % 2;
          sc[i] = visible(kt, i) ? __fmul_rn(ex2(__fmaf_rn(sc[i], p.scale_log2, -lse[h])), __fsub_rn(dp[i], dsum[h]))
                                 : 0.0f;
        }
        std::uint32_t hi[8][4], lo[8][4];
        split_fragments<8>(sc, hi, lo);
        fence_acc(acc);
        wgmma_fence();
        issue_split_rs<8>(acc, hi, lo, base + L::kStage0 + (t % kDqStages) * L::kStageBytes, 16384);
        wgmma_commit();
        wgmma_wait<0>();
        fence_acc(acc);
      } else {
        mbar_wait(full0 + 8 * (t % kDqStages), static_cast<unsigned>(t / kDqStages) & 1u);
      }
      release(t);
    }
    if (active)
      store_rows(cq, [&](int i, int) { return __fmul_rn(acc[i], p.scale); }, [&](int h) -> bf16* {
        const int r = my_row0 + 8 * h;
        return r < rb.rows ? p.dq + (static_cast<std::int64_t>(rb.bkv) * rb.rows + r) * kD : nullptr;
      });
  }
#endif
}

// ---- dk, dv --------------------------------------------------------------------------------------

// CTA: one (batch row, kv head) and 128 keys by rank; consumer warpgroup c owns keys 64 c ..
// 64 c + 63. Shared memory: K and V of the tile ({64 d, 128 keys} halves: A of S^T = K Q^T and
// dP^T = V dO^T), then a ring of kKvStages (Q, dO) 64-row query tiles ({64 d, 64 rows} halves:
// K-major B of those products, N-major B of dv += P^T dO and dk += dS^T Q) and the tile's lse2,
// dsum and vis (64 each, written by the producer's second warp: it arrives on the stage's full
// barrier beside the copies' transaction count). kFp16P: each stage also holds dO's fp16 copy
// (N-major B of dv), and the ring has three stages instead of four.
inline constexpr int kQt = 64;
template <BwdOperands kOps>
struct KvLayout {
  static constexpr bool kF16 = kOps == BwdOperands::kFp16P;
  static constexpr int kStages = kF16 ? 3 : 4;
  static constexpr int kCopyBytes = kF16 ? 49152 : 32768;  // Q, dO (and dO16) of a stage (TMA)
  static constexpr int kK = 0, kV = 32768, kStage0 = 65536, kStageBytes = kCopyBytes + 1024;
  static constexpr int kDo16 = 32768;  // within a stage (kF16)
  static constexpr int kLse = kCopyBytes, kDsum = kLse + 256, kVis = kDsum + 256;  // within a stage
  static constexpr int kBars = kStage0 + kStages * kStageBytes;  // full_kv, full[S], empty[S]
  static constexpr int kBytes = kBars + 128 + 1024;
  static_assert(kStageBytes % 1024 == 0, "stages keep the 1024-byte alignment of 128-byte swizzles");
};

// map_do16: dO's fp16 copy (kFp16P; unused otherwise).
template <BwdOperands kOps>
__global__ void __launch_bounds__(kThreads, 1)
    attention_dkdv_wgmma_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_do,
                                const __grid_constant__ CUtensorMap map_k, const __grid_constant__ CUtensorMap map_v,
                                const __grid_constant__ CUtensorMap map_do16, const BwdArgs p) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  using L = KvLayout<kOps>;
  constexpr int kKvStages = L::kStages;
  using namespace ws1cuda::detgemm;
  unsigned char* smem = aligned_dynamic_smem();
  const std::uint32_t base = smem_u32(smem);
  const std::uint32_t full_kv = base + L::kBars, full0 = full_kv + 8, empty0 = full0 + 8 * kKvStages;
  const int wg = warpgroup_index();

  // Key tiles heaviest first: tile kt is seen by the queries from i_first on.
  const int nkv = p.b * p.hkv;
  const int bkv = static_cast<int>(blockIdx.x) % nkv, kt = static_cast<int>(blockIdx.x) / nkv, b = bkv / p.hkv;
  const int nvalid = p.nvalid[b], first = kt * kBN;
  if (first >= nvalid) return;  // CTA-uniform, before any barrier is used
  const int* kidx = p.kidx + static_cast<std::int64_t>(b) * p.skv;
  const int* vis = p.vis + static_cast<std::int64_t>(b) * p.sq;
  const int q0 = p.q0[b];
  const int i_first = max(kidx[first] - (p.skv - p.sq), 0);
  const int u_first = (i_first - q0) / kQt;
  const int per_head = max((p.sq - q0 + kQt - 1) / kQt - u_first, 0);
  const int steps = p.group * per_head;
  const int head0 = b * p.group * p.hkv + (bkv % p.hkv) * p.group;  // the group's first query head
  const auto step_head = [&](int st) { return head0 + st / per_head; };
  const auto step_row = [&](int st) { return q0 + (u_first + st % per_head) * kQt; };

  if (threadIdx.x == 0) {
    mbar_init(full_kv, 1);
    for (int s = 0; s < kKvStages; ++s) {
      mbar_init(full0 + 8 * s, 1 + 32);  // the copies' thread, the statistics warp
      mbar_init(empty0 + 8 * s, 256);    // every consumer thread: the statistics warp writes the stage
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x == 0) {
      mbar_expect_tx(full_kv, 65536);
      for (int dh = 0; dh < 2; ++dh) {
        tma_load_3d(base + L::kK + dh * 16384, &map_k, full_kv, 64 * dh, first, bkv);
        tma_load_3d(base + L::kV + dh * 16384, &map_v, full_kv, 64 * dh, first, bkv);
      }
      for (int st = 0; st < steps; ++st) {
        const int s = st % kKvStages;
        mbar_wait(empty0 + 8 * s, (static_cast<unsigned>(st / kKvStages) & 1u) ^ 1u);
        const std::uint32_t sq = base + L::kStage0 + s * L::kStageBytes;
        mbar_expect_tx(full0 + 8 * s, L::kCopyBytes);
        for (int dh = 0; dh < 2; ++dh) {
          tma_load_3d(sq + dh * 8192, &map_q, full0 + 8 * s, 64 * dh, step_row(st), step_head(st));
          tma_load_3d(sq + 16384 + dh * 8192, &map_do, full0 + 8 * s, 64 * dh, step_row(st), step_head(st));
          if constexpr (L::kF16)
            tma_load_3d(sq + L::kDo16 + dh * 8192, &map_do16, full0 + 8 * s, 64 * dh, step_row(st), step_head(st));
        }
      }
    } else if (threadIdx.x / 32 == 1) {
      // Rows past Sq: lse2 = +inf, dsum = 0, vis = 0 (no key visible).
      const int ln = static_cast<int>(threadIdx.x) % 32;
      for (int st = 0; st < steps; ++st) {
        const int s = st % kKvStages;
        mbar_wait(empty0 + 8 * s, (static_cast<unsigned>(st / kKvStages) & 1u) ^ 1u);
        unsigned char* stage = smem + L::kStage0 + s * L::kStageBytes;
        const std::int64_t hrow = static_cast<std::int64_t>(step_head(st)) * p.sq;
#pragma unroll
        for (int k = 0; k < 2; ++k) {
          const int r = ln + 32 * k, i = step_row(st) + r;
          const bool in = i < p.sq;
          reinterpret_cast<float*>(stage + L::kLse)[r] = in ? p.lse2[hrow + i] : INFINITY;
          reinterpret_cast<float*>(stage + L::kDsum)[r] = in ? p.dsum[hrow + i] : 0.0f;
          reinterpret_cast<int*>(stage + L::kVis)[r] = in ? vis[i] : 0;
        }
        mbar_arrive(full0 + 8 * s);
      }
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int c = wg - 1, tid = static_cast<int>(threadIdx.x) % 128, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, cq = lane % 4;
    const int my_key0 = first + 64 * c + 16 * warp + g;  // the lane's key ranks: my_key0, my_key0 + 8
    float dk[64], dv[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) dk[i] = dv[i] = 0.0f;
    mbar_wait(full_kv, 0);
    const std::uint32_t sk = base + L::kK + c * 8192, sv = base + L::kV + c * 8192;
    for (int st = 0; st < steps; ++st) {
      const int s = st % kKvStages;
      const std::uint32_t sq = base + L::kStage0 + s * L::kStageBytes, sdo = sq + 16384;
      const unsigned char* stage = smem + L::kStage0 + s * L::kStageBytes;
      const float* lse = reinterpret_cast<const float*>(stage + L::kLse);
      const float* dsum = reinterpret_cast<const float*>(stage + L::kDsum);
      const int* seen = reinterpret_cast<const int*>(stage + L::kVis);
      mbar_wait(full0 + 8 * s, static_cast<unsigned>(st / kKvStages) & 1u);
      float sc[32], dp[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) sc[i] = dp[i] = 0.0f;
      fence_acc(sc);
      fence_acc(dp);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < kD / 16; ++j) {
        const std::uint32_t a_off = (j / 4) * 16384 + (j % 4) * 32, b_off = (j / 4) * 8192 + (j % 4) * 32;
        wgmma_m64n64k16<0, 0>(sc, smem_desc(sk + a_off, 16, 1024), smem_desc(sq + b_off, 16, 1024));
      }
#pragma unroll
      for (int j = 0; j < kD / 16; ++j) {
        const std::uint32_t a_off = (j / 4) * 16384 + (j % 4) * 32, b_off = (j / 4) * 8192 + (j % 4) * 32;
        wgmma_m64n64k16<0, 0>(dp, smem_desc(sv + a_off, 16, 1024), smem_desc(sdo + b_off, 16, 1024));
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_acc(sc);
      fence_acc(dp);
      // sc: p^T, dp: ds^T (rows: keys my_key0 + 8 h; columns: queries 8 n + 2 cq + e).
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const int h = (i / 2) % 2, col = 8 * (i / 4) + 2 * cq + (i % 2);
        const bool visible = my_key0 + 8 * h < seen[col];
        const float pr = visible ? ex2(__fmaf_rn(sc[i], p.scale_log2, -lse[col])) : 0.0f;
        sc[i] = pr;
        dp[i] = visible ? __fmul_rn(pr, __fsub_rn(dp[i], dsum[col])) : 0.0f;
      }
      std::uint32_t phi[4][4], plo[4][4], dhi[4][4], dlo[4][4];
      if constexpr (L::kF16) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) phi[j][r] = pack_half2(sc[8 * j + 2 * r], sc[8 * j + 2 * r + 1]);
      } else {
        split_fragments<4>(sc, phi, plo);
      }
      split_fragments<4>(dp, dhi, dlo);
      fence_acc(dv);
      fence_acc(dk);
      wgmma_fence();
      if constexpr (L::kF16)
        issue_f16_rs<4>(dv, phi, sq + L::kDo16, 8192);
      else
        issue_split_rs<4>(dv, phi, plo, sdo, 8192);
      issue_split_rs<4>(dk, dhi, dlo, sq, 8192);
      wgmma_commit();
      wgmma_wait<0>();
      fence_acc(dv);
      fence_acc(dk);
      mbar_arrive(empty0 + 8 * s);
    }
    const auto key_row = [&](bf16* out) {
      return [=](int h) -> bf16* {
        const int rank = my_key0 + 8 * h;
        return rank < nvalid ? out + (static_cast<std::int64_t>(bkv) * p.skv + kidx[rank]) * kD : nullptr;
      };
    };
    store_rows(cq, [&](int i, int) { return __fmul_rn(dk[i], p.scale); }, key_row(p.dk));
    const unsigned* domax = p.do_colmax + static_cast<std::int64_t>(bkv) * kD;
    store_rows(
        cq,
        [&](int i, int) {  // kFp16P: times 2^c_d of the element's column, exact
          return L::kF16 ? __fmul_rn(dv[i], pow2(column_exponent(domax[8 * (i / 4) + 2 * cq + (i % 2)]))) : dv[i];
        },
        key_row(p.dv));
  }
#endif
}

// ---- Host ------------------------------------------------------------------------------------------

enum class BwdRun { kAll, kStatsGiven, kDqOnly, kDkDvOnly };

// Device memory the backward needs beside its inputs and outputs: lse2 and dsum per query row,
// and (kFp16P) dO's column maxima and its fp16 copy.
inline std::size_t bwd_workspace_bytes(int b, int hq, int hkv, int sq, BwdOperands ops = BwdOperands::kFp16P) {
  const std::size_t rows = static_cast<std::size_t>(b) * hq * sq;
  if (ops == BwdOperands::kBf16Split) return 2 * rows * sizeof(float);
  return (2 * rows + static_cast<std::size_t>(b) * hkv * kD) * 4 + 255 + rows * kD * sizeof(__half);
}

// The backward: q, dout [B, Hq, Sq, 128]; k, v [B, Hkv, Skv, 128] (with a key mask, each (b, kv
// head)'s valid keys packed in order, as the forward takes them; kidx maps a rank back to its
// key for dk and dv); dq like q; dk, dv like k, zero-filled by the caller; vis, kidx, nvalid, q0
// as attention_prep_kernel makes them; workspace: bwd_workspace_bytes (of the same ops). run:
// kAll, or a probe's hooks: the workspace already holds lse2 and dsum (and dO's copy), and the dq
// kernel makes one pass (kStatsGiven), or only one of the two kernels runs (kDqOnly, kDkDvOnly;
// the statistics given). ops: dv's operands (BwdOperands).
inline Status launch_attention_bwd(const bf16* q, const bf16* k, const bf16* v, const bf16* dout, bf16* dq, bf16* dk,
                                   bf16* dv, const int* vis, const int* kidx, const int* nvalid, const int* q0, int b,
                                   int hq, int hkv, int sq, int skv, float scale, void* workspace,
                                   BwdRun run = BwdRun::kAll, cudaStream_t stream = nullptr,
                                   BwdOperands ops = BwdOperands::kFp16P) {
  if (b * hq * sq == 0) return {};
  const std::int64_t heads_q = static_cast<std::int64_t>(b) * hq, heads_kv = static_cast<std::int64_t>(b) * hkv;
  const std::int64_t rows = heads_q * sq;
  auto* lse2 = static_cast<float*>(workspace);
  auto* colmax = reinterpret_cast<unsigned*>(lse2 + 2 * rows);
  const std::uintptr_t f16_at = (reinterpret_cast<std::uintptr_t>(colmax + heads_kv * kD) + 255) / 256 * 256;
  auto* do16 = reinterpret_cast<__half*>(f16_at);
  Status st;
  const int group = hq / hkv;
  const bool f16 = ops == BwdOperands::kFp16P;
  const BwdArgs a{.lse2 = lse2, .dsum = lse2 + rows, .do_colmax = colmax, .stats_given = run != BwdRun::kAll,
                  .vis = vis, .kidx = kidx, .nvalid = nvalid, .q0 = q0, .dq = dq, .dk = dk, .dv = dv, .b = b,
                  .hkv = hkv, .sq = sq, .skv = skv, .group = group, .scale = scale,
                  .scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.4426950408889634),
                  .tiles_per_kv = (group * sq + kBM - 1) / kBM};
  cudaError_t e = cudaSuccess;
  CUtensorMap mq, mdo, mk, mv, mdo16 = {};
  // dq: Q and dO as the forward's Q (rows of 128), K and V in {64, 128 keys} boxes.
  if (!(st = detgemm::make_map(mq, q, kD, rows, kD, 64, kBM))) return st;
  if (!(st = detgemm::make_map(mdo, dout, kD, rows, kD, 64, kBM))) return st;
  if (!(st = make_map_3d(mk, k, kD, skv, heads_kv, kBN))) return st;
  if (!(st = make_map_3d(mv, v, kD, skv, heads_kv, kBN))) return st;
  if (run != BwdRun::kDkDvOnly) {
    e = cudaFuncSetAttribute(attention_dq_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, DqLayout::kBytes);
    if (e != cudaSuccess) return {e, "cudaFuncSetAttribute(attention_dq_wgmma_kernel)"};
    attention_dq_wgmma_kernel<<<static_cast<unsigned>(heads_kv * a.tiles_per_kv), kThreads, DqLayout::kBytes,
                                stream>>>(mq, mdo, mk, mv, a);
    if ((e = cudaGetLastError()) != cudaSuccess) return {e, "attention_dq_wgmma_kernel launch"};
  }
  if (run == BwdRun::kDqOnly) return {};
  if (f16) {
    if (run == BwdRun::kAll) {  // dO's fp16 copy: the column maxima, then the conversion
      if ((e = cudaMemsetAsync(colmax, 0, heads_kv * kD * 4, stream)) != cudaSuccess)
        return {e, "cudaMemsetAsync (dO's column maxima)"};
      attention_do_colmax_kernel<<<dim3(static_cast<unsigned>((sq + kColRows - 1) / kColRows),
                                        static_cast<unsigned>(heads_q)),
                                   256, 0, stream>>>(dout, vis, hq, hkv, sq, colmax);
      if ((e = cudaGetLastError()) != cudaSuccess) return {e, "attention_do_colmax_kernel launch"};
      attention_do_to_f16_kernel<<<static_cast<unsigned>((rows + 15) / 16), 256, 0, stream>>>(dout, vis, hq, hkv, sq,
                                                                                              rows, colmax, do16);
      if ((e = cudaGetLastError()) != cudaSuccess) return {e, "attention_do_to_f16_kernel launch"};
    }
    if (!(st = make_map_3d(mdo16, do16, kD, sq, heads_q, kQt, CU_TENSOR_MAP_DATA_TYPE_FLOAT16))) return st;
  }
  // dk, dv: Q and dO per head ([B * Hq][Sq][D], rows past Sq read as zeros) in 64-row boxes.
  if (!(st = make_map_3d(mq, q, kD, sq, heads_q, kQt))) return st;
  if (!(st = make_map_3d(mdo, dout, kD, sq, heads_q, kQt))) return st;
  const auto run_dkdv = [&](auto kernel, int bytes) -> Status {
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (err != cudaSuccess) return {err, "cudaFuncSetAttribute(attention_dkdv_wgmma_kernel)"};
    kernel<<<static_cast<unsigned>(heads_kv * ((skv + kBN - 1) / kBN)), kThreads, bytes, stream>>>(mq, mdo, mk, mv,
                                                                                                 mdo16, a);
    if ((err = cudaGetLastError()) != cudaSuccess) return {err, "attention_dkdv_wgmma_kernel launch"};
    return {};
  };
  return f16 ? run_dkdv(attention_dkdv_wgmma_kernel<BwdOperands::kFp16P>, KvLayout<BwdOperands::kFp16P>::kBytes)
             : run_dkdv(attention_dkdv_wgmma_kernel<BwdOperands::kBf16Split>, KvLayout<BwdOperands::kBf16Split>::kBytes);
}

}  // namespace ws1cuda::attn

// attention on cuda_bf16: causal GQA scaled dot-product attention, forward and backward, with
// bf16 tensor-core MMA (mma.sync m16n8k16, bf16 inputs, FP32 accumulate; no TF32 anywhere).
// The op's contract (shapes, key_mask, bottom-right causal mask, scale, what a row without a
// visible key gives) is the cpu_bf16 candidate's: see the top of lib/ops/attention.cpp.
//
// Key order (the rule that makes a row's bits independent of Sq, padding and the batch, as on
// the CPU): the keys of a batch row are its VALID keys in index order, cut into tiles of 64 by
// rank (tile t = valid keys of rank [64t, 64t + 64)). attention_prep_kernel builds that list
// (kidx), its length, and per query row the number of valid keys it sees (vis: always a prefix
// of the list). Every reduction over keys runs over these tiles in tile order; invisible keys
// of a tile get probability exactly 0 (a select, never -inf arithmetic); rows past a tensor's
// end are zero-filled.
//
// At head_dim 128 (Qwen3's) the forward and the backward run on the tensor-core kernels of
// attention_wgmma.cuh and attention_wgmma_bwd.cuh (TMA, wgmma, warp specialisation; 128-key tiles
// by rank, P V in fp16; their own declared orders are those files' comments), after
// attention_prep_kernel and, with a key mask that hides a key, attention_pack_keys_kernel. Every
// other head_dim runs the kernels below.
//
// Kernels (128 threads = 4 warps; a warp owns 16 rows of a 64-row tile; D is zero-padded to
// DP in {32, 64, 128, 256} in shared memory, so any head_dim 1..256 works):
// - attention_fwd_kernel, one block per (b, h, 64 query rows). Per key tile, in order:
//   S = Q K^T by MMA (k-steps of 16 over d in order); per row x = S * scale, masked;
//   m_new = max(m, tile max), alpha = expf(m - m_new), p = expf(x - m_new) (FP32);
//   tile_sum = fixed tree (each lane its 16 keys in order, then a quad butterfly);
//   l = fma(l, alpha, tile_sum); acc = acc * alpha + P V (MMA with P as a bf16 hi + lo pair,
//   unlike FlashAttention's single bf16 P: o cancels where V changes sign, and x64 outlier
//   channels made one rounding of P exceed the contract row on the H200; k-steps of 16 keys
//   in order, hi then lo at each step). A row with no visible key in a tile
//   keeps m, l, acc exactly (alpha = 1, p = 0). o = acc / l rounded to bf16 once;
//   LSE = m + logf(l) (+inf and o = 0 for a row without keys). In backward mode the same
//   kernel writes LSE and Dsum = dO . o (FP32 o, as the CPU; per-lane fma chain then a quad
//   butterfly) instead of o.
// - attention_dq_kernel, one block per (b, h, 64 query rows, 128-column chunk of dq): per key
//   tile in order, S and dP = dO V^T by MMA, P = expf(S * scale - LSE), dS = P (dP - Dsum)
//   (FP32), dq += dS K by MMA with dS split in two bf16 parts (below); dq * scale rounded once.
// - attention_dkdv_kernel, one block per (b, kv head, key tile, 128-column chunk): a warp owns
//   16 keys; for each query head of the group in head order, for each 64-row query tile in
//   order: S^T = K Q^T, dP^T = V dO^T, P, dS as above, dk += dS^T Q (dS split) and
//   dv += P^T dO (P split in two bf16 parts) by MMA (k-steps of 16 queries in order; the tile is taken
//   in four passes of 16 queries to save registers, which keeps that order). The query tiles are
//   counted from the batch row's first query that sees any key (q0), not from row 0, so a
//   left-padded grid groups the same queries into the same MMA k-steps as the unpadded run;
//   pad query rows (dy = 0) add exact zeros. dk * scale and dv rounded once; masked-out keys
//   get 0.
// Precision of the backward MMA operands: Q, K, V, dO are bf16 inputs (exact). P >= 0, but dO
// changes sign, so P^T dO cancels as P V does in the forward pass: with P rounded once to bf16,
// dv was red at 8192 tokens on heavy-tailed and outlier-channel inputs (up to 2.45x the row on
// the H200: a key seen by ~30000 query rows); P enters as a hi + lo pair as well. dS too: a row of dS
// sums to ~0 (sum_j P_ij dP_ij = Dsum_i), so dq = dS K and dk = dS^T Q are small results of
// cancelling terms and one bf16 rounding per dS element (amplified by large channels of K or
// Q) breaks the bf16 gradient contract. dS is therefore fed as hi = bf16(dS) and
// lo = bf16(dS - hi) (the FP32 subtraction is exact), ~16 significand bits, and at every
// k-step the MMA adds hi * B, then lo * B, into the same FP32 accumulator: one fixed order per
// element, the same for every tile, so determinism and batch invariance are unchanged. Cost: a
// second MMA per split product (at D = 128: +1/3 of dq's MMAs, +1/2 of dk/dv's).
// No atomics; every sum has one order fixed by the row's own keys (forward, dq) or by the
// queries counted from q0 (dk, dv), so results are deterministic and batch invariant.
//
// Bits against cpu_bf16: NOT equal. The CPU's dot products are sequential fma chains over d and
// its P V uses FP32 P; the MMA sums 16 products per step in its own order, P and dS enter as
// bf16 hi + lo pairs (~16 bits; the CPU's are FP32); CUDA's expf/logf are not glibc's.
// Same tile boundaries, same online-softmax steps, same masking rule, so the invariance
// argument carries over. Caveats (inputs the runner never makes): a non-finite v of a key that
// is valid but causally invisible to a row inside that row's last tile reaches it as 0 * inf; a
// row whose accumulator is exactly -0 may read +0 after an extra all-masked tile.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "attention_wgmma_bwd.cuh"
#include "registry.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/launch_region.cuh"
#include "ws1cuda/kernel_support.cuh"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

using ws1::ops::AttentionDims;
using ws1::ops::AttentionInputs;
using ws1::ops::kAttentionOp;

constexpr int kTile = 64;      // keys per tile (= the CPU's kTile) and rows per query tile
constexpr int kWarps = 4;      // a warp owns 16 rows (queries or keys) of a tile
constexpr int kThreads = 32 * kWarps;
constexpr int kPad = 8;        // bf16 per smem row beyond DP: conflict-free ldmatrix rows
constexpr int kMaxHeadDim = 256;
constexpr int kChunkCols = 128;  // dq / dk / dv columns per block (register budget)
constexpr int kPassQ = 16;       // queries per pass of attention_dkdv_kernel (register budget)
// The P V operand of the head_dim-128 forward (attention_wgmma.cuh).
constexpr attn::PvMode kForwardPv = attn::PvMode::kFp16;
static_assert(kPassQ % 16 == 0 && kTile % kPassQ == 0, "a pass is whole MMA k-steps of a tile");

template <int DP>
constexpr int row_stride() { return DP + kPad; }
template <int DP>
constexpr int tile_elems() { return kTile * row_stride<DP>(); }

// ---- kernel arguments ------------------------------------------------------------------------

struct Params {
  const bf16* q = nullptr;   // [B, Hq, Sq, D]
  const bf16* k = nullptr;   // [B, Hkv, Skv, D]
  const bf16* v = nullptr;
  const bf16* dy = nullptr;  // dy.o, backward
  const int* kidx = nullptr;    // [B, Skv]: positions of the valid keys, in order
  const int* nvalid = nullptr;  // [B]
  const int* vis = nullptr;     // [B, Sq]: valid keys query i sees
  const int* q0 = nullptr;      // [B]: first query that sees a key (Sq if none)
  bf16* o = nullptr;
  bf16* dq = nullptr;
  bf16* dk = nullptr;
  bf16* dv = nullptr;
  float* lse = nullptr;   // [B, Hq, Sq]
  float* dsum = nullptr;  // [B, Hq, Sq]
  int b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, d = 0, group = 1;
  float scale = 1.0f;
};

// ---- MMA building blocks -----------------------------------------------------------------------
// Fragment layouts of mma.m16n8k16 (lane = 4 g + c): A a0 = (row g, cols 2c, 2c+1), a1 = row
// g + 8, a2 = cols + 8, a3 = both; B b0 = (k 2c, 2c+1; col g), b1 = k + 8; C c0, c1 = (row g,
// cols 2c, 2c+1), c2, c3 = row g + 8.

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p))
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p))
               : "memory");
}

// c += A B for one 16 x 8 x 16 step (bf16 inputs, FP32 accumulate).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                         std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (lower address) = lo
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

// acc (16 x 8 NS: NS blocks of 8 columns, C layout) = A B^T over the DP columns: A = rows
// [a_row, a_row + 16) of tile a, B = rows [b_row, b_row + 8 NS) of tile b (both [64][DP + kPad]
// in shared memory). Per element the MMA adds k-steps of 16 columns in order from +0; an
// element's bits depend only on its own A row and B row.
template <int DP, int NS>
__device__ __forceinline__ void warp_abt(const bf16* a, int a_row, const bf16* b, int b_row,
                                         float (&acc)[NS][4]) {
  constexpr int ld = row_stride<DP>();
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int n = 0; n < NS; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
  const bf16* a_lane = a + (a_row + (lane & 15)) * ld + (lane >> 4) * 8;
  const bf16* b_lane = b + (b_row + (lane & 7) + ((lane >> 4) << 3)) * ld + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int kk = 0; kk < DP / 16; ++kk) {
    std::uint32_t fa[4];
    ldmatrix_x4(fa, a_lane + kk * 16);
#pragma unroll
    for (int np = 0; np < NS / 2; ++np) {
      std::uint32_t fb[4];  // B fragments of column blocks 2 np and 2 np + 1
      ldmatrix_x4(fb, b_lane + np * 16 * ld + kk * 16);
      mma_bf16(acc[2 * np], fa, fb[0], fb[1]);
      mma_bf16(acc[2 * np + 1], fa, fb[2], fb[3]);
    }
  }
}

// acc (16 x 8 NB) += (A_1 + ... + A_n) B: each A = 16 x 16 KS in A fragments (a[kk] holds
// columns 16 kk .. 16 kk + 15), B = rows [b_row, b_row + 16 KS) of tile b, columns
// [col0, col0 + 8 NB). k-steps of 16 rows of B in order; within a k-step the A's are added in
// argument order (A_1 B, then A_2 B, ...), the same fixed order for every element and tile.
template <int DP, int KS, int NB, class... A>
__device__ __forceinline__ void warp_ab(const bf16* b, int b_row, int col0, float (&acc)[NB][4],
                                        const A&... a) {
  static_assert((std::is_same_v<A, std::uint32_t[KS][4]> && ...));
  constexpr int ld = row_stride<DP>();
  const int lane = threadIdx.x & 31;
  const bf16* b_lane = b + (b_row + (lane & 7) + ((lane >> 3) & 1) * 8) * ld + col0 + (lane >> 4) * 8;
#pragma unroll
  for (int kk = 0; kk < KS; ++kk)
#pragma unroll
    for (int np = 0; np < NB / 2; ++np) {
      std::uint32_t fb[4];
      ldmatrix_x4_trans(fb, b_lane + kk * 16 * ld + np * 16);
      (mma_bf16(acc[2 * np], a[kk], fb[0], fb[1]), ...);
      (mma_bf16(acc[2 * np + 1], a[kk], fb[2], fb[3]), ...);
    }
}

// x - bf16(x), exact in FP32 (the rounding error of RNE to 8 significand bits fits in 24); 0
// where hi is not finite, so an overflow to inf does not turn hi + lo into inf - inf.
__device__ __forceinline__ float bf16_residual(float x, bf16 hi) {
  const float h = __bfloat162float(hi);
  return isfinite(h) ? __fsub_rn(x, h) : 0.0f;
}

// The A fragments (bf16, RNE) of a 16 x 8 NS FP32 block held in C layout (register j of
// fragment kk holds the pair (c[2 kk + j / 2][2 (j % 2)], c[2 kk + j / 2][2 (j % 2) + 1])), as
// two fragment sets with hi + lo = c to ~16 significand bits:
// hi = bf16(c), lo = bf16(c - hi). For dS, whose rows sum to ~0 (dS_ij = P_ij (dP_ij - Dsum_i)):
// one bf16 rounding of each element is large against the cancelling sums dS K and dS^T Q.
template <int NS>
__device__ __forceinline__ void to_split_a_fragments(const float (&c)[NS][4], std::uint32_t (&hi)[NS / 2][4],
                                                     std::uint32_t (&lo)[NS / 2][4]) {
#pragma unroll
  for (int kk = 0; kk < NS / 2; ++kk)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float(&src)[4] = c[2 * kk + j / 2];
      const float x0 = src[2 * (j % 2)], x1 = src[2 * (j % 2) + 1];
      const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
      hi[kk][j] = *reinterpret_cast<const std::uint32_t*>(&h);
      lo[kk][j] = pack_bf16(bf16_residual(x0, h.x), bf16_residual(x1, h.y));
    }
}

// ---- tiles through shared memory ----------------------------------------------------------------

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool fill) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(fill ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Fills a [64][DP + kPad] tile: row r from src(r) (nullptr: zeros), columns d .. DP-1 zero.
// 16-byte cp.async when rows are 16-byte aligned (d % 8 == 0; `any` is a valid address for
// the zero-fill copies), else element by element. The caller commits and waits.
template <int DP, class Src>
__device__ __forceinline__ void load_tile(bf16* tile, int d, const bf16* any, Src src) {
  constexpr int ld = row_stride<DP>(), chunks = DP / 8;
  if (d % 8 == 0) {
    for (int c = threadIdx.x; c < kTile * chunks; c += kThreads) {
      const int r = c / chunks, col = (c % chunks) * 8;
      const bf16* row = src(r);
      const bool fill = row != nullptr && col < d;
      cp_async_16(tile + r * ld + col, fill ? row + col : any, fill);
    }
  } else {
    for (int e = threadIdx.x; e < kTile * DP; e += kThreads) {
      const int r = e / DP, col = e % DP;
      const bf16* row = src(r);
      tile[r * ld + col] = row != nullptr && col < d ? row[col] : to_bf16(0.0f);
    }
  }
}

// Rows [i0, i0 + 64) of one head's [S, D] matrix (nullptr past `rows`).
struct RowSource {
  const bf16* base;
  int i0, rows, d;
  __device__ const bf16* operator()(int r) const {
    const int i = i0 + r;
    return i < rows ? base + static_cast<std::int64_t>(i) * d : nullptr;
  }
};

// The valid keys of rank [64 t, 64 t + 64) of one kv head (nullptr past the valid count).
struct KeySource {
  const bf16* base;
  const int* kidx;
  int first, nvalid, d;
  __device__ const bf16* operator()(int r) const {
    const int rank = first + r;
    return rank < nvalid ? base + static_cast<std::int64_t>(kidx[rank]) * d : nullptr;
  }
};

// Two adjacent output columns (col even) of a bf16 row of d elements.
__device__ __forceinline__ void store_pair(bf16* row, int col, int d, float x0, float x1) {
  if ((d & 1) == 0 && col + 1 < d) {
    *reinterpret_cast<__nv_bfloat162*>(row + col) = __floats2bfloat162_rn(x0, x1);
    return;
  }
  if (col < d) row[col] = to_bf16(x0);
  if (col + 1 < d) row[col + 1] = to_bf16(x1);
}

__device__ __forceinline__ float quad_sum(float v) {  // lanes 4g .. 4g+3, fixed butterfly
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// ---- preparation: the valid-key list ----------------------------------------------------------------

constexpr int kPrepThreads = 256;

// One block per batch row: kidx (valid key positions in order, by a block-wide ballot scan),
// nvalid, q0 and vis[i] = #{valid j : j <= i + Skv - Sq} (binary search in kidx).
__global__ void __launch_bounds__(kPrepThreads)
    attention_prep_kernel(const std::uint8_t* valid, int sq, int skv, int* kidx, int* nvalid, int* vis,
                          int* q0) {
  __shared__ int warp_count[kPrepThreads / 32];
  __shared__ int base;
  const int b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::uint8_t* vb = valid + static_cast<std::int64_t>(b) * skv;
  int* kb = kidx + static_cast<std::int64_t>(b) * skv;
  if (threadIdx.x == 0) base = 0;
  __syncthreads();
  for (int j0 = 0; j0 < skv; j0 += kPrepThreads) {
    const int j = j0 + static_cast<int>(threadIdx.x);
    const bool flag = j < skv && vb[j] != 0;
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) warp_count[warp] = __popc(ballot);
    __syncthreads();
    int before = base;
    for (int w = 0; w < warp; ++w) before += warp_count[w];
    if (flag) kb[before + __popc(ballot & ((1u << lane) - 1u))] = j;
    __syncthreads();
    if (threadIdx.x == 0)
      for (int w = 0; w < kPrepThreads / 32; ++w) base += warp_count[w];
    __syncthreads();
  }
  const int n = base, offset = skv - sq;
  if (threadIdx.x == 0) {
    nvalid[b] = n;
    q0[b] = n == 0 ? sq : min(max(kb[0] - offset, 0), sq);
  }
  for (int i = threadIdx.x; i < sq; i += kPrepThreads) {
    const int limit = i + offset;  // keys j <= limit pass the causal test
    int lo = 0, hi = n;            // upper_bound of limit in kb[0, n)
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (kb[mid] <= limit) lo = mid + 1;
      else hi = mid;
    }
    vis[static_cast<std::int64_t>(b) * sq + i] = lo;
  }
}

// With a key mask, the wgmma forward reads each (b, kv head)'s valid keys packed in order
// (rank r at row r) and zeros after them: one 16-byte chunk per thread, grid-stride.
__global__ void attention_pack_keys_kernel(const bf16* k, const bf16* v, const int* kidx, const int* nvalid, int hkv,
                                           int skv, bf16* kp, bf16* vp) {
  constexpr int kChunks = attn::kD / 8;
  const std::int64_t total = static_cast<std::int64_t>(gridDim.y) * skv * kChunks;  // gridDim.y = B * Hkv
  const int bkv = static_cast<int>(blockIdx.y), b = bkv / hkv, n = nvalid[b];
  const std::int64_t head = static_cast<std::int64_t>(bkv) * skv * attn::kD;
  for (std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; c < total / gridDim.y;
       c += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int rank = static_cast<int>(c / kChunks), col = static_cast<int>(c % kChunks) * 8;
    const std::int64_t dst = head + static_cast<std::int64_t>(rank) * attn::kD + col;
    uint4 kw = make_uint4(0, 0, 0, 0), vw = kw;
    if (rank < n) {
      const std::int64_t src = head + static_cast<std::int64_t>(kidx[static_cast<std::int64_t>(b) * skv + rank]) * attn::kD + col;
      kw = *reinterpret_cast<const uint4*>(k + src);
      vw = *reinterpret_cast<const uint4*>(v + src);
    }
    *reinterpret_cast<uint4*>(kp + dst) = kw;
    *reinterpret_cast<uint4*>(vp + dst) = vw;
  }
}

// ---- forward ----------------------------------------------------------------------------------------

// One key tile's online-softmax step for the lane's two rows (r = 0: row g, r = 1: row g + 8
// of the warp's 16). s: raw scores in C layout, turned into P (FP32, exactly 0 where masked).
// count[r]: keys of this tile row r sees (<= 0 none, >= 64 all). Returns alpha per row.
__device__ __forceinline__ void softmax_step(float (&s)[8][4], const int (&count)[2], float scale,
                                             float (&m)[2], float (&l)[2], float (&alpha)[2]) {
  const int c2 = 2 * (threadIdx.x & 3);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool seen = 8 * n + c2 + e < count[r];
        s[n][2 * r + e] = seen ? __fmul_rn(s[n][2 * r + e], scale) : -INFINITY;
        tile_max = fmaxf(tile_max, s[n][2 * r + e]);
      }
    tile_max = quad_max(tile_max);
    const bool none = tile_max == -INFINITY;  // quad-uniform: the row sees no key here
    const float m_new = none ? m[r] : fmaxf(m[r], tile_max);
    alpha[r] = none ? 1.0f : expf(__fsub_rn(m[r], m_new));  // m = -inf: alpha = 0
    float sum = 0.0f;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool seen = 8 * n + c2 + e < count[r];
        const float p = seen ? expf(__fsub_rn(s[n][2 * r + e], m_new)) : 0.0f;
        s[n][2 * r + e] = p;
        sum = __fadd_rn(sum, p);
      }
    sum = quad_sum(sum);
    if (!none) l[r] = __fmaf_rn(l[r], alpha[r], sum);
    m[r] = m_new;
  }
}

template <int DP>
constexpr int fwd_smem_bytes() { return 3 * tile_elems<DP>() * static_cast<int>(sizeof(bf16)); }

// Block: (b, h, 64 query rows), heaviest query tiles first. kBackward: write LSE and Dsum
// instead of o.
template <int DP, bool kBackward>
__global__ void __launch_bounds__(kThreads) attention_fwd_kernel(Params p) {
  constexpr int NB = DP / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sq_tile = reinterpret_cast<bf16*>(smem);
  bf16* sk_tile = sq_tile + tile_elems<DP>();
  bf16* sv_tile = sk_tile + tile_elems<DP>();

  const int heads = p.b * p.hq, qtiles = (p.sq + kTile - 1) / kTile;
  const int bh = static_cast<int>(blockIdx.x) % heads;
  const int i0 = (qtiles - 1 - static_cast<int>(blockIdx.x) / heads) * kTile;
  const int b = bh / p.hq, kvh = b * p.hkv + (bh % p.hq) / p.group;
  const int* vis = p.vis + static_cast<std::int64_t>(b) * p.sq;
  const int n_tiles = (vis[min(p.sq, i0 + kTile) - 1] + kTile - 1) / kTile;
  const int nvalid = p.nvalid[b];
  const int* kidx = p.kidx + static_cast<std::int64_t>(b) * p.skv;
  const bf16* qh = p.q + static_cast<std::int64_t>(bh) * p.sq * p.d;
  const bf16* kh = p.k + static_cast<std::int64_t>(kvh) * p.skv * p.d;
  const bf16* vh = p.v + static_cast<std::int64_t>(kvh) * p.skv * p.d;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int row0 = i0 + 16 * warp + (lane >> 2);  // the lane's rows: row0, row0 + 8
  int count[2];
  for (int r = 0; r < 2; ++r) count[r] = row0 + 8 * r < p.sq ? vis[row0 + 8 * r] : 0;

  if (n_tiles > 0) {
    load_tile<DP>(sq_tile, p.d, qh, RowSource{qh, i0, p.sq, p.d});
    load_tile<DP>(sk_tile, p.d, kh, KeySource{kh, kidx, 0, nvalid, p.d});
    cp_async_commit();
  }
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float acc[NB][4];
#pragma unroll
  for (int n = 0; n < NB; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;

  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait_all();
    __syncthreads();  // K(t) (and Q) landed; every warp is done with V(t-1)
    load_tile<DP>(sv_tile, p.d, vh, KeySource{vh, kidx, t * kTile, nvalid, p.d});
    cp_async_commit();
    float s[8][4];
    warp_abt<DP, 8>(sq_tile, 16 * warp, sk_tile, 0, s);
    const int seen[2] = {count[0] - t * kTile, count[1] - t * kTile};
    float alpha[2];
    softmax_step(s, seen, p.scale, m, l, alpha);
#pragma unroll
    for (int n = 0; n < NB; ++n) {
      acc[n][0] = __fmul_rn(acc[n][0], alpha[0]);
      acc[n][1] = __fmul_rn(acc[n][1], alpha[0]);
      acc[n][2] = __fmul_rn(acc[n][2], alpha[1]);
      acc[n][3] = __fmul_rn(acc[n][3], alpha[1]);
    }
    // P as a bf16 hi + lo pair: o = sum p·v cancels where v changes sign (x64 outlier channels
    // make that visible against the contract row), so one bf16 rounding of P is not enough.
    std::uint32_t pa_hi[4][4], pa_lo[4][4];
    to_split_a_fragments(s, pa_hi, pa_lo);
    cp_async_wait_all();
    __syncthreads();  // V(t) landed; every warp is done with K(t)
    if (t + 1 < n_tiles) {
      load_tile<DP>(sk_tile, p.d, kh, KeySource{kh, kidx, (t + 1) * kTile, nvalid, p.d});
      cp_async_commit();
    }
    warp_ab<DP, 4, NB>(sv_tile, 0, 0, acc, pa_hi, pa_lo);
  }

  const int c2 = 2 * (lane & 3);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + 8 * r;
    const bool any = count[r] > 0;  // then l >= 1 (the maximum's p is 1)
    float dsum = 0.0f;
#pragma unroll
    for (int n = 0; n < NB; ++n) {
      const int col = 8 * n + c2;
      const float o0 = any ? __fdiv_rn(acc[n][2 * r], l[r]) : 0.0f;
      const float o1 = any ? __fdiv_rn(acc[n][2 * r + 1], l[r]) : 0.0f;
      if constexpr (kBackward) {
        if (i < p.sq) {
          const bf16* dy = p.dy + (static_cast<std::int64_t>(bh) * p.sq + i) * p.d;
          if (col < p.d) dsum = __fmaf_rn(to_f32(dy[col]), o0, dsum);
          if (col + 1 < p.d) dsum = __fmaf_rn(to_f32(dy[col + 1]), o1, dsum);
        }
      } else {
        if (i < p.sq) store_pair(p.o + (static_cast<std::int64_t>(bh) * p.sq + i) * p.d, col, p.d, o0, o1);
      }
    }
    if constexpr (kBackward) {
      dsum = quad_sum(dsum);
      if (i < p.sq && (lane & 3) == 0) {
        const std::int64_t at = static_cast<std::int64_t>(bh) * p.sq + i;
        p.lse[at] = any ? __fadd_rn(m[r], logf(l[r])) : INFINITY;
        p.dsum[at] = dsum;
      }
    }
  }
}

// ---- backward ------------------------------------------------------------------------------------

// P and dS of a 16 x 8 NS block in C layout, in place: s (raw scores) becomes P, dp becomes dS.
// seen(r, e, n) says whether element (row half r, column 8 n + 2 c + e) is visible; lse and
// dsum(r, e, n) the element's row statistics.
template <int NS, class Seen, class Lse, class Dsum>
__device__ __forceinline__ void probs_and_grads(float (&s)[NS][4], float (&dp)[NS][4], float scale,
                                                Seen seen, Lse lse, Dsum dsum) {
#pragma unroll
  for (int n = 0; n < NS; ++n)
#pragma unroll
    for (int r = 0; r < 2; ++r)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int x = 2 * r + e;
        const bool ok = seen(r, e, n);
        const float pr = ok ? expf(__fsub_rn(__fmul_rn(s[n][x], scale), lse(r, e, n))) : 0.0f;
        dp[n][x] = ok ? __fmul_rn(pr, __fsub_rn(dp[n][x], dsum(r, e, n))) : 0.0f;
        s[n][x] = pr;
      }
}

template <int DP>
constexpr int dq_smem_bytes() { return 4 * tile_elems<DP>() * static_cast<int>(sizeof(bf16)); }

// Block: (b, h, 64 query rows, dq column chunk), heaviest query tiles first.
template <int DP, int DC>
__global__ void __launch_bounds__(kThreads) attention_dq_kernel(Params p) {
  constexpr int NB = DC / 8, chunks = DP / DC;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sq_tile = reinterpret_cast<bf16*>(smem);
  bf16* sdo_tile = sq_tile + tile_elems<DP>();
  bf16* sk_tile = sdo_tile + tile_elems<DP>();
  bf16* sv_tile = sk_tile + tile_elems<DP>();

  const int heads = p.b * p.hq, qtiles = (p.sq + kTile - 1) / kTile;
  const int chunk = static_cast<int>(blockIdx.x) % chunks, rest = static_cast<int>(blockIdx.x) / chunks;
  const int bh = rest % heads, i0 = (qtiles - 1 - rest / heads) * kTile;
  const int b = bh / p.hq, kvh = b * p.hkv + (bh % p.hq) / p.group;
  const int* vis = p.vis + static_cast<std::int64_t>(b) * p.sq;
  const int n_tiles = (vis[min(p.sq, i0 + kTile) - 1] + kTile - 1) / kTile;
  const int nvalid = p.nvalid[b];
  const int* kidx = p.kidx + static_cast<std::int64_t>(b) * p.skv;
  const std::int64_t head_rows = static_cast<std::int64_t>(bh) * p.sq;
  const bf16* qh = p.q + head_rows * p.d;
  const bf16* dyh = p.dy + head_rows * p.d;
  const bf16* kh = p.k + static_cast<std::int64_t>(kvh) * p.skv * p.d;
  const bf16* vh = p.v + static_cast<std::int64_t>(kvh) * p.skv * p.d;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, c2 = 2 * (lane & 3);
  const int row0 = i0 + 16 * warp + (lane >> 2);
  int count[2];
  float lse[2], dsum[2];
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + 8 * r;
    const bool in = i < p.sq;
    count[r] = in ? vis[i] : 0;
    lse[r] = in ? p.lse[head_rows + i] : INFINITY;
    dsum[r] = in ? p.dsum[head_rows + i] : 0.0f;
  }

  if (n_tiles > 0) {
    load_tile<DP>(sq_tile, p.d, qh, RowSource{qh, i0, p.sq, p.d});
    load_tile<DP>(sdo_tile, p.d, dyh, RowSource{dyh, i0, p.sq, p.d});
    load_tile<DP>(sk_tile, p.d, kh, KeySource{kh, kidx, 0, nvalid, p.d});
    load_tile<DP>(sv_tile, p.d, vh, KeySource{vh, kidx, 0, nvalid, p.d});
    cp_async_commit();
  }
  float acc[NB][4];
#pragma unroll
  for (int n = 0; n < NB; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;

  for (int t = 0; t < n_tiles; ++t) {
    cp_async_wait_all();
    __syncthreads();  // K(t), V(t) landed
    float s[8][4], dp[8][4];
    warp_abt<DP, 8>(sq_tile, 16 * warp, sk_tile, 0, s);
    warp_abt<DP, 8>(sdo_tile, 16 * warp, sv_tile, 0, dp);
    __syncthreads();  // every warp is done with V(t)
    if (t + 1 < n_tiles) {
      load_tile<DP>(sv_tile, p.d, vh, KeySource{vh, kidx, (t + 1) * kTile, nvalid, p.d});
      cp_async_commit();
    }
    const int first = t * kTile;
    probs_and_grads(
        s, dp, p.scale, [&](int r, int e, int n) { return first + 8 * n + c2 + e < count[r]; },
        [&](int r, int, int) { return lse[r]; }, [&](int r, int, int) { return dsum[r]; });
    std::uint32_t ds_hi[4][4], ds_lo[4][4];
    to_split_a_fragments(dp, ds_hi, ds_lo);
    warp_ab<DP, 4, NB>(sk_tile, 0, chunk * DC, acc, ds_hi, ds_lo);
    __syncthreads();  // every warp is done with K(t)
    if (t + 1 < n_tiles) {
      load_tile<DP>(sk_tile, p.d, kh, KeySource{kh, kidx, (t + 1) * kTile, nvalid, p.d});
      cp_async_commit();
    }
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int i = row0 + 8 * r;
    if (i >= p.sq) continue;
    bf16* out = p.dq + (head_rows + i) * p.d;
#pragma unroll
    for (int n = 0; n < NB; ++n)
      store_pair(out, chunk * DC + 8 * n + c2, p.d, __fmul_rn(acc[n][2 * r], p.scale),
                 __fmul_rn(acc[n][2 * r + 1], p.scale));
  }
}

template <int DP>
constexpr int dkdv_smem_bytes() {
  return 4 * tile_elems<DP>() * static_cast<int>(sizeof(bf16)) + 3 * kTile * 4;
}

// Block: (b, kv head, key tile, dk/dv column chunk); a warp owns 16 keys of the tile.
template <int DP, int DC>
__global__ void __launch_bounds__(kThreads) attention_dkdv_kernel(Params p) {
  constexpr int NB = DC / 8, chunks = DP / DC;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16* sk_tile = reinterpret_cast<bf16*>(smem);
  bf16* sv_tile = sk_tile + tile_elems<DP>();
  bf16* sq_tile = sv_tile + tile_elems<DP>();
  bf16* sdo_tile = sq_tile + tile_elems<DP>();
  float* s_lse = reinterpret_cast<float*>(sdo_tile + tile_elems<DP>());  // per query row of the tile
  float* s_dsum = s_lse + kTile;
  int* s_vis = reinterpret_cast<int*>(s_dsum + kTile);

  const int kv_heads = p.b * p.hkv;
  const int chunk = static_cast<int>(blockIdx.x) % chunks, rest = static_cast<int>(blockIdx.x) / chunks;
  const int kvh = rest % kv_heads, t = rest / kv_heads, b = kvh / p.hkv;
  const int nvalid = p.nvalid[b], first = t * kTile;
  if (first >= nvalid) return;  // past this batch row's valid keys (block-uniform)
  const int* kidx = p.kidx + static_cast<std::int64_t>(b) * p.skv;
  const int* vis = p.vis + static_cast<std::int64_t>(b) * p.sq;
  const bf16* kh = p.k + static_cast<std::int64_t>(kvh) * p.skv * p.d;
  const bf16* vh = p.v + static_cast<std::int64_t>(kvh) * p.skv * p.d;

  // Query tiles counted from q0; the first one holding a query that sees this tile's first key.
  const int q0 = p.q0[b];
  const int i_first = max(kidx[first] - (p.skv - p.sq), 0);
  const int u_first = (i_first - q0) / kTile;
  const int per_head = max((p.sq - q0 + kTile - 1) / kTile - u_first, 0);
  const int steps = p.group * per_head;

  const auto head_rows = [&](int step) {
    return static_cast<std::int64_t>(b * p.hq + (kvh % p.hkv) * p.group + step / per_head) * p.sq;
  };
  const auto tile_row = [&](int step) { return q0 + (u_first + step % per_head) * kTile; };
  // Q rows of a step and the rows' LSE, Dsum and vis (plain stores; published by the next barrier).
  const auto load_queries = [&](int step) {
    const std::int64_t hr = head_rows(step);
    const int i0 = tile_row(step);
    load_tile<DP>(sq_tile, p.d, p.q, RowSource{p.q + hr * p.d, i0, p.sq, p.d});
    for (int r = threadIdx.x; r < kTile; r += kThreads) {
      const int i = i0 + r;
      const bool in = i < p.sq;
      s_lse[r] = in ? p.lse[hr + i] : INFINITY;
      s_dsum[r] = in ? p.dsum[hr + i] : 0.0f;
      s_vis[r] = in ? vis[i] : 0;
    }
  };
  const auto load_dy = [&](int step) {
    load_tile<DP>(sdo_tile, p.d, p.dy, RowSource{p.dy + head_rows(step) * p.d, tile_row(step), p.sq, p.d});
  };

  load_tile<DP>(sk_tile, p.d, kh, KeySource{kh, kidx, first, nvalid, p.d});
  load_tile<DP>(sv_tile, p.d, vh, KeySource{vh, kidx, first, nvalid, p.d});
  if (steps > 0) {
    load_queries(0);
    load_dy(0);
  }
  cp_async_commit();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, c2 = 2 * (lane & 3);
  const int key0 = first + 16 * warp + (lane >> 2);  // ranks of the lane's keys: key0, key0 + 8
  float dk[NB][4], dv[NB][4];
#pragma unroll
  for (int n = 0; n < NB; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.0f;

  for (int step = 0; step < steps; ++step) {
    cp_async_wait_all();
    __syncthreads();  // Q, dO and the row statistics of this step landed
    // The tile's 64 queries in passes of kPassQ (fewer live registers; per element the same
    // MMA k-steps of 16 queries in the same order as one pass).
#pragma unroll
    for (int pass = 0; pass < kTile / kPassQ; ++pass) {
      constexpr int QS = kPassQ / 8;  // 8-query column blocks of a pass
      const int qc = kPassQ * pass;   // first query column of the pass
      float s[QS][4], dp[QS][4];      // S^T and dP^T: the warp's 16 keys x kPassQ queries
      warp_abt<DP, QS>(sk_tile, 16 * warp, sq_tile, qc, s);
      warp_abt<DP, QS>(sv_tile, 16 * warp, sdo_tile, qc, dp);
      probs_and_grads(
          s, dp, p.scale, [&](int r, int e, int n) { return key0 + 8 * r < s_vis[qc + 8 * n + c2 + e]; },
          [&](int, int e, int n) { return s_lse[qc + 8 * n + c2 + e]; },
          [&](int, int e, int n) { return s_dsum[qc + 8 * n + c2 + e]; });
      std::uint32_t p_hi[QS / 2][4], p_lo[QS / 2][4], ds_hi[QS / 2][4], ds_lo[QS / 2][4];
      to_split_a_fragments(s, p_hi, p_lo);
      to_split_a_fragments(dp, ds_hi, ds_lo);
      warp_ab<DP, QS / 2, NB>(sq_tile, qc, chunk * DC, dk, ds_hi, ds_lo);
      if (pass == kTile / kPassQ - 1) {
        __syncthreads();  // every warp is done with Q and the row statistics
        if (step + 1 < steps) {
          load_queries(step + 1);
          cp_async_commit();
        }
      }
      warp_ab<DP, QS / 2, NB>(sdo_tile, qc, chunk * DC, dv, p_hi, p_lo);
    }
    __syncthreads();  // every warp is done with dO
    if (step + 1 < steps) {
      load_dy(step + 1);
      cp_async_commit();
    }
  }
  cp_async_wait_all();  // K, V copies still in flight when there was no step

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int rank = key0 + 8 * r;
    if (rank >= nvalid) continue;
    const std::int64_t at = (static_cast<std::int64_t>(kvh) * p.skv + kidx[rank]) * p.d;
#pragma unroll
    for (int n = 0; n < NB; ++n) {
      const int col = chunk * DC + 8 * n + c2;
      store_pair(p.dk + at, col, p.d, __fmul_rn(dk[n][2 * r], p.scale), __fmul_rn(dk[n][2 * r + 1], p.scale));
      store_pair(p.dv + at, col, p.d, dv[n][2 * r], dv[n][2 * r + 1]);
    }
  }
}

// ---- host --------------------------------------------------------------------------------------

// The valid-key list on the device (attention_prep_kernel's outputs).
struct KeyList {
  DeviceArray<int> kidx, nvalid, vis, q0;
};

KeyList prepare_keys(const AttentionInputs& x) {
  const AttentionDims& n = x.n;
  DeviceArray<std::uint8_t> valid(x.valid.size());
  if (valid.size() > 0)
    WS1_CUDA(cudaMemcpy(valid.get(), x.valid.data(), valid.bytes(), cudaMemcpyHostToDevice));
  KeyList keys{poisoned<int>(static_cast<std::size_t>(n.b * n.skv)), poisoned<int>(static_cast<std::size_t>(n.b)),
               poisoned<int>(static_cast<std::size_t>(n.b * n.sq)), poisoned<int>(static_cast<std::size_t>(n.b))};
  attention_prep_kernel<<<static_cast<unsigned>(n.b), kPrepThreads>>>(
      valid.get(), static_cast<int>(n.sq), static_cast<int>(n.skv), keys.kidx.get(), keys.nvalid.get(),
      keys.vis.get(), keys.q0.get());
  check_launch("attention_prep_kernel");
  return keys;
}

// Refuses what the kernels cannot take (the CPU takes any head_dim; int32 row indices).
void check_device_limits(const AttentionDims& n) {
  using ws1::ops::require;
  require(n.d <= kMaxHeadDim, kAttentionOp, "q",
          "head_dim " + std::to_string(n.d) + " exceeds the cuda_bf16 kernels' limit of " +
              std::to_string(kMaxHeadDim));
  constexpr std::int64_t kMax = std::numeric_limits<int>::max() / 2;
  require(n.sq <= kMax && n.skv <= kMax && n.b * n.hq * ((n.sq + kTile - 1) / kTile) * 2 <= kMax &&
              n.b * n.hkv * ((n.skv + kTile - 1) / kTile) * 2 <= kMax,
          kAttentionOp, "q", "shape too large for the cuda_bf16 kernels' 32-bit row and block indices");
}

Params make_params(const AttentionDims& n, float scale, const KeyList& keys) {
  Params p;
  p.kidx = keys.kidx.get();
  p.nvalid = keys.nvalid.get();
  p.vis = keys.vis.get();
  p.q0 = keys.q0.get();
  p.b = static_cast<int>(n.b);
  p.hq = static_cast<int>(n.hq);
  p.hkv = static_cast<int>(n.hkv);
  p.sq = static_cast<int>(n.sq);
  p.skv = static_cast<int>(n.skv);
  p.d = static_cast<int>(n.d);
  p.group = static_cast<int>(n.group());
  p.scale = scale;
  return p;
}

// Calls fn(std::integral_constant<int, DP>) for the padded head dim DP >= d.
template <class Fn>
void with_padded_dim(std::int64_t d, Fn&& fn) {
  if (d <= 32) fn(std::integral_constant<int, 32>{});
  else if (d <= 64) fn(std::integral_constant<int, 64>{});
  else if (d <= 128) fn(std::integral_constant<int, 128>{});
  else fn(std::integral_constant<int, 256>{});
}

template <class Kernel>
void launch(Kernel kernel, const char* name, std::int64_t blocks, int smem_bytes, const Params& p) {
  WS1_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  kernel<<<static_cast<unsigned>(blocks), kThreads, static_cast<std::size_t>(smem_bytes)>>>(p);
  check_launch(name);
}

template <int DP, bool kBackward>
void launch_forward(const Params& p) {
  const std::int64_t blocks = static_cast<std::int64_t>(p.b) * p.hq * ((p.sq + kTile - 1) / kTile);
  launch(attention_fwd_kernel<DP, kBackward>, "attention_fwd_kernel", blocks, fwd_smem_bytes<DP>(), p);
}

// The tensor-core forward takes head_dim 128 with at least one key (a tensor map has no empty
// dimension) and q's rows addressable by TMA's 32-bit coordinates; every other shape runs the
// mma.sync kernel.
bool takes_wgmma_forward(const AttentionDims& n) {
  return n.d == attn::kD && n.skv > 0 && n.b * n.hq * n.sq < (std::int64_t{1} << 31);
}

// head_dim 128: the tensor-core kernels (attention_wgmma.cuh, attention_wgmma_bwd.cuh; their
// declared orders are in those files' comments). With a key mask that hides any key, the valid
// keys are packed first. The buffers are allocated before the timed region: it holds the
// launches alone.
class WgmmaAttention {
 public:
  WgmmaAttention(const AttentionInputs& in, const KeyList& kl, bool backward)
      : x_(in), keys_(kl), masked_(std::find(in.valid.begin(), in.valid.end(), std::uint8_t{0}) != in.valid.end()) {
    const AttentionDims& n = x_.n;
    if (masked_) {
      kp_ = DeviceArray<bf16>(static_cast<std::size_t>(x_.k->numel()));
      vp_ = DeviceArray<bf16>(static_cast<std::size_t>(x_.v->numel()));
    }
    // The backward reads V as bf16 (attention_wgmma_bwd.cuh): no V workspace.
    if (!backward && kForwardPv == attn::PvMode::kFp16 && attn::fwd_wants_workspace(dim(n.hq), dim(n.hkv), dim(n.sq)))
      ws_ = DeviceArray<unsigned char>(attn::fwd_workspace_bytes(dim(n.b), dim(n.hkv), dim(n.skv)));
    if (backward)
      stats_ = DeviceArray<unsigned char>(attn::bwd_workspace_bytes(dim(n.b), dim(n.hq), dim(n.hkv), dim(n.sq)));
  }

  void forward(const DeviceArray<bf16>& q, const DeviceArray<bf16>& k, const DeviceArray<bf16>& v,
               DeviceArray<bf16>& o) {
    const AttentionDims& n = x_.n;
    pack(k, v);
    const attn::Status st = attn::launch_attention_fwd<kForwardPv>(
        q.get(), keys(k), values(v), o.get(), keys_.vis.get(), dim(n.b), dim(n.hq), dim(n.hkv), dim(n.sq),
        dim(n.skv), x_.scale, fwd_ws());
    check(st.error, st.what);
  }

  void backward(const DeviceArray<bf16>& q, const DeviceArray<bf16>& k, const DeviceArray<bf16>& v,
                const DeviceArray<bf16>& dy, DeviceArray<bf16>& dq, DeviceArray<bf16>& dk, DeviceArray<bf16>& dv) {
    const AttentionDims& n = x_.n;
    pack(k, v);
    const attn::Status st = attn::launch_attention_bwd(
        q.get(), keys(k), values(v), dy.get(), dq.get(), dk.get(), dv.get(), keys_.vis.get(), keys_.kidx.get(),
        keys_.nvalid.get(), keys_.q0.get(), dim(n.b), dim(n.hq), dim(n.hkv), dim(n.sq), dim(n.skv), x_.scale,
        stats_.get());
    check(st.error, st.what);
  }

 private:
  static int dim(std::int64_t v) { return static_cast<int>(v); }
  void pack(const DeviceArray<bf16>& k, const DeviceArray<bf16>& v) {
    if (!masked_) return;
    const AttentionDims& n = x_.n;
    const std::int64_t chunks = n.skv * (attn::kD / 8);
    const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>((chunks + 255) / 256, 1024)),
                    static_cast<unsigned>(n.b * n.hkv));
    attention_pack_keys_kernel<<<grid, 256>>>(k.get(), v.get(), keys_.kidx.get(), keys_.nvalid.get(), dim(n.hkv),
                                              dim(n.skv), kp_.get(), vp_.get());
    check_launch("attention_pack_keys_kernel");
  }
  const bf16* keys(const DeviceArray<bf16>& k) const { return masked_ ? kp_.get() : k.get(); }
  const bf16* values(const DeviceArray<bf16>& v) const { return masked_ ? vp_.get() : v.get(); }
  attn::FwdWorkspace fwd_ws() { return attn::FwdWorkspace{ws_.size() > 0 ? ws_.get() : nullptr}; }

  const AttentionInputs& x_;
  const KeyList& keys_;
  bool masked_;
  DeviceArray<bf16> kp_, vp_;
  DeviceArray<unsigned char> ws_, stats_;
};

ws1::Result<ws1::Tensors> attention_forward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kAttentionOp, [&] {
    const AttentionInputs x = ws1::ops::check_attention_inputs(in, /*backward=*/false);
    const AttentionDims& n = x.n;
    check_device_limits(n);
    DeviceArray<bf16> o = poisoned<bf16>(static_cast<std::size_t>(x.q->numel()));
    if (n.b * n.hq * n.sq > 0) {
      const KeyList keys = prepare_keys(x);
      const DeviceArray<bf16> q = upload_bf16(*x.q), k = upload_bf16(*x.k), v = upload_bf16(*x.v);
      if (takes_wgmma_forward(n)) {
        WgmmaAttention wgmma(x, keys, /*backward=*/false);
        launch_region("attention.fwd", [&] { wgmma.forward(q, k, v, o); });
      } else {
        Params p = make_params(n, x.scale, keys);
        p.q = q.get();
        p.k = k.get();
        p.v = v.get();
        p.o = o.get();
        launch_region("attention.fwd",
                      [&] { with_padded_dim(n.d, [&](auto dp) { launch_forward<decltype(dp)::value, false>(p); }); });
      }
    }
    return ws1::Tensors{{"o", download_bf16(o, x.q->shape())}};
  });
}

// Every head_dim: the mma.sync kernels (the forward in its statistics mode, dq, dk and dv).
void backward_mma(const AttentionInputs& x, const KeyList& keys, const DeviceArray<bf16>& q,
                  const DeviceArray<bf16>& k, const DeviceArray<bf16>& v, const DeviceArray<bf16>& dy,
                  DeviceArray<bf16>& dq, DeviceArray<bf16>& dk, DeviceArray<bf16>& dv) {
  const AttentionDims& n = x.n;
  DeviceArray<float> lse = poisoned<float>(static_cast<std::size_t>(n.b * n.hq * n.sq));
  DeviceArray<float> dsum = poisoned<float>(lse.size());
  Params p = make_params(n, x.scale, keys);
  p.q = q.get();
  p.k = k.get();
  p.v = v.get();
  p.dy = dy.get();
  p.dq = dq.get();
  p.dk = dk.get();
  p.dv = dv.get();
  p.lse = lse.get();
  p.dsum = dsum.get();
  launch_region("attention.bwd", [&] {
    with_padded_dim(n.d, [&](auto dp) {
      constexpr int DP = decltype(dp)::value, DC = DP < kChunkCols ? DP : kChunkCols;
      launch_forward<DP, true>(p);
      const std::int64_t chunks = DP / DC;
      launch(attention_dq_kernel<DP, DC>, "attention_dq_kernel", n.b * n.hq * ((n.sq + kTile - 1) / kTile) * chunks,
             dq_smem_bytes<DP>(), p);
      if (n.skv > 0)
        launch(attention_dkdv_kernel<DP, DC>, "attention_dkdv_kernel",
               n.b * n.hkv * ((n.skv + kTile - 1) / kTile) * chunks, dkdv_smem_bytes<DP>(), p);
    });
  });
}

ws1::Result<ws1::Tensors> attention_backward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kAttentionOp, [&] {
    const AttentionInputs x = ws1::ops::check_attention_inputs(in, /*backward=*/true);
    const AttentionDims& n = x.n;
    check_device_limits(n);
    DeviceArray<bf16> dq = poisoned<bf16>(static_cast<std::size_t>(x.q->numel()));
    // Masked-out keys get exact zeros (as the CPU); valid keys are all written by the dkdv kernel.
    DeviceArray<bf16> dk = zeros<bf16>(static_cast<std::size_t>(x.k->numel()));
    DeviceArray<bf16> dv = zeros<bf16>(static_cast<std::size_t>(x.v->numel()));
    if (n.b * n.hq * n.sq > 0) {
      const KeyList keys = prepare_keys(x);
      const DeviceArray<bf16> q = upload_bf16(*x.q), k = upload_bf16(*x.k), v = upload_bf16(*x.v);
      const DeviceArray<bf16> dy = upload_bf16(*x.dy);
      if (takes_wgmma_forward(n)) {
        WgmmaAttention wgmma(x, keys, /*backward=*/true);
        launch_region("attention.bwd", [&] { wgmma.backward(q, k, v, dy, dq, dk, dv); });
      } else {
        backward_mma(x, keys, q, k, v, dy, dq, dk, dv);
      }
    }
    return ws1::Tensors{{"dq", download_bf16(dq, x.q->shape())},
                        {"dk", download_bf16(dk, x.k->shape())},
                        {"dv", download_bf16(dv, x.v->shape())}};
  });
}

}  // namespace

const CudaOp& attention_cuda() {
  static const CudaOp op{"attention", attention_forward, attention_backward,
                         "attention_prep_kernel,attention_pack_keys_kernel (key mask),attention_v_to_f16_kernel (prefill),"
                         "attention_fwd_wgmma_kernel (head_dim 128) | "
                         "attention_fwd_kernel",
                         "attention_prep_kernel,attention_pack_keys_kernel (key mask),attention_v_to_f16_kernel (prefill),"
                         "attention_fwd_wgmma_kernel (statistics),attention_dq_wgmma_kernel,attention_dkdv_wgmma_kernel "
                         "(head_dim 128) | attention_fwd_kernel,attention_dq_kernel,attention_dkdv_kernel"};
  return op;
}

}  // namespace ws1cuda

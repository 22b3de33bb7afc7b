// attention's forward on Hopper tensor cores (sm_90a: TMA, wgmma, warp specialisation), head_dim
// 128. Self-contained (CUDA headers and det_gemm_wgmma.cuh's PTX wrappers) so that a standalone
// probe can include it; cuda/ops/attention.cu wraps it into the op.
//
// What a row computes (the declared order of this kernel; the op's definition is at the top of
// lib/ops/attention.cpp): the keys of a (batch row, kv head) are its valid keys in index order,
// cut into tiles of kBN = 128 by rank. Row i visits the tiles up to its last visible key, in
// order; per tile:
//   x_j = s_j * (scale * log2 e)  (s_j = q_i . k_j by wgmma: bf16 products, FP32 accumulation in
//         k16 steps over d in order), x_j = -inf where key j is not visible;
//   m_new = max(m, max_j x_j); alpha = 2^(m - m_new); p_j = 2^(x_j - m_new) (ex2.approx; 0 where
//         invisible); tile_sum = a fixed tree (each lane its 32 keys in column order, then a
//         quad butterfly); l = fma(l, alpha, tile_sum);
//   acc = acc * alpha + P V (wgmma, k16 steps of keys in order).
// A row that sees no key of a tile keeps m, l and acc exactly. o = acc / l, rounded to bf16
// once; a row without any visible key gives o = 0. Every quantity of row i depends only on q_i,
// the keys it sees and the tile boundaries (ranks), never on Sq, the batch, the padding, the
// other rows of its CTA or the launch: prefill, chunked prefill and decode rows agree bit for bit.
//
// The P V operand (PvMode):
//   kFp16: P and V in fp16 (11 significand bits for P, against bf16's 8: the product o = sum p v
//     cancels where v changes sign, and one bf16 rounding of P was red against the FP32 gold on
//     outlier-channel inputs). V is converted key row by key row, either before the kernel into a
//     workspace (prefill: attention_v_to_f16_kernel) or in shared memory by the producer
//     warpgroup (decode, short chunks), the same bits either way: bf16 -> fp16 is exact for 2^-17 <= |v| <= 65280 and 0; smaller magnitudes
//     round to fp16's subnormal grid (absolute error <= 2^-25). A key whose row holds a larger
//     magnitude is scaled by 2^-e (e = its bf16 exponent above 2^15, at most 15) and its p
//     multiplied by 2^e before the fp16 rounding, so the product is the same and nothing
//     overflows; the exponent depends on the key's own row only (invariance holds).
//   kBf16Split: P as a bf16 hi + lo pair (~16 bits), V in bf16 as loaded: two wgmmas per k16 step.
//
// Rows: the group's query heads are packed (as FlashAttention-3's PackGQA): the rows of one
// (batch row, kv head) are r = hl * Sq + i (hl the query head within the group), contiguous in
// q and o's [B, Hq, Sq, D] layout; a CTA takes 128 of them, so decode (Sq = 1) puts the group's
// heads in one CTA and reads the KV once per kv head. CTA = 3 warpgroups: warpgroup 0 loads (one
// thread issues the TMA copies: Q once, K and V tiles into a ring of kStages; when V is not
// converted yet, its 128 threads then convert it, one key row each); warpgroups 1 and 2 each own 64 rows (setmaxnreg
// 232 / 40). A consumer warpgroup whose rows all lie past the CTA's last row issues no wgmma.
// K and V are read through 3-D tensor maps [B * Hkv][Skv][D]: keys past Skv are zero-filled.
// With a key mask, the caller packs the valid keys of each (b, kv head) in order first.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "det_gemm_wgmma.cuh"

namespace ws1cuda::attn {

using bf16 = __nv_bfloat16;
using detgemm::Status;

enum class PvMode { kFp16, kBf16Split };

inline constexpr int kD = 128;   // head_dim this kernel takes
inline constexpr int kBM = 128;  // query rows per CTA (two consumer warpgroups of 64)
inline constexpr int kBN = 128;  // keys per tile
inline constexpr int kThreads = 384;

template <int kStages>
struct Layout {
  static constexpr int kQBytes = kBM * kD * 2;  // d halves {64 d, 128 rows} at +0, +16 KiB
  static constexpr int kKBytes = kBN * kD * 2;  // d halves {64 d, 128 keys} at +0, +16 KiB
  static constexpr int kVBytes = kBN * kD * 2;  // key halves at +0, +16 KiB; d halves {64 d, 64 keys} at +0, +8 KiB
  static constexpr int kStageBytes = kKBytes + kVBytes;
  static constexpr int kStage0 = kQBytes;
  static constexpr int kBars = kStage0 + kStages * kStageBytes;  // full_q, full_k[S], full_v[S], ready_v[S], empty[S]
  static constexpr int kExp = kBars + 128;  // (8 * (1 + 4 kStages) bytes of barriers) per stage: 128 key exponents
  static_assert(8 * (1 + 4 * kStages) <= 128, "barriers fit");
  static constexpr int kExpStride = kBN + 16;
  static constexpr int kBytes = kExp + kStages * kExpStride + 1024 /* alignment */;
};

struct FwdArgs {
  bf16* o = nullptr;         // [B * Hq * Sq][D]
  const int* vis = nullptr;  // [B][Sq]: valid keys row i sees (a prefix of the key list)
  int b = 0, hkv = 0, sq = 0, group = 1;
  float scale_log2 = 0.0f;  // scale * log2(e), rounded to FP32 once
  int tiles_per_kv = 0;     // ceil(group * Sq / kBM)
  const unsigned char* vexp = nullptr;  // kVPre: the keys' exponents, [B * Hkv][vexp_stride]
  int vexp_stride = 0;                  // ceil(Skv / kBN) * kBN
};

// V converted to fp16 before the kernel (the prefill path, where each V tile is read by many
// CTAs): v16 like v, vexp [B * Hkv][ceil(Skv / kBN) * kBN] (0 past Skv). fwd_workspace_bytes
// gives the size of one allocation holding both.
struct FwdWorkspace {
  void* base = nullptr;
};

// ---- PTX wrappers beyond det_gemm's ------------------------------------------------------------

__device__ __forceinline__ void tma_load_3d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0,
                                            int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to shared memory,
// completing on the mbarrier.
__device__ __forceinline__ void bulk_load(std::uint32_t dst, const void* src, int bytes, std::uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(reinterpret_cast<std::uint64_t>(src)), "r"(bytes), "r"(bar)
               : "memory");
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// d += A · B for one m64n128k16 step, A (64 x 16) from registers in the C-fragment order of a
// 64 x 16 block (a[0]: row g, k 2c..2c+1; a[1]: row g + 8; a[2]: k + 8; a[3]: both), B from
// shared memory through its descriptor, N-major (transposed). kF16: fp16 operands, else bf16.
template <bool kF16>
__device__ __forceinline__ void wgmma_rs_m64n128k16(float (&d)[64], const std::uint32_t (&a)[4], std::uint64_t db) {
#define WS1_WGMMA_RS(TYPE)                                                                                            \
  asm volatile(                                                                                                       \
      "{\n"                                                                                                           \
      ".reg .pred p;\n"                                                                                               \
      "setp.ne.b32 p, 1, 0;\n"                                                                                        \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "                                                \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                       \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "                              \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "                              \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "                              \
      "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n"                                                                      \
      "}\n"                                                                                                           \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),   \
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),        \
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),       \
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),       \
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),       \
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),       \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),       \
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                     \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db))
  if constexpr (kF16)
    WS1_WGMMA_RS("f16");
  else
    WS1_WGMMA_RS("bf16");
#undef WS1_WGMMA_RS
}

__device__ __forceinline__ std::uint32_t pack_half2(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);  // .x (lower address) = lo
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
__device__ __forceinline__ std::uint32_t pack_bf162(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}
// x - bf16(x), exact in FP32; 0 where hi is not finite (no inf - inf).
__device__ __forceinline__ float bf16_rest(float x) {
  const float h = __bfloat162float(__float2bfloat16_rn(x));
  return isfinite(h) ? __fsub_rn(x, h) : 0.0f;
}

// A 64 x 128 FP32 C block (m64n128 fragments: element i of the lane's row h) to bf16 rows:
// value(i, h) gives the element, dst(h) the row (nullptr: not stored). 16-byte stores, the quad
// transposing its column pairs.
template <class Value, class Dst>
__device__ __forceinline__ void store_rows(int cq, Value value, Dst dst) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    bf16* row = dst(h);
#pragma unroll
    for (int gq = 0; gq < 4; ++gq) {
      std::uint32_t x[4];
#pragma unroll
      for (int jj = 0; jj < 4; ++jj) {
        const int i = 4 * (4 * gq + jj) + 2 * h;
        x[jj] = pack_bf162(value(i, h), value(i + 1, h));
      }
      detgemm::quad_transpose(x, cq);
      if (row != nullptr) *reinterpret_cast<uint4*>(row + 32 * gq + 8 * cq) = make_uint4(x[0], x[1], x[2], x[3]);
    }
  }
}

__device__ __forceinline__ float quad_max4(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum4(float v) {  // fixed butterfly
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// ---- V to fp16 ------------------------------------------------------------------------------------

// The largest |v| of a bf16 pair as bf16 bits (monotone in the magnitude; NaN above inf).
__device__ __forceinline__ unsigned max_mag_bits(unsigned w) { return max(w & 0x7fffu, (w >> 16) & 0x7fffu); }
// A key row's exponent e from its largest magnitude's bits: bf16 biased exponent 142 holds
// [2^15, 2^16), whose largest value, 65280, is fp16-exact.
__device__ __forceinline__ int v_row_exponent(unsigned max_bits) {
  return min(15, max(0, static_cast<int>(max_bits >> 7) - 142));
}
// A bf16 pair times 2^-e (s), as an fp16 pair.
__device__ __forceinline__ unsigned v_pair_to_f16(unsigned w, float s) {
  return pack_half2(__fmul_rn(__uint_as_float(w << 16), s), __fmul_rn(__uint_as_float(w & 0xffff0000u), s));
}
__device__ __forceinline__ float pow2_neg(int e) { return __int_as_float((127 - e) << 23); }

// In shared memory: thread k (0..127) of the producer warpgroup converts key row k of the V tile
// at `v` (its two d halves: 128-byte rows of 128-byte-swizzled boxes; the swizzle only permutes
// the 16-byte chunks within a row, and the conversion is per element, so the row is read in any
// chunk order: thread k starts at chunk k % 8, which keeps a quarter-warp's accesses on distinct
// banks). Returns the key's exponent e (V row scaled by 2^-e).
__device__ __forceinline__ int convert_v_row(unsigned char* v, int k) {
  unsigned char* row = v + (k / 64) * 16384 + (k % 64) * 128;
  unsigned mx = 0;
#pragma unroll
  for (int n = 0; n < 16; ++n) {
    const int chunk = (n + k) % 8, half = n / 8;
    const uint4 w = *reinterpret_cast<const uint4*>(row + half * 8192 + chunk * 16);
    mx = max(max(max_mag_bits(w.x), max_mag_bits(w.y)), max(max(max_mag_bits(w.z), max_mag_bits(w.w)), mx));
  }
  const int e = v_row_exponent(mx);
  const float s = pow2_neg(e);
#pragma unroll
  for (int n = 0; n < 16; ++n) {
    const int chunk = (n + k) % 8, half = n / 8;
    uint4* p = reinterpret_cast<uint4*>(row + half * 8192 + chunk * 16);
    const uint4 w = *p;
    *p = make_uint4(v_pair_to_f16(w.x, s), v_pair_to_f16(w.y, s), v_pair_to_f16(w.z, s), v_pair_to_f16(w.w, s));
  }
  return e;
}

// In global memory (FwdWorkspace): the same conversion of every key row, 16 threads a row (one
// 16-byte chunk each), so a V tile converted here is bit for bit the tile convert_v_row makes.
// Rows are [B * Hkv][vexp_stride]; keys past Skv get exponent 0 and no V row.
__global__ void __launch_bounds__(256) attention_v_to_f16_kernel(const bf16* v, __half* v16, unsigned char* vexp,
                                                                 int skv, int vexp_stride, std::int64_t rows) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * 16 + threadIdx.x / 16;
  const int c = static_cast<int>(threadIdx.x % 16);
  if (r >= rows) return;  // whole 16-lane groups leave together
  const std::int64_t bkv = r / vexp_stride;
  const int key = static_cast<int>(r % vexp_stride);
  const std::int64_t src = (bkv * skv + key) * kD + 8 * c;
  uint4 w = make_uint4(0, 0, 0, 0);
  if (key < skv) w = *reinterpret_cast<const uint4*>(v + src);
  unsigned mx = max(max(max_mag_bits(w.x), max_mag_bits(w.y)), max(max_mag_bits(w.z), max_mag_bits(w.w)));
#pragma unroll
  for (int o = 1; o < 16; o *= 2) mx = max(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  const int e = v_row_exponent(mx);
  if (c == 0) vexp[r] = static_cast<unsigned char>(e);
  if (key < skv) {
    const float s = pow2_neg(e);
    *reinterpret_cast<uint4*>(v16 + src) =
        make_uint4(v_pair_to_f16(w.x, s), v_pair_to_f16(w.y, s), v_pair_to_f16(w.z, s), v_pair_to_f16(w.w, s));
  }
}

// The rows of one CTA of the forward (and of the backward's dq kernel): [r0, r0 + kBM) of the
// (batch row, kv head)'s group * Sq rows, heaviest first (with Sq a multiple of kBM: the last
// tiles of every head of the group, then the earlier ones), and the key tiles they see.
struct RowBlock {
  int rows, bkv, r0;
  int n_tiles;     // key tiles any row sees
  int full_tiles;  // key tiles every row sees whole
  const int* vis;  // the batch row's vis
  std::int64_t q_row0;
};
__device__ __forceinline__ RowBlock row_block(int nb, int hkv, int sq, int group, int tiles_per_kv, const int* vis) {
  RowBlock r;
  const int nkv = nb * hkv;
  r.rows = group * sq;
  r.bkv = static_cast<int>(blockIdx.x) % nkv;
  const int order = static_cast<int>(blockIdx.x) / nkv;
  int tile;
  if (sq % kBM == 0) {
    const int qt = sq / kBM;
    tile = (order % group) * qt + (qt - 1 - order / group);
  } else {
    tile = tiles_per_kv - 1 - order;
  }
  r.r0 = tile * kBM;
  r.vis = vis + static_cast<std::int64_t>(r.bkv / hkv) * sq;
  const int last = min(r.rows, r.r0 + kBM) - 1;
  const bool spans = r.r0 / sq != last / sq;  // rows of two query heads: counts restart at i = 0
  const int max_count = r.vis[spans ? sq - 1 : last % sq];
  const int min_count = r.vis[spans ? 0 : r.r0 % sq];
  r.n_tiles = (max_count + kBN - 1) / kBN;
  r.full_tiles = min_count / kBN;
  r.q_row0 = static_cast<std::int64_t>(r.bkv) * r.rows + r.r0;
  return r;
}

// ---- The kernel ---------------------------------------------------------------------------------

// kVPre (kFp16 only): V arrives converted (attention_v_to_f16_kernel), with its exponents.
template <PvMode kMode, int kStages, bool kOverlap, bool kPingPong, bool kVPre>
__global__ void __launch_bounds__(kThreads, 1)
    attention_fwd_wgmma_kernel(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                               const __grid_constant__ CUtensorMap map_v, const FwdArgs p) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  using L = Layout<kStages>;
  using namespace ws1cuda::detgemm;
  constexpr bool kF16 = kMode == PvMode::kFp16;
  static_assert(kF16 || !kVPre, "only fp16 V comes converted");
  constexpr bool kConvert = kF16 && !kVPre;  // the producer converts V in shared memory
  unsigned char* smem = aligned_dynamic_smem();
  const std::uint32_t base = smem_u32(smem);
  const std::uint32_t full_q = base + L::kBars, full_k0 = full_q + 8, full_v0 = full_k0 + 8 * kStages,
                      ready_v0 = full_v0 + 8 * kStages, empty0 = ready_v0 + 8 * kStages;
  const int wg = warpgroup_index();

  const RowBlock rb = row_block(p.b, p.hkv, p.sq, p.group, p.tiles_per_kv, p.vis);
  const int rows = rb.rows, bkv = rb.bkv, r0 = rb.r0, n_tiles = rb.n_tiles, full_tiles = rb.full_tiles;
  const int* vis = rb.vis;
  const std::int64_t q_row0 = rb.q_row0;

  if (threadIdx.x == 0) {
    detgemm::mbar_init(full_q, 1);
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_k0 + 8 * s, 1);
      mbar_init(full_v0 + 8 * s, 1);
      mbar_init(ready_v0 + 8 * s, 128);
      mbar_init(empty0 + 8 * s, 8);  // one arrival per consumer warp
    }
    fence_barrier_init();
  }
  __syncthreads();

  // kConvert: V tile t to fp16 in place by 128 threads (tid 0..127), its exponents beside it.
  // The second consumer warpgroup does it when it has no rows (decode: the producer then only
  // issues copies, and more tiles are in flight); the producer warpgroup otherwise.
  const bool wg2_converts = kConvert && r0 + 64 >= rows;
  const auto convert_tile = [&](int t, int tid) {
    const int s = t % kStages;
    mbar_wait(full_v0 + 8 * s, static_cast<unsigned>(t / kStages) & 1u);
    const int e = convert_v_row(smem + L::kStage0 + s * L::kStageBytes + L::kKBytes, tid);
    smem[L::kExp + s * L::kExpStride + tid] = static_cast<unsigned char>(e);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    mbar_arrive(ready_v0 + 8 * s);
  };

  if (wg == 0) {
    // ---- Producer: TMA (thread 0), then the V conversion (kConvert, all 128 threads) ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    const int tid = static_cast<int>(threadIdx.x);
    const auto issue = [&](int t) {  // K and V of tile t into stage t % kStages
      const int s = t % kStages;
      mbar_wait(empty0 + 8 * s, (static_cast<unsigned>(t / kStages) & 1u) ^ 1u);
      const std::uint32_t sk = base + L::kStage0 + s * L::kStageBytes, sv = sk + L::kKBytes;
      mbar_expect_tx(full_k0 + 8 * s, L::kKBytes);
      tma_load_3d(sk, &map_k, full_k0 + 8 * s, 0, t * kBN, bkv);
      tma_load_3d(sk + 16384, &map_k, full_k0 + 8 * s, 64, t * kBN, bkv);
      mbar_expect_tx(full_v0 + 8 * s, L::kVBytes + (kVPre ? kBN : 0));
      if constexpr (kVPre)
        bulk_load(base + L::kExp + s * L::kExpStride, p.vexp + static_cast<std::int64_t>(bkv) * p.vexp_stride + t * kBN,
                  kBN, full_v0 + 8 * s);
#pragma unroll
      for (int kh = 0; kh < 2; ++kh)
#pragma unroll
        for (int dh = 0; dh < 2; ++dh)
          tma_load_3d(sv + kh * 16384 + dh * 8192, &map_v, full_v0 + 8 * s, 64 * dh, t * kBN + 64 * kh, bkv);
    };
    if (n_tiles > 0) {
      if (tid == 0) {
        mbar_expect_tx(full_q, L::kQBytes);
        tma_load_2d(base, &map_q, full_q, 0, static_cast<int>(q_row0));
        tma_load_2d(base + 16384, &map_q, full_q, 64, static_cast<int>(q_row0));
        for (int t = 0; t < kStages - 1 && t < n_tiles; ++t) issue(t);
      }
      // Tile t is converted before tile t + kStages - 1 is issued: the issue waits for the
      // consumers to free tile t - 1's stage, and the conversion must not wait behind that.
      for (int t = 0; t < n_tiles; ++t) {
        if (kConvert && !wg2_converts) convert_tile(t, tid);
        if (tid == 0 && t + kStages - 1 < n_tiles) issue(t + kStages - 1);
      }
    }
  } else {
    // ---- Consumers ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int c = wg - 1, tid = static_cast<int>(threadIdx.x) % 128, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, cq = lane % 4;
    const int my_row0 = r0 + 64 * c + 16 * warp + g;  // the lane's rows: my_row0, my_row0 + 8
    const bool active = r0 + 64 * c < rows;
    int count[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = my_row0 + 8 * h;
      count[h] = r < rows ? vis[r % p.sq] : 0;
    }
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
    if (n_tiles > 0) mbar_wait(full_q, 0);

    const auto stage_k = [&](int t) { return base + L::kStage0 + (t % kStages) * L::kStageBytes; };
    const auto parity = [&](int t) { return static_cast<unsigned>(t / kStages) & 1u; };
    const auto v_ready = [&](int t) { return (kConvert ? ready_v0 : full_v0) + 8 * (t % kStages); };
    // S = Q K^T of tile t (64 rows x 128 keys), k16 steps over d in order; issued, not waited.
    const auto issue_qk = [&](int t, float (&sc)[64]) {
#pragma unroll
      for (int i = 0; i < 64; ++i) sc[i] = 0.0f;
      mbar_wait(full_k0 + 8 * (t % kStages), parity(t));
      const std::uint32_t sk = stage_k(t);
      fence_acc(sc);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < kD / 16; ++j)
        wgmma_m64n128k16<0, 0>(sc, smem_desc(base + (j / 4) * 16384 + c * 8192 + (j % 4) * 32, 16, 1024),
                               smem_desc(sk + (j / 4) * 16384 + (j % 4) * 32, 16, 1024));
      wgmma_commit();
    };
    // The online-softmax step of tile t (log2 domain): sc becomes P (FP32), m and l move on,
    // alpha is the factor for acc. The tile's max is taken over the raw scores and scaled once
    // (rounding is monotone); p = 2^fma(s, scale log2 e, -m_new), one rounding. kMasked: some
    // row of the CTA does not see every key of the tile (invisible keys: p = 0, a select).
    const auto softmax = [&](auto masked_c, int t, float (&sc)[64], float (&alpha)[2]) {
      constexpr bool kMasked = decltype(masked_c)::value;
      const int first = t * kBN;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int seen = count[h] - first;  // keys of this tile row h sees (<= 0: none)
        const auto visible = [&](int q, int e) { return !kMasked || 8 * q + 2 * cq + e < seen; };
        float mx = -INFINITY;
#pragma unroll
        for (int q = 0; q < 16; ++q)
#pragma unroll
          for (int e = 0; e < 2; ++e) mx = fmaxf(mx, visible(q, e) ? sc[4 * q + 2 * h + e] : -INFINITY);
        mx = quad_max4(mx);
        const bool none = mx == -INFINITY;  // quad-uniform
        const float m_new = none ? m[h] : fmaxf(m[h], __fmul_rn(mx, p.scale_log2));
        alpha[h] = none ? 1.0f : ex2(__fsub_rn(m[h], m_new));
        const float neg_m = -m_new;
        float sum = 0.0f;
#pragma unroll
        for (int q = 0; q < 16; ++q)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int i = 4 * q + 2 * h + e;
            const float pr = visible(q, e) ? ex2(__fmaf_rn(sc[i], p.scale_log2, neg_m)) : 0.0f;
            sc[i] = pr;
            sum = __fadd_rn(sum, pr);
          }
        sum = quad_sum4(sum);
        if (!none) l[h] = __fmaf_rn(l[h], alpha[h], sum);
        m[h] = m_new;
      }
    };
    const auto softmax_tile = [&](int t, float (&sc)[64], float (&alpha)[2]) {
      if (t >= full_tiles)
        softmax(std::true_type{}, t, sc, alpha);
      else
        softmax(std::false_type{}, t, sc, alpha);
    };
    // Ping-pong (kPingPong, both consumer warpgroups active): the warpgroups take turns to issue
    // their wgmmas (named barriers 1 + c), so that one's softmax runs under the other's
    // products. Warpgroup 1 opens the first turn and skips its last hand-over, so that no
    // arrival is left pending at exit. Only the issue order changes, never an operand.
    const bool pingpong = kPingPong && rows > r0 + 64;
    const int turns = kOverlap ? n_tiles + 1 : 2 * n_tiles;
    int turn = 0;
    const auto turn_begin = [&] {
      if (pingpong) asm volatile("bar.sync %0, 256;\n" ::"r"(1 + c) : "memory");
    };
    const auto turn_end = [&] {
      if (pingpong && !(c == 1 && turn == turns - 1)) asm volatile("bar.arrive %0, 256;\n" ::"r"(2 - c) : "memory");
      ++turn;
    };
    if (pingpong && c == 1 && n_tiles > 0) asm volatile("bar.arrive 1, 256;\n" ::: "memory");
    const auto rescale = [&](const float (&alpha)[2]) {
#pragma unroll
      for (int i = 0; i < 64; ++i) acc[i] = __fmul_rn(acc[i], alpha[(i / 2) % 2]);
    };
    // P of tile t as the A fragments of P V (kFp16: p * 2^e for a key row scaled by 2^-e; hi
    // holds the fp16 P, lo is unused. kBf16Split: hi + lo). Waits for V (its exponents).
    const auto to_operand = [&](int t, float (&sc)[64], std::uint32_t (&hi)[8][4], std::uint32_t (&lo)[8][4]) {
      mbar_wait(v_ready(t), parity(t));
      if constexpr (kF16) {
        const unsigned char* ex = smem + L::kExp + (t % kStages) * L::kExpStride;
        unsigned any = 0;
#pragma unroll
        for (int w = 0; w < kBN / 16; ++w) {
          const uint4 x = reinterpret_cast<const uint4*>(ex)[w];
          any |= x.x | x.y | x.z | x.w;
        }
        if (any != 0) {
#pragma unroll
          for (int i = 0; i < 64; ++i) {
            const int e = ex[8 * (i / 4) + 2 * cq + (i % 2)];
            sc[i] = __fmul_rn(sc[i], __int_as_float((127 + e) << 23));
          }
        }
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) hi[j][r] = pack_half2(sc[8 * j + 2 * r], sc[8 * j + 2 * r + 1]);
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const float x0 = sc[8 * j + 2 * r], x1 = sc[8 * j + 2 * r + 1];
            hi[j][r] = pack_bf162(x0, x1);
            lo[j][r] = pack_bf162(bf16_rest(x0), bf16_rest(x1));
          }
      }
    };
    // acc += P V of tile t (k16 steps over the tile's keys in order; split: hi then lo at each
    // step); issued, not waited.
    const auto issue_pv = [&](int t, const std::uint32_t (&hi)[8][4], const std::uint32_t (&lo)[8][4]) {
      const std::uint32_t sv = stage_k(t) + L::kKBytes;
      fence_acc(acc);
      wgmma_fence();
#pragma unroll
      for (int j = 0; j < kBN / 16; ++j) {
        const std::uint64_t dv = smem_desc(sv + (j / 4) * 16384 + (j % 4) * 2048, 8192, 1024);
        wgmma_rs_m64n128k16<kF16>(acc, hi[j], dv);
        if constexpr (!kF16) wgmma_rs_m64n128k16<false>(acc, lo[j], dv);
      }
      wgmma_commit();
    };
    const auto release = [&](int t) {
      __syncwarp();  // the lanes' shared-memory reads of the stage come before the release
      if (lane == 0) mbar_arrive(empty0 + 8 * (t % kStages));
    };

    if (!active) {  // keep the ring going (and convert V where this is the converter)
      for (int t = 0; t < n_tiles; ++t) {
        if (wg2_converts) {
          convert_tile(t, tid);
        } else {
          mbar_wait(full_k0 + 8 * (t % kStages), parity(t));
          mbar_wait(v_ready(t), parity(t));
        }
        release(t);
      }
    } else if constexpr (kOverlap) {
      // The softmax of tile t runs while the tensor cores add P(t-1) V(t-1): the same
      // operations on every element in the same order as the plain schedule below.
      float sc[64], alpha[2];
      std::uint32_t hi[8][4], lo[8][4];
      if (n_tiles > 0) {
        turn_begin();
        issue_qk(0, sc);
        turn_end();
        wgmma_wait<0>();
        fence_acc(sc);
        softmax_tile(0, sc, alpha);
        rescale(alpha);
        to_operand(0, sc, hi, lo);
      }
      for (int t = 1; t < n_tiles; ++t) {
        turn_begin();
        issue_qk(t, sc);
        issue_pv(t - 1, hi, lo);
        turn_end();
        wgmma_wait<1>();  // S(t) done; P(t-1) V(t-1) in flight
        fence_acc(sc);
        softmax_tile(t, sc, alpha);
        wgmma_wait<0>();
        fence_acc(acc);
        release(t - 1);
        rescale(alpha);
        to_operand(t, sc, hi, lo);
      }
      if (n_tiles > 0) {
        turn_begin();
        issue_pv(n_tiles - 1, hi, lo);
        turn_end();
        wgmma_wait<0>();
        fence_acc(acc);
        release(n_tiles - 1);
      }
    } else {
      for (int t = 0; t < n_tiles; ++t) {
        float sc[64], alpha[2];
        std::uint32_t hi[8][4], lo[8][4];
        turn_begin();
        issue_qk(t, sc);
        turn_end();
        wgmma_wait<0>();
        fence_acc(sc);
        softmax_tile(t, sc, alpha);
        rescale(alpha);
        to_operand(t, sc, hi, lo);
        turn_begin();
        issue_pv(t, hi, lo);
        turn_end();
        wgmma_wait<0>();
        fence_acc(acc);
        release(t);
      }
    }

    if (active) {
      // o = acc / l (a row with a visible key has l >= 1: the maximum's p is 1).
      store_rows(
          cq, [&](int i, int h) { return count[h] > 0 ? __fdiv_rn(acc[i], l[h]) : 0.0f; },
          [&](int h) -> bf16* {
            const int r = my_row0 + 8 * h;
            return r < rows ? p.o + (static_cast<std::int64_t>(bkv) * rows + r) * kD : nullptr;
          });
    }
  }
#endif
}

// ---- Host -----------------------------------------------------------------------------------------

// A 3-D bf16 tensor [outer][mid][inner] (contiguous) with boxes {64, box_mid, 1}, 128-byte swizzle,
// zeros out of bounds.
inline Status make_map_3d(CUtensorMap& map, const void* base, std::int64_t inner, std::int64_t mid,
                          std::int64_t outer, unsigned box_mid,
                          CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) {
  const detgemm::EncodeTiledFn encode = detgemm::encode_tiled_fn();
  if (encode == nullptr) return {cudaErrorNotSupported, "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)"};
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(mid),
                              static_cast<cuuint64_t>(outer)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(inner) * 2, static_cast<cuuint64_t>(inner * mid) * 2};
  const cuuint32_t box[3] = {64, box_mid, 1};
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = encode(&map, type, 3, const_cast<void*>(base), dims, strides, box,
                            elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return {cudaErrorInvalidValue, "cuTensorMapEncodeTiled (attention K/V)"};
  return {};
}

inline int vexp_stride(int skv) { return (skv + kBN - 1) / kBN * kBN; }
// Bytes of a FwdWorkspace for k and v of [B, Hkv, Skv, 128]: v16, then the exponents.
inline std::size_t fwd_workspace_bytes(int b, int hkv, int skv) {
  const std::size_t heads = static_cast<std::size_t>(b) * hkv;
  return heads * skv * kD * 2 + heads * vexp_stride(skv);
}
// Whether the forward should take a workspace: V tiles read by several CTAs (prefill) are
// converted once; decode and short chunks convert in the kernel and read V once. Either way the
// bits are the same.
inline bool fwd_wants_workspace(int hq, int hkv, int sq) { return (hq / hkv) * static_cast<std::int64_t>(sq) > 3 * kBM; }

// The forward: q [B, Hq, Sq, 128], k and v [B, Hkv, Skv, 128] (device, contiguous; with a key
// mask, k and v hold each (b, kv head)'s valid keys packed in order), vis [B][Sq], o like q.
// kFp16 with a workspace (fwd_workspace_bytes) converts V before the kernel.
template <PvMode kMode, int kStages = 3, bool kOverlap = true, bool kPingPong = true>
Status launch_attention_fwd(const bf16* q, const bf16* k, const bf16* v, bf16* o, const int* vis, int b, int hq,
                            int hkv, int sq, int skv, float scale, FwdWorkspace ws = {},
                            cudaStream_t stream = nullptr) {
  using L = Layout<kStages>;
  if (b * hq * sq == 0) return {};
  FwdArgs a;
  a.o = o;
  a.vis = vis;
  a.b = b;
  a.hkv = hkv;
  a.sq = sq;
  a.group = hq / hkv;
  a.scale_log2 = static_cast<float>(static_cast<double>(scale) * 1.4426950408889634);
  a.tiles_per_kv = (a.group * sq + kBM - 1) / kBM;
  CUtensorMap mq, mk, mv;
  Status st = detgemm::make_map(mq, q, kD, static_cast<std::int64_t>(b) * hq * sq, kD, 64, kBM);
  if (!st) return st;
  if (!(st = make_map_3d(mk, k, kD, skv, static_cast<std::int64_t>(b) * hkv, kBN))) return st;
  const unsigned blocks = static_cast<unsigned>(static_cast<std::int64_t>(b) * hkv * a.tiles_per_kv);
  const auto run = [&](auto kernel) -> Status {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, L::kBytes);
    if (e != cudaSuccess) return {e, "cudaFuncSetAttribute(attention_fwd_wgmma_kernel)"};
    kernel<<<blocks, kThreads, L::kBytes, stream>>>(mq, mk, mv, a);
    if ((e = cudaGetLastError()) != cudaSuccess) return {e, "attention_fwd_wgmma_kernel launch"};
    return {};
  };
  if (kMode == PvMode::kFp16 && ws.base != nullptr) {
    const std::int64_t heads = static_cast<std::int64_t>(b) * hkv;
    auto* v16 = static_cast<__half*>(ws.base);
    auto* vexp = reinterpret_cast<unsigned char*>(v16 + heads * skv * kD);
    a.vexp = vexp;
    a.vexp_stride = vexp_stride(skv);
    const std::int64_t rows = heads * a.vexp_stride;  // a multiple of 16: whole 16-lane groups
    attention_v_to_f16_kernel<<<static_cast<unsigned>(rows / 16), 256, 0, stream>>>(v, v16, vexp, skv, a.vexp_stride,
                                                                                     rows);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return {e, "attention_v_to_f16_kernel launch"};
    if (!(st = make_map_3d(mv, v16, kD, skv, heads, 64, CU_TENSOR_MAP_DATA_TYPE_FLOAT16))) return st;
    return run(attention_fwd_wgmma_kernel<kMode, kStages, kOverlap, kPingPong, kMode == PvMode::kFp16>);
  }
  if (!(st = make_map_3d(mv, v, kD, skv, static_cast<std::int64_t>(b) * hkv, 64))) return st;
  return run(attention_fwd_wgmma_kernel<kMode, kStages, kOverlap, kPingPong, false>);
}

}  // namespace ws1cuda::attn

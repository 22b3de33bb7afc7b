// What the logprob ops on cuda_bf16 share (logp, batch_invariant_logp, linear_logp; their
// definitions and the declared order are in lib/ops/logsumexp.hpp).
//
// The row logsumexp, as declared, operation by operation:
//   chunk state  the row is cut into kChunk = 1024-wide chunks from index 0 (the last may be
//                shorter); per chunk m = max over the chunk (x > m ? x : m from -inf, so NaN is
//                skipped and the first of equal maxima is kept), then s = sum of expf(x - m) in
//                index order from 0; a chunk whose max is -inf is (-inf, 0);
//   merge        chunk states folded left to right into (M, S): the smaller max's sum is
//                rescaled by expf(smaller - larger) with one fused multiply-add (lse_merge);
//   value        lse = M + logf(S).
// Each IEEE operation is written as an intrinsic (__fadd_rn, __fsub_rn, __fmaf_rn): nvcc would
// otherwise contract neighbours into an FMA where the CPU rounds twice. expf and logf are CUDA's
// accurate functions (not __expf/__logf); they differ from glibc's by an ulp now and then,
// which is what keeps logp and batch_invariant_logp from equalling cpu_bf16 bit for bit (the
// order is the same). Nothing depends on the number of rows or a row's position.
//
// Kernels defined in logp.cu and shared through the launchers below:
//   logprob_row_kernel  one thread per row folds the row's chunk states [rows, nchunks] left to
//                       right and writes lse and logp = target_logit - lse (+0 for a row whose
//                       target is ignore_index, when the op honours it).
//
// linear_logp's tile products (namespace tile): C[128 x 128] tiles of A[M, K] @ B[K, N] from
// bf16 operands with FP32 accumulation on the tensor cores (mma.sync m16n8k16 bf16, never TF32).
// 256 threads = 8 warps as 2 (M) x 4 (N), each warp 64 x 32 = 4 x 4 mma tiles; K in 32-wide
// steps through a 3-stage cp.async pipeline in shared memory, fragments by ldmatrix (.trans for
// operands stored MN-major); optionally A as a hi + lo pair of bf16 matrices (an FP32 operand
// split in two, ~16 significant bits). Every output element accumulates its k16 products in
// increasing k from the accumulator the caller passes in, whatever the tile's position, the
// grid or the matrix sizes, so a row's result does not depend on the other rows of the call.
#pragma once

#include <cuda_bf16.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ws1/op.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/kernel_support.cuh"

namespace ws1cuda::logprob {

inline constexpr int kChunk = 1024;  // ws1::ops::kLseChunk (static_assert in logp.cu)

// ---- the running (max, sum of exp(x - max)) ----

struct alignas(8) Lse {
  float max;
  float sum;
};

__device__ __forceinline__ Lse lse_empty() { return {-INFINITY, 0.0f}; }

// Merges `next` (the state of the next chunk to the right) into `acc`; ws1::ops::lse_merge.
// Commutative bit for bit (both branches rescale the smaller max's sum onto the larger one).
__device__ __forceinline__ void lse_merge(Lse& acc, const Lse next) {
  if (next.max == -INFINITY) return;
  if (next.max > acc.max) {
    acc.sum = __fmaf_rn(acc.sum, expf(__fsub_rn(acc.max, next.max)), next.sum);
    acc.max = next.max;
  } else {
    acc.sum = __fmaf_rn(next.sum, expf(__fsub_rn(next.max, acc.max)), acc.sum);
  }
}

__device__ __forceinline__ float lse_value(const Lse s) { return __fadd_rn(s.max, logf(s.sum)); }

__device__ __forceinline__ float bf16_bits_to_f32(unsigned short bits) {
  return __uint_as_float(static_cast<unsigned>(bits) << 16);
}
__device__ __forceinline__ unsigned short f32_to_bf16_bits(float v) { return __bfloat16_as_ushort(to_bf16(v)); }

// The targets of a call's rows and whether the op honours ignore_index.
struct RowTargets {
  const std::int64_t* ids = nullptr;
  std::int64_t ignore_index = -100;
  bool honour_ignore_index = false;
  __device__ bool ignored(std::int64_t r) const { return honour_ignore_index && ids[r] == ignore_index; }
};

// ---- host side (logp.cu) ----

// Folds states [rows, nchunks] per row: lse[r] (when lse != nullptr) and logp[r].
void launch_row_logp(const Lse* states, std::int64_t rows, std::int64_t nchunks,
                     const float* target_logit, RowTargets targets, float* logp, float* lse);

// logp and batch_invariant_logp (they differ in `honour_ignore_index` only). Throw
// OpInputError: call inside ws1::ops::guarded().
ws1::Tensors selected_logp_forward(std::string_view op, const ws1::Tensors& in,
                                   const ws1::OpContext& ctx, bool honour_ignore_index);
ws1::Tensors selected_logp_backward(std::string_view op, const ws1::Tensors& in,
                                    const ws1::OpContext& ctx, bool honour_ignore_index);

// Sets a kernel's dynamic shared memory limit (needed above 48 KiB).
template <class Kernel>
void allow_smem(Kernel* kernel, std::size_t bytes) {
  WS1_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

// ---- asynchronous copies ----

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// ---- tile products on the tensor cores ----

namespace tile {

constexpr int kM = 128, kN = 128, kK = 32;  // CTA tile; kM == kN: one loader for A and B
constexpr int kStages = 3;
constexpr int kThreads = 256;               // 8 warps: 2 along M x 4 along N
constexpr int kWarpM = 64, kWarpN = 32;
constexpr int kFragsM = kWarpM / 16, kFragsN = kWarpN / 8;
// Shared-memory rows are padded by 8 bf16 (16 bytes) so the 8 row addresses of an ldmatrix
// fall on distinct bank groups: K-major rows of 40 (80 B), MN-major rows of 136 (272 B).
constexpr int kStrideKMajor = kK + 8;
constexpr int kStrideMNMajor = kM + 8;
constexpr int kStageElems = kM * kStrideKMajor;  // per operand and stage (the larger layout)
static_assert(kM == kN && kK * kStrideMNMajor <= kStageElems);
// Shared memory of mma_tile with kAParts A operands.
template <int kAParts = 1>
constexpr std::size_t kSmemBytes = std::size_t{kStages} * (kAParts + 1) * kStageElems * sizeof(unsigned short);

// A row-major bf16 matrix in device memory: element (r, c) at ptr[r * ld + c] for r < rows and
// c < cols; everything outside reads as 0 (tile edges and the K tail). `vec`: ld % 8 == 0 and
// ptr 16-byte aligned, so 8 elements of a row move as one 16-byte copy.
struct Matrix {
  const unsigned short* ptr = nullptr;
  std::int64_t ld = 0, rows = 0, cols = 0;
  bool vec = false;
};

inline Matrix matrix(const void* ptr, std::int64_t ld, std::int64_t rows, std::int64_t cols) {
  const bool aligned = reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
  return {static_cast<const unsigned short*>(ptr), ld, rows, cols, aligned && ld % 8 == 0};
}

// Coordinates of accumulator element e (0..3) of mma tile (mi, ni) of this thread, inside the
// CTA tile (the m16n8 C fragment: e 0,1 on row lane/4, e 2,3 eight rows below; columns
// 2*(lane%4) + e%2).
__device__ __forceinline__ int frag_row(int warp_m, int lane, int mi, int e) {
  return warp_m * kWarpM + mi * 16 + (lane >> 2) + (e >> 1) * 8;
}
__device__ __forceinline__ int frag_col(int warp_n, int lane, int ni, int e) {
  return warp_n * kWarpN + ni * 8 + (lane & 3) * 2 + (e & 1);
}

using Acc = float[kFragsM][kFragsN][4];

__device__ __forceinline__ void zero(Acc& acc) {
#pragma unroll
  for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
    for (int ni = 0; ni < kFragsN; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
}

// Copies one operand tile into shared memory. K-major (the operand's k is the storage column):
// storage rows [mn0, mn0 + 128) x columns [k0, k0 + 32) into [128][40]. MN-major (k is the
// storage row): rows [k0, k0 + 32) x columns [mn0, mn0 + 128) into [32][136].
template <bool kKMajor>
__device__ __forceinline__ void load_tile(unsigned short* dst, const Matrix& g, std::int64_t mn0, std::int64_t k0) {
  constexpr int kRows = kKMajor ? kM : kK, kCols = kKMajor ? kK : kM;
  constexpr int kStride = kKMajor ? kStrideKMajor : kStrideMNMajor;
  constexpr int kVecsPerRow = kCols / 8;
  static_assert(kRows * kVecsPerRow % kThreads == 0);
  const std::int64_t r0 = kKMajor ? mn0 : k0, c0 = kKMajor ? k0 : mn0;
#pragma unroll
  for (int j = 0; j < kRows * kVecsPerRow / kThreads; ++j) {
    const int q = static_cast<int>(threadIdx.x) + j * kThreads;
    const int r = q / kVecsPerRow, c = (q % kVecsPerRow) * 8;
    const std::int64_t gr = r0 + r, gc = c0 + c;
    unsigned short* d = dst + r * kStride + c;
    if (g.vec && gr < g.rows && gc + 8 <= g.cols) {
      cp_async16(d, g.ptr + gr * g.ld + gc);
    } else {  // an edge: element by element, zeros outside
      unsigned w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const std::int64_t e = gc + 2 * j;
        const unsigned lo = gr < g.rows && e < g.cols ? g.ptr[gr * g.ld + e] : 0u;
        const unsigned hi = gr < g.rows && e + 1 < g.cols ? g.ptr[gr * g.ld + e + 1] : 0u;
        w[j] = lo | (hi << 16);
      }
      *reinterpret_cast<uint4*>(d) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const unsigned short* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const unsigned short* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s)
               : "memory");
}

// d += a @ b for one m16n8k16 tile: bf16 operands, FP32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A fragments of the warp's 4 m16 tiles at k offset kk of the stage. Registers: a0 rows 0-7 /
// k 0-7, a1 rows 8-15 / k 0-7, a2 rows 0-7 / k 8-15, a3 rows 8-15 / k 8-15; ldmatrix lane l
// gives the address of row l%8 of matrix l/8.
template <bool kKMajor>
__device__ __forceinline__ void load_a(unsigned (&a)[kFragsM][4], const unsigned short* s, int warp_m, int lane, int kk) {
#pragma unroll
  for (int mi = 0; mi < kFragsM; ++mi) {
    const int m = warp_m * kWarpM + mi * 16;
    if constexpr (kKMajor)  // [m][k]: matrix l/8 = rows m + (l/8 % 2) * 8, k + (l/16) * 8
      ldmatrix_x4(a[mi], s + (m + (lane & 15)) * kStrideKMajor + kk + (lane >> 4) * 8);
    else  // [k][m], transposed on load: matrix l/8 = k rows + (l/16) * 8, m + (l/8 % 2) * 8
      ldmatrix_x4_trans(a[mi], s + (kk + (lane >> 4) * 8 + (lane & 7)) * kStrideMNMajor + m + ((lane >> 3) & 1) * 8);
  }
}

// B fragments of the warp's 4 n8 tiles at k offset kk: b[ni] = {k 0-7, k 8-15} of columns
// n .. n+7; one ldmatrix.x4 covers two n8 tiles (matrices: n 0-7/k 0-7, n 0-7/k 8-15,
// n 8-15/k 0-7, n 8-15/k 8-15).
template <bool kKMajor>
__device__ __forceinline__ void load_b(unsigned (&b)[kFragsN][2], const unsigned short* s, int warp_n, int lane, int kk) {
#pragma unroll
  for (int nj = 0; nj < kFragsN / 2; ++nj) {
    const int n = warp_n * kWarpN + nj * 16;
    unsigned r[4];
    if constexpr (kKMajor)  // [n][k]: matrix l/8 = rows n + (l/16) * 8, k + (l/8 % 2) * 8
      ldmatrix_x4(r, s + (n + (lane >> 4) * 8 + (lane & 7)) * kStrideKMajor + kk + ((lane >> 3) & 1) * 8);
    else  // [k][n], transposed on load: matrix l/8 = k rows + (l/8 % 2) * 8, n + (l/16) * 8
      ldmatrix_x4_trans(r, s + (kk + ((lane >> 3) & 1) * 8 + (lane & 7)) * kStrideMNMajor + n + (lane >> 4) * 8);
    b[2 * nj][0] = r[0];
    b[2 * nj][1] = r[1];
    b[2 * nj + 1][0] = r[2];
    b[2 * nj + 1][1] = r[3];
  }
}

// acc += A[m0 .. m0+128, 0 .. k_len) @ B[0 .. k_len, n0 .. n0+128), K in increasing 16-wide
// steps. kAKMajor: A stored [M][K] (else [K][M]); kBKMajor: B stored [N][K] (else [K][N]).
// With kAParts = 2, A is the sum of two bf16 matrices (a hi/lo split of FP32 values) of the same
// shape: each 16-wide k step adds a[0]'s products, then a[1]'s. `smem` holds
// kSmemBytes<kAParts>; all threads of the block call it; it ends with a barrier, so the caller
// may reuse the shared memory.
template <bool kAKMajor, bool kBKMajor, int kAParts = 1>
__device__ void mma_tile(const Matrix (&a)[kAParts], const Matrix& b, std::int64_t m0, std::int64_t n0,
                         std::int64_t k_len, Acc& acc, unsigned short* smem) {
  constexpr int kStageSize = (kAParts + 1) * kStageElems;  // A parts, then B
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int warp_m = warp % 2, warp_n = warp / 2;
  const std::int64_t k_tiles = (k_len + kK - 1) / kK;
  auto stage = [&](std::int64_t t) { return smem + (t % kStages) * kStageSize; };
  auto load = [&](std::int64_t t) {
    if (t < k_tiles) {
#pragma unroll
      for (int p = 0; p < kAParts; ++p) load_tile<kAKMajor>(stage(t) + p * kStageElems, a[p], m0, t * kK);
      load_tile<kBKMajor>(stage(t) + kAParts * kStageElems, b, n0, t * kK);
    }
    cp_async_commit();  // possibly empty: one group per k-tile keeps the wait count exact
  };
  for (int t = 0; t < kStages - 1; ++t) load(t);
  for (std::int64_t t = 0; t < k_tiles; ++t) {
    cp_async_wait<kStages - 2>();  // k-tile t has landed (this thread's copies) ...
    __syncthreads();               // ... everyone's, and k-tile t-1's slot is free
    load(t + kStages - 1);
    const unsigned short* st = stage(t);
#pragma unroll
    for (int kk = 0; kk < kK; kk += 16) {
      unsigned bf[kFragsN][2];
      load_b<kBKMajor>(bf, st + kAParts * kStageElems, warp_n, lane, kk);
#pragma unroll
      for (int p = 0; p < kAParts; ++p) {
        unsigned af[kFragsM][4];
        load_a<kAKMajor>(af, st + p * kStageElems, warp_m, lane, kk);
#pragma unroll
        for (int mi = 0; mi < kFragsM; ++mi)
#pragma unroll
          for (int ni = 0; ni < kFragsN; ++ni) mma_bf16(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();
}

template <bool kAKMajor, bool kBKMajor>
__device__ __forceinline__ void mma_tile(const Matrix& a, const Matrix& b, std::int64_t m0, std::int64_t n0,
                                         std::int64_t k_len, Acc& acc, unsigned short* smem) {
  const Matrix parts[1] = {a};
  mma_tile<kAKMajor, kBKMajor, 1>(parts, b, m0, n0, k_len, acc, smem);
}

}  // namespace tile
}  // namespace ws1cuda::logprob

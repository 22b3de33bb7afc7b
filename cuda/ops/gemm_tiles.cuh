// Device pieces shared by the GEMM-shaped cuda_bf16 kernels (det_gemm, lm_head, linear_logp):
// how an operand sits in memory, and a deterministic bf16 tensor-core tile GEMM.
//
// Operands. Every product is C[M,N] = A[M,K] · B[K,N] over bf16 operands, each in one of two
// layouts (Major): kK, the reduction dimension contiguous (A as [M][K]; B as [N][K], e.g. a
// weight in Hugging Face [out, in] layout), or kMN, the output dimension contiguous (A as
// [K][M], B as [K][N]). In BLAS words A kK / kMN is "N" / "T" and B kMN / kK is "N" / "T", so
// lm_head's three products are:
//   logits  = hidden · Wᵀ    NT: A kK  (hidden [T][H]),  B kK  (W [V][H])
//   dhidden = dy · W         NN: A kK  (dy [T][V]),      B kMN (W [V][H])
//   dW      = dyᵀ · hidden   TN: A kMN (dy [T][V]),      B kMN (hidden [T][H])
//
// Tile GEMM (mma_gemm_kernel): a block of 256 threads owns a 128 x 128 tile of C and walks K in
// 32-wide slices through a 4-stage cp.async pipeline in shared memory; each of its 8 warps owns
// 64 x 32 of the tile and issues mma.sync.m16n8k16 with bf16 inputs and FP32 accumulators (not
// TF32). K order, for every element: slices in increasing k, each slice as two k16 steps in
// increasing k, each step adding its 16 products into the FP32 accumulator in the tensor core's
// fixed internal order. The whole K of a tile is reduced by the one block that owns it (no
// split-K, no atomics) and an element's arithmetic involves only its row of A and its column of
// B, so the result does not depend on M, N, the tile's position or the launch order:
// deterministic, and batch-invariant over the rows of A. Rows, columns and k beyond the
// operands are zero-filled in shared memory (a zero k adds exact zeros to every element alike).
//
// Long K (> kPromoteAboveK): the tensor core's FP32 accumulation is not round-to-nearest (it
// drops low bits at each step), which grows with the number of steps: lm_head's dhidden over
// K = 151936 came out 5x further from the FP32 reference than cpu_bf16 on the H200, over the
// contract row on two cells (docs/gpu-runs.md). For long K the MMA accumulator is therefore
// promoted every kPromoteSlices slices into a separate FP32 sum with round-to-nearest adds
// (__fadd_rn) and restarted at zero; the order stays fixed by K alone. That variant keeps two
// accumulator sets, so it runs one block per SM.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "ws1cuda/device_array.cuh"
#include "ws1cuda/kernel_support.cuh"

namespace ws1cuda::gemm {

// Which dimension of an operand is contiguous in memory (see the file comment).
enum class Major { kK, kMN };

// An operand in global memory: element (x, k), x being m for A and n for B, at data[x * ld + k]
// (kK) or data[k * ld + x] (kMN). vec: 16-byte rows are possible (ld % 8 == 0, base aligned).
struct Operand {
  const __nv_bfloat16* data = nullptr;
  std::int64_t ld = 0;
  bool vec = false;
};

inline Operand make_operand(const __nv_bfloat16* data, std::int64_t ld) {
  return {data, ld, ld % 8 == 0 && reinterpret_cast<std::uintptr_t>(data) % 16 == 0};
}

template <Major L>
__device__ __forceinline__ std::int64_t element_offset(const Operand& o, std::int64_t x, std::int64_t k) {
  return L == Major::kK ? x * o.ld + k : k * o.ld + x;
}

// ---- PTX wrappers -------------------------------------------------------------------------------

__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; src_bytes < 16 zero-fills the rest (0: all zeros).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_address(p)));
}

// d += a · b for one 16 x 8 x 16 step: bf16 inputs, FP32 accumulators.
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- The tile GEMM ------------------------------------------------------------------------------

struct MmaTile {
  static constexpr int kBM = 128, kBN = 128, kBK = 32;
  static constexpr int kWarpsM = 2, kWarpsN = 4, kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kWM = kBM / kWarpsM, kWN = kBN / kWarpsN;  // 64 x 32 per warp
  static constexpr int kMT = kWM / 16, kNT = kWN / 8;             // 4 x 4 mma tiles per warp
  static constexpr int kStages = 4;
  static constexpr int kStageElems = (kBM + kBN) * kBK;
  static constexpr int kSmemBytes = kStages * kStageElems * 2;    // 64 KiB
};
static_assert(MmaTile::kBK == 32 && MmaTile::kNT % 2 == 0, "fragment loaders assume these");

// A warp's accumulators: acc[i][j] is the m16n8 tile (16 i, 8 j) of the warp's 64 x 32, in the
// mma C layout (c0, c1: row g, columns 2t, 2t+1; c2, c3: row g + 8; g = lane / 4, t = lane % 4).
using MmaAcc = float[MmaTile::kMT][MmaTile::kNT][4];

inline constexpr int kPromoteSlices = 16;    // 512 k per promotion
inline constexpr int kPromoteAboveK = 4096;  // K up to a hidden width: one accumulator

__device__ __forceinline__ void zero(MmaAcc& acc) {
#pragma unroll
  for (int i = 0; i < MmaTile::kMT; ++i)
#pragma unroll
    for (int j = 0; j < MmaTile::kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
}

// total += acc element-wise, rounded to nearest; acc restarts at zero.
__device__ __forceinline__ void promote(MmaAcc& total, MmaAcc& acc) {
#pragma unroll
  for (int i = 0; i < MmaTile::kMT; ++i)
#pragma unroll
    for (int j = 0; j < MmaTile::kNT; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        total[i][j][e] = __fadd_rn(total[i][j][e], acc[i][j][e]);
        acc[i][j][e] = 0.0f;
      }
}

// Shared-memory element offset of the 8-element chunk holding (x, k..k+7) (kK, k % 8 == 0) or
// (x..x+7, k) (kMN, x % 8 == 0) of an operand tile with X rows along x, XOR-swizzled so that
// the cp.async stores and the ldmatrix reads of 8 consecutive rows hit distinct banks.
template <Major L, int X>
__device__ __forceinline__ int chunk_offset(int x, int k) {
  constexpr int kBK = MmaTile::kBK;
  if constexpr (L == Major::kK) {  // X rows of 32 k (64 B: two rows per 128 B line)
    return x * kBK + (((k >> 3) ^ ((x >> 1) & 3)) << 3);
  } else {  // 32 rows (k) of X (X / 8 >= 8 chunks)
    static_assert(X % 64 == 0, "the kMN swizzle needs at least 8 chunks per row");
    return k * X + (((x >> 3) ^ (k & 7)) << 3);
  }
}

// One K slice [k0, k0 + 32) of rows [x0, x0 + X) of an operand into shared memory `s`.
// Each thread moves 16-byte chunks along the contiguous dimension: cp.async where the chunk is
// wholly inside or wholly outside the operand (zero-filled), element loads at ragged edges or
// when the operand does not allow 16-byte rows.
template <Major L, int X>
__device__ __forceinline__ void load_tile(const Operand& o, int x0, int k0, int x_extent, int K,
                                          __nv_bfloat16* s) {
  constexpr int kBK = MmaTile::kBK, kChunks = X * kBK / 8;
  static_assert(kChunks % MmaTile::kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int i = 0; i < kChunks / MmaTile::kThreads; ++i) {
    const int q = static_cast<int>(threadIdx.x) + i * MmaTile::kThreads;
    const int x = L == Major::kK ? q / (kBK / 8) : (q % (X / 8)) * 8;
    const int k = L == Major::kK ? (q % (kBK / 8)) * 8 : q / (X / 8);
    const int gx = x0 + x, gk = k0 + k;
    // In-range elements of the chunk (a prefix along the contiguous dimension).
    const int valid = L == Major::kK ? (gx < x_extent ? min(max(K - gk, 0), 8) : 0)
                                     : (gk < K ? min(max(x_extent - gx, 0), 8) : 0);
    __nv_bfloat16* dst = s + chunk_offset<L, X>(x, k);
    if (o.vec && (valid == 8 || valid == 0)) {
      const __nv_bfloat16* src = valid == 8 ? o.data + element_offset<L>(o, gx, gk) : o.data;
      cp_async_16(dst, src, valid == 8 ? 16 : 0);
    } else {
      const unsigned short* src =
          reinterpret_cast<const unsigned short*>(o.data + element_offset<L>(o, gx, gk));
      unsigned w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const unsigned lo = 2 * e < valid ? src[2 * e] : 0u, hi = 2 * e + 1 < valid ? src[2 * e + 1] : 0u;
        w[e] = lo | (hi << 16);
      }
      *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
    }
  }
}

// A fragments (16 x 16, rows m_base.., k kk..) of a kBM-row A tile.
template <Major L>
__device__ __forceinline__ void load_a_fragment(unsigned (&a)[4], const __nv_bfloat16* s, int m_base, int kk) {
  const int lane = static_cast<int>(threadIdx.x) & 31, j = lane >> 3, r = lane & 7;
  // Matrices 0..3: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15).
  if constexpr (L == Major::kK)
    ldmatrix_x4(a, s + chunk_offset<L, MmaTile::kBM>(m_base + r + 8 * (j & 1), kk + 8 * (j >> 1)));
  else
    ldmatrix_x4_trans(a, s + chunk_offset<L, MmaTile::kBM>(m_base + 8 * (j & 1), kk + r + 8 * (j >> 1)));
}

// B fragments of two n8 tiles (columns n_base.., k kk..): b[0], b[1] for columns n_base..+7,
// b[2], b[3] for n_base+8..+15.
template <Major L>
__device__ __forceinline__ void load_b_fragments(unsigned (&b)[4], const __nv_bfloat16* s, int n_base, int kk) {
  const int lane = static_cast<int>(threadIdx.x) & 31, j = lane >> 3, r = lane & 7;
  // Matrices 0..3: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
  if constexpr (L == Major::kK)
    ldmatrix_x4(b, s + chunk_offset<L, MmaTile::kBN>(n_base + r + 8 * (j >> 1), kk + 8 * (j & 1)));
  else
    ldmatrix_x4_trans(b, s + chunk_offset<L, MmaTile::kBN>(n_base + 8 * (j >> 1), kk + r + 8 * (j & 1)));
}

// The warp's accumulators for the block tile at (m0, n0): the full K, in the order the file
// comment states (kPromote: the promoted sum, see the file comment). `smem` holds
// MmaTile::kSmemBytes. Call from all threads of the block.
template <Major LA, Major LB, bool kPromote>
__device__ __forceinline__ void mma_tile_mainloop(const Operand& a, const Operand& b, int M, int N, int K, int m0,
                                                  int n0, __nv_bfloat16* smem, MmaAcc& out) {
  using T = MmaTile;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int wm = (warp / T::kWarpsN) * T::kWM, wn = (warp % T::kWarpsN) * T::kWN;
  MmaAcc part;
  MmaAcc& acc = kPromote ? part : out;
  zero(out);
  if constexpr (kPromote) zero(part);

  const int slices = (K + T::kBK - 1) / T::kBK;
  auto stage_a = [&](int s) { return smem + s * T::kStageElems; };
  auto stage_b = [&](int s) { return smem + s * T::kStageElems + T::kBM * T::kBK; };
  auto load_slice = [&](int kt) {
    const int s = kt % T::kStages;
    load_tile<LA, T::kBM>(a, m0, kt * T::kBK, M, K, stage_a(s));
    load_tile<LB, T::kBN>(b, n0, kt * T::kBK, N, K, stage_b(s));
  };
  // One commit group per slice (empty past the end) keeps the wait count uniform.
#pragma unroll
  for (int s = 0; s < T::kStages - 1; ++s) {
    if (s < slices) load_slice(s);
    cp_async_commit();
  }
  for (int kt = 0; kt < slices; ++kt) {
    cp_async_wait<T::kStages - 2>();  // slice kt has landed (this thread's copies)
    __syncthreads();                  // ... everyone's; and slice kt - 1 is no longer read
    if (kt + T::kStages - 1 < slices) load_slice(kt + T::kStages - 1);
    cp_async_commit();
    const __nv_bfloat16* sa = stage_a(kt % T::kStages);
    const __nv_bfloat16* sb = stage_b(kt % T::kStages);
#pragma unroll
    for (int kk = 0; kk < T::kBK; kk += 16) {
      unsigned af[T::kMT][4], bf[T::kNT / 2][4];
#pragma unroll
      for (int i = 0; i < T::kMT; ++i) load_a_fragment<LA>(af[i], sa, wm + 16 * i, kk);
#pragma unroll
      for (int p = 0; p < T::kNT / 2; ++p) load_b_fragments<LB>(bf[p], sb, wn + 16 * p, kk);
#pragma unroll
      for (int i = 0; i < T::kMT; ++i)
#pragma unroll
        for (int j = 0; j < T::kNT; ++j)
          mma_bf16_16816(acc[i][j], af[i], bf[j / 2][(j % 2) * 2], bf[j / 2][(j % 2) * 2 + 1]);
    }
    if constexpr (kPromote) {
      if ((kt + 1) % kPromoteSlices == 0 || kt + 1 == slices) promote(out, part);
    }
  }
  cp_async_wait<0>();
}

// Calls f(row, col, v0, v1) for each pair of accumulators at (row, col) and (row, col + 1),
// col even, in global coordinates of the block tile at (m0, n0). Rows and columns may lie
// outside C: f checks.
template <class F>
__device__ __forceinline__ void for_each_accumulator_pair(const MmaAcc& acc, int m0, int n0, F&& f) {
  using T = MmaTile;
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int row0 = m0 + (warp / T::kWarpsN) * T::kWM + (lane >> 2);
  const int col0 = n0 + (warp % T::kWarpsN) * T::kWN + 2 * (lane & 3);
#pragma unroll
  for (int i = 0; i < T::kMT; ++i)
#pragma unroll
    for (int j = 0; j < T::kNT; ++j) {
      f(row0 + 16 * i, col0 + 8 * j, acc[i][j][0], acc[i][j][1]);
      f(row0 + 16 * i + 8, col0 + 8 * j, acc[i][j][2], acc[i][j][3]);
    }
}

// Epilogue: C [M][N] row-major bf16, each value rounded once to nearest even.
struct StoreBf16 {
  __nv_bfloat16* c;
  int M, N;
  __device__ __forceinline__ void operator()(int row, int col, float v0, float v1) const {
    if (row >= M || col >= N) return;
    __nv_bfloat16* p = c + static_cast<std::int64_t>(row) * N + col;
    if (col + 1 < N && N % 2 == 0) {  // (row * N + col) even: a 4-byte aligned pair
      *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
    } else {
      p[0] = to_bf16(v0);
      if (col + 1 < N) p[1] = to_bf16(v1);
    }
  }
};

// Grid geometry of a tile GEMM: a 1-D grid of tiles_m * tiles_n blocks. n_fastest: consecutive
// blocks share a row tile (A) and sweep B; otherwise they share a column tile and sweep A. The
// choice only schedules (L2 reuse of the larger operand), never changes arithmetic.
struct MmaGrid {
  int M, N, K;
  int tiles_m, tiles_n;
  bool n_fastest;
};

template <Major LA, Major LB, bool kPromote, class Epilogue>
__global__ void __launch_bounds__(MmaTile::kThreads, kPromote ? 1 : 2)
    mma_gemm_kernel(Operand a, Operand b, MmaGrid g, Epilogue epi) {
  extern __shared__ __align__(128) unsigned char mma_smem[];
  const int bid = static_cast<int>(blockIdx.x);
  const int tm = g.n_fastest ? bid / g.tiles_n : bid % g.tiles_m;
  const int tn = g.n_fastest ? bid % g.tiles_n : bid / g.tiles_m;
  const int m0 = tm * MmaTile::kBM, n0 = tn * MmaTile::kBN;
  MmaAcc acc;
  mma_tile_mainloop<LA, LB, kPromote>(a, b, g.M, g.N, g.K, m0, n0, reinterpret_cast<__nv_bfloat16*>(mma_smem),
                                      acc);
  for_each_accumulator_pair(acc, m0, n0, epi);
}

// Launches C = A · B over M x N x K (each < 2^31; the caller checks) with `epi` storing the
// FP32 accumulators. Nothing is launched for an empty C; K = 0 gives zero accumulators.
template <Major LA, Major LB, class Epilogue>
void launch_mma_gemm(const Operand& a, const Operand& b, int M, int N, int K, const Epilogue& epi,
                     const char* kernel_name) {
  if (M == 0 || N == 0) return;
  auto* kernel = K > kPromoteAboveK ? &mma_gemm_kernel<LA, LB, true, Epilogue> : &mma_gemm_kernel<LA, LB, false, Epilogue>;
  WS1_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, MmaTile::kSmemBytes));
  const MmaGrid g{M, N, K, (M + MmaTile::kBM - 1) / MmaTile::kBM, (N + MmaTile::kBN - 1) / MmaTile::kBN,
                  /*n_fastest=*/M >= N};
  const std::int64_t blocks = static_cast<std::int64_t>(g.tiles_m) * g.tiles_n;
  kernel<<<static_cast<unsigned>(blocks), MmaTile::kThreads, MmaTile::kSmemBytes>>>(a, b, g, epi);
  check_launch(kernel_name);
}

}  // namespace ws1cuda::gemm

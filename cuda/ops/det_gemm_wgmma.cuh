// det_gemm's kernels (Option A: FP32 accumulation, one rounding at the output), self-contained
// (CUDA headers only) so that a standalone harness can include it. cuda/ops/det_gemm.cu wraps
// them into the op (input checks, device arrays, launch regions).
//
// Every product is C[M,N] = sum over k of A(m,k) · B(k,n), bf16 operands in global memory in one
// of two layouts (Major): kK, the reduction dimension contiguous (A(m,k) = a[m*lda + k],
// B(k,n) = b[n*ldb + k]), or kMN, the output dimension contiguous (A(m,k) = a[k*lda + m],
// B(k,n) = b[k*ldb + n]). det_gemm's three products:
//   forward c  = a · b      A = a  [M][K] kK,   B = b  [K][N] kMN
//   da         = dy · bᵀ    A = dy [M][N] kK,   B = b  [K][N] kK   (reduction over det_gemm's N)
//   db         = aᵀ · dy    A = a  [M][K] kMN,  B = dy [M][N] kMN  (reduction over det_gemm's M)
//
// The reduction [k_lo, k_lo + k_len) is cut into `shards` contiguous shards
// [k_lo + r*k_len/shards, k_lo + (r+1)*k_len/shards); each shard is summed in FP32 from zero, the
// shard partials are added in FP32 in shard order (total = p0; total = total + p1; ...,
// round-to-nearest adds), and the total is written once: rounded to bf16 (RNE) or as FP32.
//
// Kernel wgmma_gemm_kernel (sm_90a): a persistent grid (one CTA per SM) walks the output tiles
// (128 rows x kBN columns, kBN 128 or 256 by the layouts, 64 for a decode-sized forward: bn_for) in a fixed
// grouped order; a CTA is 3 warpgroups: warpgroup 0 is the producer (one thread issues the TMA
// loads, cp.async.bulk.tensor, into a ring of 64-deep K blocks in 128-byte-swizzled shared
// memory: 8 stages of 24 KiB for n64, 6 of 32 KiB for n128, 4 of 48 KiB for n256; each stage guarded by a full and an
// empty mbarrier), warpgroups 1 and 2 are consumers (setmaxnreg 232; the producer drops to 40),
// each owning 64 rows of the tile: per K block it issues up to four wgmma.m64nBNk16 (bf16 x bf16
// -> FP32 registers; A and B from shared memory, either majorness through the descriptors'
// transpose bits). A shard's sum is the wgmma accumulator from zero over its k16 steps in
// increasing k; the shard's last block issues only the steps inside the shard (so a shard's
// length must be a multiple of 16 unless it ends at the operand's end, where TMA fills zeros).
// The running total over shards: for n128 a second set of 64 FP32 registers per thread (acc +
// total = 128 registers); for n256 (128 accumulator registers, no room for a second set) a
// per-CTA slot of global scratch (128 x 256 floats, L2-resident, each thread writing and reading
// back only its own elements), total = slot + acc after each shard r >= 1. A consumer warpgroup
// whose 64 rows all lie past M issues no wgmma (it only keeps the ring going). With one row tile
// (decode-sized M), A's box has M rounded up to 8 rows, not 128: the TMA unit then writes no
// padding rows into the ring (measured on the H200: decode down, M = 8, from 61 to 38 us).
// Shards on separate CTAs (n64 and n128 tiles; split_for: where the tiles alone would leave SMs idle): a work unit
// is one shard of one tile, the shards of a tile adjacent in the unit order; each unit sums its
// shard exactly as above (from zero, the same k16 steps) into FP32 registers and stores that
// partial in its own place of global scratch (L2-resident); then, per tile half (64 rows), an
// arrival counter (after a fence) says who folds: the last to arrive reads the others' partials
// and adds p0 + p1 + ... in shard order, writes the output, and zeroes the counter. No CTA ever
// waits for another (no co-residency needed). The partials and the adds are those of the
// single-CTA fold, so the bits are the same, whether the shards ran apart or not.
// Epilogue (bf16 output): each quad of lanes transposes its column pairs with two xor shuffles
// so that a lane holds 8 consecutive columns, one 16-byte store (where c and ldc allow). A fused
// epilogue (launch_wgmma_fused; linear_logp's row logsumexp and gradient) takes the FP32 tile
// in registers instead of the store. Two extensions, the tensor-core kernel's alone: A in two
// bf16 parts (Problem::a_lo: each shard summed from A, then from A_lo, both folded), and, on
// the register-total tiles (A kK, B kMN), a running total to continue (Problem::c_in: total =
// c_in + p0 + ..., FP32 in and out), so that a reduction cut into launches folds as one would.
// The sum of an element depends only on its row of A, its column of B and the shard bounds:
// never on M, kBN, where the shards ran, the tile position or the launch order (the arrival
// order picks only which CTA adds the partials, never their order).
//
// Kernel fallback_gemm_kernel: the same rules on CUDA cores for shapes TMA cannot take (a
// contiguous dimension not a multiple of 8 elements, a shard not a multiple of 16): each shard
// an FP32 fma chain from zero in increasing k, the shards folded in order, one rounding.
//
// Kernel fold_kernel: total over `shards` FP32 partials [shards][M*N] in shard order, rounded to
// bf16 (for a forward whose shards take different kernels).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace ws1cuda::detgemm {

using bf16 = __nv_bfloat16;

enum class Major { kK, kMN };

// One product (see the file comment). K: the reduction extent of the operands in memory (TMA's
// bound: k >= K reads zeros); [k_lo, k_lo + k_len) must lie inside [0, K].
struct Problem {
  const bf16* a = nullptr;
  std::int64_t lda = 0;
  Major la = Major::kK;
  const bf16* b = nullptr;
  std::int64_t ldb = 0;
  Major lb = Major::kMN;
  int M = 0, N = 0, K = 0;
  int k_lo = 0, k_len = 0, shards = 1;
  // 0: [k_lo, k_lo + k_len) cut into `shards` near-equal shards (shard_begin). > 0: shards of
  // shard_len k each from k_lo, the last one shorter; then shards must be
  // ceil(k_len / shard_len) (the caller sets both; wgmma_applies refuses other counts).
  int shard_len = 0;
  void* c = nullptr;  // bf16 or float [M][ldc]
  std::int64_t ldc = 0;
  bool f32_out = false;
  // Scratch (scratch_floats(q) floats; none when that is 0): the running shard total of the
  // fused n256 tiles, or, with the shards on separate CTAs, the shard partials and the
  // arrival counters (prepare_scratch zeroes those; the kernel leaves them zero).
  float* scratch = nullptr;
  // Shards on separate CTAs: -1 by the rule (split_for), 0 never, 1 always where the kernel
  // can (the bits are the same either way).
  int split = -1;
  // bf16 output: 16-byte stores (each quad of lanes transposes its pairs so that a lane holds
  // 8 consecutive columns; no arithmetic changes) where c and ldc are 16-byte aligned.
  bool vec_store = true;
  // A second A (a_lo: the same layout and stride as a; tensor-core kernel, shards on one CTA):
  // the product is (A + A_lo) · B with each shard r of k summed twice in turn, A's then A_lo's,
  // each from zero: the fold order is p0(A), p0(A_lo), p1(A), p1(A_lo), ... (an FP32 operand
  // split into bf16 hi + lo parts). The n256 tiles keep the running total in scratch.
  const bf16* a_lo = nullptr;
  // The running total to continue (FP32 [M][ld_in]; A kK, B kMN, shards on one CTA): total =
  // c_in + p0 + p1 + ... instead of p0 + p1 + ...; may be c itself (FP32 output: each thread
  // reads and writes its own elements).
  const float* c_in = nullptr;
  std::int64_t ld_in = 0;
};

// A product over [k_lo, k_lo + k_len) in `shards` near-equal shards (the other fields default).
inline Problem product(const bf16* a, std::int64_t lda, Major la, const bf16* b, std::int64_t ldb, Major lb, int M,
                       int N, int K, int k_lo, int k_len, int shards, void* c, std::int64_t ldc, bool f32_out) {
  Problem q;
  q.a = a;
  q.lda = lda;
  q.la = la;
  q.b = b;
  q.ldb = ldb;
  q.lb = lb;
  q.M = M;
  q.N = N;
  q.K = K;
  q.k_lo = k_lo;
  q.k_len = k_len;
  q.shards = shards;
  q.c = c;
  q.ldc = ldc;
  q.f32_out = f32_out;
  return q;
}

// A failed CUDA call: what failed and its code (cudaSuccess: none).
struct Status {
  cudaError_t error = cudaSuccess;
  const char* what = "";
  explicit operator bool() const { return error == cudaSuccess; }
};

// Tile configuration: 128 x kBN output tiles, K blocks of 64; kBN (128 or 256) is chosen by
// the product's layouts (bn_for).
inline constexpr int kBM = 128, kBK = 64;
inline constexpr int kConsumers = 2, kThreads = 128 * (1 + kConsumers);
inline constexpr int kGroupM = 16;  // tile order: groups of 16 row tiles, column tiles inside

template <int BN>
struct Tile {
  static_assert(BN == 64 || BN == 128 || BN == 256, "wgmma n64, n128 or n256");
  static constexpr int kBN = BN;
  static constexpr int kAcc = BN / 2;                  // FP32 accumulators per consumer thread
  static constexpr int kStages = BN == 256 ? 4 : BN == 128 ? 6 : 8;
  static constexpr int kATileBytes = kBM * kBK * 2;    // 16 KiB
  static constexpr int kBTileBytes = BN * kBK * 2;     // 8, 16 or 32 KiB
  static constexpr int kStageBytes = kATileBytes + kBTileBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024 /* alignment */ + 256 /* barriers */;
  // The running shard total: a second register set (n128), or, where that would not fit in
  // the registers (n256), a per-CTA slot of global scratch (L2-resident: 128 KiB per CTA,
  // written and read back by the same threads).
  static constexpr bool kTotalInScratch = BN == 256;
};

// Columns per tile, by the product's layouts (bn_for(q) below may narrow a decode-sized
// forward). The bits of an element do not depend on it (checked on the H200: BN 64, 128 and 256
// agree bit for bit), so a forward and its k_partial calls agree whatever each one's choice.
// Measured on the H200 (Qwen3-8B shapes, M = 8192 and decode): the forward is fastest on
// 128-wide tiles with the shard total in registers, the backward products on 256-wide tiles.
inline int bn_for(Major la, Major lb) { return la == Major::kK && lb == Major::kMN ? 128 : 256; }

// ---- Device PTX wrappers -----------------------------------------------------------------------

__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// The dynamic shared memory from its first 1024-byte boundary (the 128-byte swizzle's atoms need
// it; a kernel asks for 1024 bytes more than it uses).
__device__ __forceinline__ unsigned char* aligned_dynamic_smem() {
  extern __shared__ unsigned char smem_raw[];
  return reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(smem_raw) + 1023) &
                                          ~static_cast<std::uintptr_t>(1023));
}
// This thread's warpgroup, warp-uniform to the compiler.
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
}
// After mbarrier.init: the barriers visible to the other threads and to the async proxy (TMA).
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

__device__ __forceinline__ void mbar_init(std::uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(std::uint32_t bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra WAIT_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, std::uint32_t bar, int c0,
                                            int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// Quad transpose of 32-bit words: lane q (= lane % 4) of a quad holds x[j] = word j of a 4 x 4
// block row q; afterwards it holds column q (x[k] = lane k's former x[q]). Two xor-shuffle
// rounds; no arithmetic. A C-fragment epilogue uses it so that a lane holds 8 consecutive bf16
// columns of one row (the quad's pairs at columns 8 j + 2 q, j = 4 g .. 4 g + 3) for one
// 16-byte store.
__device__ __forceinline__ void quad_transpose(std::uint32_t (&x)[4], int q4) {
  const bool bq = (q4 & 1) != 0, aq = (q4 & 2) != 0;
#pragma unroll
  for (int cc = 0; cc < 2; ++cc) {
    const std::uint32_t send = bq ? x[2 * cc] : x[2 * cc + 1];
    const std::uint32_t recv = __shfl_xor_sync(0xffffffffu, send, 1);
    x[2 * cc] = bq ? recv : x[2 * cc];
    x[2 * cc + 1] = bq ? x[2 * cc + 1] : recv;
  }
#pragma unroll
  for (int d = 0; d < 2; ++d) {
    const std::uint32_t send = aq ? x[d] : x[2 + d];
    const std::uint32_t recv = __shfl_xor_sync(0xffffffffu, send, 2);
    x[d] = aq ? recv : x[d];
    x[2 + d] = aq ? x[2 + d] : recv;
  }
}

// A shared-memory matrix descriptor with the 128-byte swizzle (layout type 1).
__device__ __forceinline__ std::uint64_t smem_desc(std::uint32_t addr, std::uint32_t lbo, std::uint32_t sbo) {
  std::uint64_t d = 0;
  d |= static_cast<std::uint64_t>((addr & 0x3FFFF) >> 4);
  d |= static_cast<std::uint64_t>((lbo >> 4) & 0x3FFF) << 16;
  d |= static_cast<std::uint64_t>((sbo >> 4) & 0x3FFF) << 32;
  d |= static_cast<std::uint64_t>(1) << 62;
  return d;
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accesses to the accumulators across the asynchronous wgmma.
template <int N>
__device__ __forceinline__ void fence_acc(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// d += A · B for one m64n64k16 step (bf16 in, FP32 accumulators; scale-d = 1).
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], std::uint64_t da, std::uint64_t db) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, %34, %35;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(da), "l"(db), "n"(kTransA), "n"(kTransB));
}

// d += A · B for one m64n128k16 step (bf16 in, FP32 accumulators; scale-d = 1).
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], std::uint64_t da, std::uint64_t db) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, %66, %67;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "n"(kTransA), "n"(kTransB));
}

// d += A · B for one m64n256k16 step (bf16 in, FP32 accumulators; scale-d = 1).
template <int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], std::uint64_t da, std::uint64_t db) {
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.b32 p, 1, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
      "%128, %129, p, 1, 1, %130, %131;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "n"(kTransA), "n"(kTransB));
}

template <int BN, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma_step(float (&d)[BN / 2], std::uint64_t da, std::uint64_t db) {
  if constexpr (BN == 64)
    wgmma_m64n64k16<kTransA, kTransB>(d, da, db);
  else if constexpr (BN == 128)
    wgmma_m64n128k16<kTransA, kTransB>(d, da, db);
  else
    wgmma_m64n256k16<kTransA, kTransB>(d, da, db);
}

// Where shard r of [k_lo, k_lo + k_len) begins: cut into `shards` near-equal shards, or, with
// shard_len > 0, into shards of shard_len k (the last one ends at k_lo + k_len).
__host__ __device__ __forceinline__ int shard_begin(int k_lo, int k_len, int shards, int shard_len, int r) {
  if (shard_len > 0) {
    const std::int64_t b = static_cast<std::int64_t>(r) * shard_len;
    return k_lo + static_cast<int>(b < k_len ? b : k_len);
  }
  return k_lo + static_cast<int>(static_cast<std::int64_t>(r) * k_len / shards);
}

// Tile `t` of the grouped order: row tile (of kBM) and column tile (of kBN).
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
  const int per_group = kGroupM * tiles_n;
  const int g = t / per_group, first = g * kGroupM;
  const int rows = min(tiles_m - first, kGroupM);
  const int in = t % per_group;
  tm = first + in % rows;
  tn = in / rows;
}

struct KernelArgs {
  float* scratch;  // Tile<256>: gridDim.x slots of 256 threads x 128 floats (shards > 1), else unused
  void* c;
  std::int64_t ldc;
  int M, N;
  int k_lo, k_len, shards, shard_len;
  int tiles_m, tiles_n;
  // Shards on separate CTAs (split != 0): work unit u = (tile u / shards, shard u % shards).
  // ws: [tiles][shards][2 halves][kAcc / 4 float4][128 threads] FP32 partials; cnt: [tiles][2]
  // arrival counters (zero before and after a launch).
  int split;
  float* ws;
  int* cnt;
  int vec_store;  // bf16 output through 16-byte stores (c and ldc 16-byte aligned)
  // Rows of A's TMA box (kK A): kBM, or, with one row tile, M rounded up to 8. The rows past it
  // keep whatever the ring held: they feed only output rows past M, which are never written
  // (a row of the product depends on its row of A alone).
  int a_rows;
  int parts;  // 2 with Problem::a_lo (every shard summed from A, then from A_lo), else 1
  const float* c_in;
  std::int64_t ld_in;
};

// A consumer thread's share of a finished tile (the total over every shard), for a fused
// epilogue: element i of `res` is at row row0 + 8 ((i / 2) % 2), column col0 + 8 (i / 4) + (i % 2)
// of the product (rows >= M and columns >= N hold zeros or leftovers: an epilogue skips them).
struct Fragment {
  int row0, col0;
  int tn;    // the column tile (of the kernel's BN columns)
  int M, N;
  int lane;  // the lanes of a quad (lane / 4 equal) hold the same two rows
};

// The built-in epilogue: C stored (bf16 or FP32). A fused one (launch_wgmma_fused) is a
// trivially copyable functor `__device__ void operator()(const float (&res)[BN / 2], const
// Fragment&) const` that every thread of an active consumer warpgroup calls once per tile, all
// 32 lanes of each warp together (it may shuffle within a quad); it replaces the store.
struct StoreC {};

// The 128 threads of consumer warpgroup c (named barrier 1 + c).
__device__ __forceinline__ void wg_bar(int c) { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory"); }

// ---- The tensor-core kernel ----------------------------------------------------------------------

// Stage layout: A tile at 0 (16 KiB), B tile after it (BN x 64 x 2 bytes).
//   kK operand (A rows m, 128 of them, or B rows n, BN of them; 64 k each = 128 B, swizzled):
//     one TMA box {64 k, rows}; a warpgroup's 64 A rows start 8 KiB in; k16 step j at +32 j
//     bytes; SBO = 1024 (8 rows), LBO unused.
//   kMN operand (64 k rows of 128 m or BN n): TMA boxes {64 mn, 64 k} of 8 KiB, mn 0-63 first;
//     k16 step j at +2048 j bytes (16 rows of 128 B); SBO = 1024 (8 k rows), LBO = 8 KiB (the
//     next 64 mn); a warpgroup's 64 A columns are the box at 8 KiB * warpgroup.
template <Major LA, Major LB, bool kF32Out, int BN, class Epi = StoreC>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_a_lo,
                      const __grid_constant__ CUtensorMap map_b, const KernelArgs p, const Epi epi) {
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  using T = Tile<BN>;
  constexpr int kStages = T::kStages, kStageBytes = T::kStageBytes, kATile = T::kATileBytes, kAcc = T::kAcc;
  unsigned char* smem = aligned_dynamic_smem();
  std::uint64_t* bars = reinterpret_cast<std::uint64_t*>(smem + kStages * kStageBytes);
  const std::uint32_t smem_base = smem_u32(smem);
  const std::uint32_t full0 = smem_u32(bars), empty0 = smem_u32(bars + kStages);
  // The warpgroup index, broadcast so that the compiler sees it uniform (a branch on it around
  // wgmma must not look divergent, or ptxas serializes the wgmmas).
  const int wg = warpgroup_index();
  const int tiles = p.tiles_m * p.tiles_n;
  // Work units: a tile with all its shards (fused), or one shard of a tile (split).
  const int units = p.split ? tiles * p.shards : tiles;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + 8 * s, 1);
      mbar_init(empty0 + 8 * s, kConsumers * 4);  // one arrival per consumer warp
    }
    fence_barrier_init();
  }
  __syncthreads();

  if (wg == 0) {
    // ---- Producer ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x == 0) {
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(&map_a)) : "memory");
      asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<std::uint64_t>(&map_b)) : "memory");
      int it = 0;
      for (int u = static_cast<int>(blockIdx.x); u < units; u += static_cast<int>(gridDim.x)) {
        const int t = p.split ? u / p.shards : u;
        const int r_lo = p.split ? u % p.shards : 0, r_hi = p.split ? r_lo + 1 : p.shards * p.parts;
        int tm, tn;
        tile_coords(t, p.tiles_m, p.tiles_n, tm, tn);
        const int m0 = tm * kBM, n0 = tn * BN;
        for (int r = r_lo; r < r_hi; ++r) {
          const int kr = r / p.parts;  // the k shard; r % parts: which A
          const CUtensorMap* ma = r % p.parts ? &map_a_lo : &map_a;
          const int ks = shard_begin(p.k_lo, p.k_len, p.shards, p.shard_len, kr),
                    ke = shard_begin(p.k_lo, p.k_len, p.shards, p.shard_len, kr + 1);
          for (int k = ks; k < ke; k += kBK, ++it) {
            const int s = it % kStages;
            const unsigned phase = static_cast<unsigned>(it / kStages) & 1u;
            mbar_wait(empty0 + 8 * s, phase ^ 1u);
            const std::uint32_t full = full0 + 8 * s;
            mbar_expect_tx(full, (LA == Major::kK ? p.a_rows * kBK * 2 : kATile) + T::kBTileBytes);
            const std::uint32_t sa = smem_base + s * kStageBytes, sb = sa + kATile;
            if constexpr (LA == Major::kK) {
              tma_load_2d(sa, ma, full, k, m0);
            } else {
              tma_load_2d(sa, ma, full, m0, k);
              tma_load_2d(sa + 8192, ma, full, m0 + 64, k);
            }
            if constexpr (LB == Major::kK) {
              tma_load_2d(sb, &map_b, full, k, n0);
            } else {
#pragma unroll
              for (int q = 0; q < BN / 64; ++q) tma_load_2d(sb + q * 8192, &map_b, full, n0 + 64 * q, k);
            }
          }
        }
      }
    }
  } else {
    // ---- Consumers ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int c = wg - 1;                            // which 64 rows of the tile
    const int tid = static_cast<int>(threadIdx.x) % 128;
    const int warp = tid / 32, lane = tid % 32;
    constexpr int kTransA = LA == Major::kK ? 0 : 1, kTransB = LB == Major::kK ? 0 : 1;
    constexpr std::uint32_t kStepA = LA == Major::kK ? 32 : 2048, kStepB = LB == Major::kK ? 32 : 2048;
    constexpr std::uint32_t kLboA = LA == Major::kK ? 16 : 8192, kLboB = LB == Major::kK ? 16 : 8192;
    // This thread's slot of the scratch total (Tile<256>): float4 q at slot[q * 256].
    float4* slot = T::kTotalInScratch && p.shards * p.parts > 1 && !p.split
                       ? reinterpret_cast<float4*>(p.scratch) + static_cast<std::int64_t>(blockIdx.x) * (kAcc / 4) * 256 +
                             (c * 128 + tid)
                       : nullptr;
    int it = 0;
    float acc[kAcc];
    float total[kAcc];  // unused (eliminated) with the total in scratch
    for (int u = static_cast<int>(blockIdx.x); u < units; u += static_cast<int>(gridDim.x)) {
      const int t = p.split ? u / p.shards : u;
      const int r_lo = p.split ? u % p.shards : 0, r_hi = p.split ? r_lo + 1 : p.shards * p.parts;
      int tm, tn;
      tile_coords(t, p.tiles_m, p.tiles_n, tm, tn);
      // A warpgroup whose 64 rows all lie past M computes nothing (its rows are not written);
      // the other's arithmetic is the same either way.
      const bool active = tm * kBM + c * 64 < p.M;
      for (int r = r_lo; r < r_hi; ++r) {
        const int kr = r / p.parts;
        const int ks = shard_begin(p.k_lo, p.k_len, p.shards, p.shard_len, kr),
                    ke = shard_begin(p.k_lo, p.k_len, p.shards, p.shard_len, kr + 1);
        if (!active) {  // keep the ring going: wait for each block, release it at once
          for (int k = ks; k < ke; k += kBK, ++it) {
            const int s = it % kStages;
            mbar_wait(full0 + 8 * s, static_cast<unsigned>(it / kStages) & 1u);
            if (lane == 0) mbar_arrive(empty0 + 8 * s);
          }
          continue;
        }
#pragma unroll
        for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;
        int prev = -1;  // the stage whose wgmmas may still be reading it
        for (int k = ks; k < ke; k += kBK, ++it) {
          const int s = it % kStages;
          mbar_wait(full0 + 8 * s, static_cast<unsigned>(it / kStages) & 1u);
          const int steps = min(kBK / 16, (ke - k + 15) / 16);
          const std::uint32_t sa = smem_base + s * kStageBytes + c * 8192, sb = smem_base + s * kStageBytes + kATile;
          fence_acc(acc);
          if (steps == kBK / 16) {
            wgmma_fence();
#pragma unroll
            for (int j = 0; j < kBK / 16; ++j)
              wgmma_step<BN, kTransA, kTransB>(acc, smem_desc(sa + j * kStepA, kLboA, 1024),
                                               smem_desc(sb + j * kStepB, kLboB, 1024));
            wgmma_commit();
          } else {  // a shard's last block: only the k16 steps inside the shard
            wgmma_fence();
#pragma unroll
            for (int j = 0; j < kBK / 16 - 1; ++j)
              if (j < steps)
                wgmma_step<BN, kTransA, kTransB>(acc, smem_desc(sa + j * kStepA, kLboA, 1024),
                                                 smem_desc(sb + j * kStepB, kLboB, 1024));
            wgmma_commit();
          }
          fence_acc(acc);
          wgmma_wait<1>();
          fence_acc(acc);
          if (prev >= 0 && lane == 0) mbar_arrive(empty0 + 8 * prev);
          prev = s;
        }
        wgmma_wait<0>();
        fence_acc(acc);
        if (prev >= 0 && lane == 0) mbar_arrive(empty0 + 8 * prev);
        // Fold: total = p0; total = total + p_r (r >= 1), round-to-nearest FP32 adds.
        if constexpr (T::kTotalInScratch) {
          if (slot != nullptr) {
            if (r > 0) {  // acc = slot + acc, 8 float4 per batch, the next batch in flight
              constexpr int kB = 8, kBatches = kAcc / 4 / kB;
              float4 buf[2][kB];
#pragma unroll
              for (int q = 0; q < kB; ++q) buf[0][q] = slot[q * 256];
#pragma unroll
              for (int bt = 0; bt < kBatches; ++bt) {
                if (bt + 1 < kBatches) {
#pragma unroll
                  for (int q = 0; q < kB; ++q) buf[(bt + 1) & 1][q] = slot[((bt + 1) * kB + q) * 256];
                }
#pragma unroll
                for (int q = 0; q < kB; ++q) {
                  const int i = 4 * (bt * kB + q);
                  const float4 v = buf[bt & 1][q];
                  acc[i] = __fadd_rn(v.x, acc[i]);
                  acc[i + 1] = __fadd_rn(v.y, acc[i + 1]);
                  acc[i + 2] = __fadd_rn(v.z, acc[i + 2]);
                  acc[i + 3] = __fadd_rn(v.w, acc[i + 3]);
                }
              }
            }
            if (r + 1 < r_hi) {  // the running total waits in the slot for the next shard
#pragma unroll
              for (int q = 0; q < kAcc / 4; ++q)
                slot[q * 256] = make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]);
            }
          }
        } else {
          if (r == r_lo && p.c_in != nullptr) {  // total = c_in + p0 (n64, n128, shards on one CTA)
            const int row0 = tm * kBM + c * 64 + warp * 16 + lane / 4, col0 = tn * BN + 2 * (lane % 4);
#pragma unroll
            for (int i = 0; i < kAcc; i += 2) {
              const int row = row0 + 8 * ((i / 2) % 2), col = col0 + 8 * (i / 4);
              float2 v = make_float2(0.0f, 0.0f);
              if (row < p.M && col + 1 < p.N) {
                v = *reinterpret_cast<const float2*>(p.c_in + static_cast<std::int64_t>(row) * p.ld_in + col);
              } else if (row < p.M && col < p.N) {
                v.x = p.c_in[static_cast<std::int64_t>(row) * p.ld_in + col];
              }
              total[i] = __fadd_rn(v.x, acc[i]);
              total[i + 1] = __fadd_rn(v.y, acc[i + 1]);
            }
          } else if (r == r_lo) {
#pragma unroll
            for (int i = 0; i < kAcc; ++i) total[i] = acc[i];
          } else {
#pragma unroll
            for (int i = 0; i < kAcc; ++i) total[i] = __fadd_rn(total[i], acc[i]);
          }
        }
      }
      if (!active) continue;  // (on every CTA of the tile: no partial, no arrival)
      float(&res)[kAcc] = T::kTotalInScratch ? acc : total;
      if (!T::kTotalInScratch && p.split) {  // (n128 only: n256 has no registers to spare)
        // This unit's shard partial (in res) meets the tile's other shards' (the same half c of
        // the tile, on other CTAs): each stores its partial, fences, arrives; the last to
        // arrive folds them in shard order (total = p0 + p1 + ..., FP32 adds) and writes the
        // output. The bits are those of the fused fold: the same partials, the same adds
        // (with two shards, p_other + p_own is p0 + p1: IEEE addition commutes).
        const int r_own = r_lo, ns = p.shards;
        int* cnt = p.cnt + 2 * t + c;
        float4* const region0 =
            reinterpret_cast<float4*>(p.ws) + static_cast<std::int64_t>(t) * ns * 2 * (kAcc / 4) * 128 + tid;
        auto region = [&](int sh) { return region0 + static_cast<std::int64_t>(sh * 2 + c) * (kAcc / 4) * 128; };
        {
          float4* dst = region(r_own);
#pragma unroll
          for (int q = 0; q < kAcc / 4; ++q)
            __stcg(dst + q * 128, make_float4(res[4 * q], res[4 * q + 1], res[4 * q + 2], res[4 * q + 3]));
        }
        __threadfence();  // this thread's partial visible device-wide before the arrival
        wg_bar(c);
        __shared__ int s_ticket[kConsumers];
        if (tid == 0) s_ticket[c] = atomicAdd(cnt, 1);
        wg_bar(c);
        const int ticket = __shfl_sync(0xffffffffu, s_ticket[c], 0);
        if (ticket != ns - 1) continue;
        __threadfence();  // the others' partials (fenced before their arrivals) seen after ours
        if (ns == 2) {  // res = p_other + res, 8 float4 per batch, the next batch in flight
          const float4* src = region(1 - r_own);
          constexpr int kB = 4, kBatches = kAcc / 4 / kB;
          float4 buf[2][kB];
#pragma unroll
          for (int q = 0; q < kB; ++q) buf[0][q] = __ldcg(src + q * 128);
#pragma unroll
          for (int bt = 0; bt < kBatches; ++bt) {
            if (bt + 1 < kBatches) {
#pragma unroll
              for (int q = 0; q < kB; ++q) buf[(bt + 1) & 1][q] = __ldcg(src + ((bt + 1) * kB + q) * 128);
            }
#pragma unroll
            for (int q = 0; q < kB; ++q) {
              const int i = 4 * (bt * kB + q);
              const float4 v = buf[bt & 1][q];
              res[i] = __fadd_rn(v.x, res[i]);
              res[i + 1] = __fadd_rn(v.y, res[i + 1]);
              res[i + 2] = __fadd_rn(v.z, res[i + 2]);
              res[i + 3] = __fadd_rn(v.w, res[i + 3]);
            }
          }
        } else {  // every partial is in scratch (this one too): res = p0, res = res + p1, ...
          {
            const float4* src = region(0);
#pragma unroll
            for (int q = 0; q < kAcc / 4; ++q) {
              const float4 v = __ldcg(src + q * 128);
              res[4 * q] = v.x, res[4 * q + 1] = v.y, res[4 * q + 2] = v.z, res[4 * q + 3] = v.w;
            }
          }
          for (int sh = 1; sh < ns; ++sh) {
            const float4* src = region(sh);
#pragma unroll
            for (int q = 0; q < kAcc / 4; ++q) {
              const float4 v = __ldcg(src + q * 128);
              res[4 * q] = __fadd_rn(res[4 * q], v.x);
              res[4 * q + 1] = __fadd_rn(res[4 * q + 1], v.y);
              res[4 * q + 2] = __fadd_rn(res[4 * q + 2], v.z);
              res[4 * q + 3] = __fadd_rn(res[4 * q + 3], v.w);
            }
          }
        }
        if (tid == 0) *cnt = 0;  // every arrival is in: ready for the next launch
      }
      // Epilogue: element i of the fragment: column 8 (i / 4) + 2 (lane % 4) + (i % 2), row
      // 16 warp + lane / 4 + 8 ((i / 2) % 2) of this warpgroup's 64.
      const int row0 = tm * kBM + c * 64 + warp * 16 + lane / 4;
      const int col0 = tn * BN + 2 * (lane % 4);
      if constexpr (!std::is_same_v<Epi, StoreC>) {
        epi(res, Fragment{row0, col0, tn, p.M, p.N, lane});
        continue;
      }
      const bool pair_ok = p.ldc % 2 == 0;
      if constexpr (!kF32Out) {
        if (p.vec_store) {
          // Quad transpose: lane q of a quad holds, for column groups j = 4 g + jj, the pair at
          // columns 8 j + 2 q; two xor-shuffle rounds leave it the pairs k = 0..3 at columns
          // 8 (4 g + q) + 2 k, that is 8 consecutive columns, one 16-byte store.
          const int q4 = lane & 3;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int row = row0 + 8 * h;
#pragma unroll
            for (int g = 0; g < BN / 32; ++g) {
              std::uint32_t x[4];
#pragma unroll
              for (int jj = 0; jj < 4; ++jj) {
                const int j = 4 * g + jj;
                const __nv_bfloat162 v2 = __floats2bfloat162_rn(res[4 * j + 2 * h], res[4 * j + 2 * h + 1]);
                x[jj] = *reinterpret_cast<const std::uint32_t*>(&v2);
              }
              quad_transpose(x, q4);
              if (row < p.M) {
                const int col = tn * BN + 8 * (4 * g + q4);
                bf16* out = static_cast<bf16*>(p.c) + static_cast<std::int64_t>(row) * p.ldc + col;
                if (col + 7 < p.N) {
                  *reinterpret_cast<uint4*>(out) = make_uint4(x[0], x[1], x[2], x[3]);
                } else {
#pragma unroll
                  for (int k = 0; k < 4; ++k) {
                    const __nv_bfloat162 v2 = *reinterpret_cast<const __nv_bfloat162*>(&x[k]);
                    if (col + 2 * k < p.N) out[2 * k] = v2.x;
                    if (col + 2 * k + 1 < p.N) out[2 * k + 1] = v2.y;
                  }
                }
              }
            }
          }
          continue;
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + 8 * h;
        if (row >= p.M) continue;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
          const int col = col0 + 8 * j;
          const float v0 = res[4 * j + 2 * h], v1 = res[4 * j + 2 * h + 1];
          const std::int64_t off = static_cast<std::int64_t>(row) * p.ldc + col;
          if constexpr (kF32Out) {
            float* out = static_cast<float*>(p.c) + off;
            if (pair_ok && col + 1 < p.N) {
              *reinterpret_cast<float2*>(out) = make_float2(v0, v1);
            } else {
              if (col < p.N) out[0] = v0;
              if (col + 1 < p.N) out[1] = v1;
            }
          } else {
            bf16* out = static_cast<bf16*>(p.c) + off;
            if (pair_ok && col + 1 < p.N) {
              *reinterpret_cast<__nv_bfloat162*>(out) = __floats2bfloat162_rn(v0, v1);
            } else {
              if (col < p.N) out[0] = __float2bfloat16_rn(v0);
              if (col + 1 < p.N) out[1] = __float2bfloat16_rn(v1);
            }
          }
        }
      }
    }
  }
#endif
}

// ---- The CUDA-core fallback -----------------------------------------------------------------------

inline constexpr int kFbThreads = 256, kFbTile = 64, kFbK = 16;

template <Major L>
__device__ __forceinline__ float fb_load(const bf16* x, std::int64_t ld, int row, int k) {
  return __bfloat162float(L == Major::kK ? x[static_cast<std::int64_t>(row) * ld + k]
                                         : x[static_cast<std::int64_t>(k) * ld + row]);
}

// A block owns a 64 x 64 tile, each thread 4 x 4 elements; K goes through shared memory in
// 16-deep slices (FP32); every element an fma chain in increasing k per shard.
template <Major LA, Major LB>
__global__ void __launch_bounds__(kFbThreads, 1)
    fallback_gemm_kernel(const bf16* __restrict__ a, std::int64_t lda, const bf16* __restrict__ b, std::int64_t ldb,
                         KernelArgs p, bool f32_out) {
  __shared__ float sa[kFbK][kFbTile + 4];
  __shared__ float sb[kFbK][kFbTile + 4];
  const int tx = static_cast<int>(threadIdx.x) % 16, ty = static_cast<int>(threadIdx.x) / 16;
  const int m0 = static_cast<int>(blockIdx.x) * kFbTile, n0 = static_cast<int>(blockIdx.y) * kFbTile;
  float total[16], acc[16];
  for (int r = 0; r < p.shards; ++r) {
    const int ks = shard_begin(p.k_lo, p.k_len, p.shards, p.shard_len, r),
                    ke = shard_begin(p.k_lo, p.k_len, p.shards, p.shard_len, r + 1);
#pragma unroll
    for (int e = 0; e < 16; ++e) acc[e] = 0.0f;
    for (int k0 = ks; k0 < ke; k0 += kFbK) {
      for (int q = static_cast<int>(threadIdx.x); q < kFbK * kFbTile; q += kFbThreads) {
        const int x = q % kFbTile, kk = q / kFbTile, gk = k0 + kk;
        sa[kk][x] = gk < ke && m0 + x < p.M ? fb_load<LA>(a, lda, m0 + x, gk) : 0.0f;
        sb[kk][x] = gk < ke && n0 + x < p.N ? fb_load<LB>(b, ldb, n0 + x, gk) : 0.0f;
      }
      __syncthreads();
      const int kc = min(kFbK, ke - k0);
      for (int kk = 0; kk < kc; ++kk) {
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i * 4 + j] = __fmaf_rn(sa[kk][ty * 4 + i], sb[kk][tx * 4 + j], acc[i * 4 + j]);
      }
      __syncthreads();
    }
#pragma unroll
    for (int e = 0; e < 16; ++e) total[e] = r == 0 ? acc[e] : __fadd_rn(total[e], acc[e]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = m0 + ty * 4 + i;
    if (row >= p.M) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int col = n0 + tx * 4 + j;
      if (col >= p.N) continue;
      const std::int64_t off = static_cast<std::int64_t>(row) * p.ldc + col;
      const float v = total[i * 4 + j];
      if (f32_out)
        static_cast<float*>(p.c)[off] = v;
      else
        static_cast<bf16*>(p.c)[off] = __float2bfloat16_rn(v);
    }
  }
}

// c[i] = bf16(p[0][i] + p[1][i] + ...), the adds in shard order. (A template, so that several
// translation units may include this header: Out is bf16.)
template <class Out>
__global__ void fold_kernel(const float* __restrict__ partials, int shards, std::int64_t n, Out* __restrict__ c) {
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float t = partials[i];
    for (int r = 1; r < shards; ++r) t = __fadd_rn(t, partials[static_cast<std::int64_t>(r) * n + i]);
    c[i] = __float2bfloat16_rn(t);
  }
}

// ---- Host side ------------------------------------------------------------------------------------

// Whether TMA takes the operands: 16-byte aligned bases and row strides (ld % 8 == 0).
inline bool tma_operands_ok(const Problem& q) {
  return q.lda % 8 == 0 && q.ldb % 8 == 0 && reinterpret_cast<std::uintptr_t>(q.a) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(q.b) % 16 == 0 && q.lda > 0 && q.ldb > 0;
}

// Whether the tensor-core kernel computes q by the rules: TMA takes the operands, and every
// shard's length is a positive multiple of 16 except that the last may end at K (zeros beyond).
inline bool wgmma_applies(const Problem& q) {
  if (!tma_operands_ok(q) || q.shards < 1 || q.k_len <= 0) return false;
  if (q.a_lo != nullptr && reinterpret_cast<std::uintptr_t>(q.a_lo) % 16 != 0) return false;
  if (q.c_in != nullptr) {  // the register total of A kK, B kMN tiles
    if (q.la != Major::kK || q.lb != Major::kMN) return false;
    if (q.ld_in % 2 != 0 || reinterpret_cast<std::uintptr_t>(q.c_in) % 8 != 0) return false;
  }
  if (q.shard_len > 0 && q.shards != (q.k_len + q.shard_len - 1) / q.shard_len) return false;
  for (int r = 0; r < q.shards; ++r) {
    const int ks = shard_begin(q.k_lo, q.k_len, q.shards, q.shard_len, r),
              ke = shard_begin(q.k_lo, q.k_len, q.shards, q.shard_len, r + 1);
    if (ke - ks <= 0) return false;
    if ((ke - ks) % 16 != 0 && !(r == q.shards - 1 && ke == q.K)) return false;
  }
  return true;
}

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

inline EncodeTiledFn encode_tiled_fn() {
  static EncodeTiledFn fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<EncodeTiledFn>(f);
  }();
  return fn;
}

// A 2-D bf16 tensor [outer][inner] (row stride ld elements) with boxes {box_inner, box_outer},
// 128-byte swizzle, zeros out of bounds.
inline Status make_map(CUtensorMap& map, const bf16* base, std::int64_t inner, std::int64_t outer, std::int64_t ld,
                       unsigned box_inner, unsigned box_outer) {
  const EncodeTiledFn encode = encode_tiled_fn();
  if (encode == nullptr) return {cudaErrorNotSupported, "cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)"};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(outer)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t elem[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(base), dims, strides, box,
                            elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return {cudaErrorInvalidValue, "cuTensorMapEncodeTiled"};
  return {};
}

inline int sm_count() {
  static int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      v = 0;
    return v > 0 ? v : 132;
  }();
  return n;
}

inline KernelArgs kernel_args(const Problem& q, int tile_m, int tile_n) {
  return KernelArgs{q.scratch, q.c, q.ldc, q.M, q.N, q.k_lo, q.k_len, q.shards, q.shard_len, (q.M + tile_m - 1) / tile_m,
                    (q.N + tile_n - 1) / tile_n, 0, nullptr, nullptr,
                    q.vec_store && !q.f32_out && q.ldc % 8 == 0 && reinterpret_cast<std::uintptr_t>(q.c) % 16 == 0,
                    q.la == Major::kK && q.M <= tile_m ? (q.M + 7) / 8 * 8 : tile_m,
                    q.a_lo != nullptr ? 2 : 1, q.c_in, q.ld_in};
}

// CTAs of the persistent grid for a product with `tiles` output tiles.
inline int wgmma_grid(std::int64_t tiles) { return static_cast<int>(tiles < sm_count() ? tiles : sm_count()); }

// The rule for shards on separate CTAs: where the tiles alone fill one round of the grid with
// SMs to spare (decode-sized M) and spreading the shards takes fewer rounds. It may depend on M:
// the bits are the same either way (see the kernel). Measured on the H200 (decode, Qwen3-8B
// shapes): down (K 12288) from 0.43 to 0.70x cuBLAS with the shards apart.
inline bool split_for(std::int64_t tiles, int shards) {
  const std::int64_t sms = sm_count();
  return shards >= 2 && shards <= 16 && tiles <= sms && (tiles * shards + sms - 1) / sms < shards;
}

inline std::int64_t tile_count(const Problem& q, int bn) {
  return static_cast<std::int64_t>((q.M + kBM - 1) / kBM) * ((q.N + bn - 1) / bn);
}

inline bool split_with(const Problem& q, int bn) {
  if (q.shards < 2 || q.shards > 16 || q.split == 0 || q.a_lo != nullptr || q.c_in != nullptr) return false;
  return q.split == 1 || split_for(tile_count(q, bn), q.shards);
}

// The tile width for q. A forward with one row tile (decode-sized M) streams B and little else:
// it takes the width, 64 or 128, whose busiest SM streams the least of B (rounds of the grid x
// columns x k per work unit; ties to 128). Decode q/o at k_shards 2: 64 units of 128 columns
// on 132 SMs, or 128 units of 64. It may depend on M: the bits do not depend on the width.
inline int bn_for(const Problem& q) {
  const int bn = bn_for(q.la, q.lb);
  if (bn != 128 || q.M > kBM) return bn;
  const std::int64_t sms = sm_count();
  auto busiest = [&](int w) {
    const bool split = split_with(q, w);
    const std::int64_t units = tile_count(q, w) * (split ? q.shards : 1);
    const std::int64_t k = split ? (q.k_len + q.shards - 1) / q.shards : q.k_len;
    return (units + sms - 1) / sms * w * k;
  };
  return busiest(64) < busiest(128) ? 64 : 128;
}

// Whether the tensor-core kernel runs q's shards on separate CTAs (wgmma_applies(q) must hold).
inline bool split_applies(const Problem& q) { return split_with(q, bn_for(q)); }

// The split scratch: [cnt: tiles x 2 int][ws: tiles x shards x 128 x bn partials], in floats.
struct SplitLayout {
  std::size_t cnt = 0, ws = 0, total = 0;
};
inline SplitLayout split_layout(const Problem& q, int bn) {
  SplitLayout l;
  const std::size_t tiles = static_cast<std::size_t>(tile_count(q, bn));
  l.cnt = 0;
  l.ws = (tiles * 2 + 3) / 4 * 4;
  l.total = l.ws + tiles * static_cast<std::size_t>(q.shards) * kBM * static_cast<std::size_t>(bn);
  return l;
}

// Floats of scratch the tensor-core kernel needs for q (the split's partials and counters, or
// the fused n256 tiles' shard total: 128 x 256 per CTA); 0 when it needs none or does not take q.
inline std::size_t scratch_floats(const Problem& q) {
  if (q.M <= 0 || q.N <= 0 || q.shards * (q.a_lo != nullptr ? 2 : 1) <= 1 || !wgmma_applies(q)) return 0;
  if (split_applies(q)) {  // room for the split (n64, n128) and for the n256 total (a caller may force a width)
    const std::size_t a64 = split_layout(q, 64).total, a128 = split_layout(q, 128).total,
                      b = static_cast<std::size_t>(wgmma_grid(tile_count(q, 256))) * kBM * 256;
    const std::size_t a = a64 > a128 ? a64 : a128;
    return a > b ? a : b;
  }
  if (bn_for(q) != 256) return 0;
  return static_cast<std::size_t>(wgmma_grid(tile_count(q, 256))) * kBM * 256;
}

// Makes fresh scratch (scratch_floats(q) floats at q.scratch) ready: zeroes the split's
// counters (the kernel leaves them zero again). Stream-ordered on the default stream.
inline Status prepare_scratch(const Problem& q) {
  if (q.scratch == nullptr || scratch_floats(q) == 0 || !split_applies(q)) return {};
  // (the counters of the narrowest tiles: room for whichever width runs)
  const cudaError_t e = cudaMemsetAsync(q.scratch, 0, split_layout(q, 64).ws * sizeof(float));
  return e == cudaSuccess ? Status{} : Status{e, "cudaMemsetAsync(det_gemm split counters)"};
}

template <Major LA, Major LB, bool kF32Out, int BN, class Epi = StoreC>
Status launch_wgmma_typed(const Problem& q, const Epi& epi = {}) {
  using T = Tile<BN>;
  auto* kernel = &wgmma_gemm_kernel<LA, LB, kF32Out, BN, Epi>;
  // Set at every launch, not once per process: the translation units that include this header
  // each hold their own copy of the kernel, and a once-only flag shared between them left the
  // others' copies at the default limit (seen on the H200: cudaErrorInvalidValue at launch).
  const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (attr != cudaSuccess) return {attr, "cudaFuncSetAttribute(wgmma_gemm_kernel)"};
  const bool split = !T::kTotalInScratch && split_applies(q);
  if ((split || T::kTotalInScratch) && q.shards * (q.a_lo != nullptr ? 2 : 1) > 1 && q.scratch == nullptr)
    return {cudaErrorInvalidValue, "wgmma_gemm_kernel: no scratch for the shard total"};
  KernelArgs args = kernel_args(q, kBM, BN);
  CUtensorMap ma, ma_lo, mb;
  // A: kK {K, M} boxes {64, a_rows}; kMN {M, K} boxes {64, 64}. B: kK {K, N} {64, BN}; kMN {N, K} {64, 64}.
  auto a_map = [&](CUtensorMap& m, const bf16* a) {
    return LA == Major::kK ? make_map(m, a, q.K, q.M, q.lda, kBK, static_cast<unsigned>(args.a_rows))
                           : make_map(m, a, q.M, q.K, q.lda, 64, kBK);
  };
  Status s = a_map(ma, q.a);
  if (!s) return s;
  ma_lo = ma;
  if (q.a_lo != nullptr && !(s = a_map(ma_lo, q.a_lo))) return s;
  s = LB == Major::kK ? make_map(mb, q.b, q.K, q.N, q.ldb, kBK, BN) : make_map(mb, q.b, q.N, q.K, q.ldb, 64, kBK);
  if (!s) return s;
  std::int64_t units = static_cast<std::int64_t>(args.tiles_m) * args.tiles_n;
  if (split) {
    const SplitLayout l = split_layout(q, BN);
    args.split = 1;
    args.cnt = reinterpret_cast<int*>(q.scratch + l.cnt);
    args.ws = q.scratch + l.ws;
    units *= q.shards;
  }
  const int grid = wgmma_grid(units);
  kernel<<<grid, kThreads, T::kSmemBytes>>>(ma, ma_lo, mb, args, epi);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return {e, "wgmma_gemm_kernel launch"};
  return {};
}

template <Major LA, Major LB, int BN>
Status launch_wgmma_bn(const Problem& q) {
  return q.f32_out ? launch_wgmma_typed<LA, LB, true, BN>(q) : launch_wgmma_typed<LA, LB, false, BN>(q);
}

// The tensor-core kernel on q with n-tiles of BN (wgmma_applies(q) must hold; M, N > 0).
template <int BN>
Status launch_wgmma_with(const Problem& q) {
  if (q.la == Major::kK && q.lb == Major::kMN) return launch_wgmma_bn<Major::kK, Major::kMN, BN>(q);
  if (q.la == Major::kK && q.lb == Major::kK) return launch_wgmma_bn<Major::kK, Major::kK, BN>(q);
  if (q.la == Major::kMN && q.lb == Major::kMN) return launch_wgmma_bn<Major::kMN, Major::kMN, BN>(q);
  return {cudaErrorInvalidValue, "wgmma_gemm_kernel: A kMN with B kK is not instantiated"};
}

// The tensor-core kernel on q, its tile chosen by bn_for (layouts, N, K; one row tile or more).
// n64 is instantiated for the forward layout only (the one bn_for narrows).
inline Status launch_wgmma(const Problem& q) {
  const int bn = bn_for(q);
  if (bn == 64) {
    if (q.la != Major::kK || q.lb != Major::kMN) return {cudaErrorInvalidValue, "wgmma_gemm_kernel: n64 is forward-only"};
    return launch_wgmma_bn<Major::kK, Major::kMN, 64>(q);
  }
  return bn == 256 ? launch_wgmma_with<256>(q) : launch_wgmma_with<128>(q);
}

// The tensor-core kernel on q (wgmma_applies(q) must hold; M, N > 0) with a fused epilogue in
// place of the store (q.c unused): A kK, B kK (rows of both contiguous in k), 128 x 256 tiles.
// The tile's total is the one the store would round (the same bits for every element).
inline constexpr int kFusedBN = 256;
template <class Epi>
Status launch_wgmma_fused(const Problem& q, const Epi& epi) {
  static_assert(std::is_trivially_copyable_v<Epi>, "an epilogue is a kernel parameter");
  if (q.la != Major::kK || q.lb != Major::kK) return {cudaErrorInvalidValue, "wgmma_gemm_kernel: fused epilogue needs A and B kK"};
  return launch_wgmma_typed<Major::kK, Major::kK, true, kFusedBN, Epi>(q, epi);
}

template <Major LA, Major LB>
Status launch_fallback_typed(const Problem& q) {
  const KernelArgs args = kernel_args(q, kFbTile, kFbTile);
  if (args.tiles_n > 65535) return {cudaErrorInvalidConfiguration, "fallback_gemm_kernel: more than 65535 column tiles"};
  const dim3 grid(static_cast<unsigned>(args.tiles_m), static_cast<unsigned>(args.tiles_n));
  fallback_gemm_kernel<LA, LB><<<grid, kFbThreads>>>(q.a, q.lda, q.b, q.ldb, args, q.f32_out);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return {e, "fallback_gemm_kernel launch"};
  return {};
}

// The CUDA-core kernel on q (any shape; M, N > 0).
inline Status launch_fallback(const Problem& q) {
  if (q.la == Major::kK && q.lb == Major::kMN) return launch_fallback_typed<Major::kK, Major::kMN>(q);
  if (q.la == Major::kK && q.lb == Major::kK) return launch_fallback_typed<Major::kK, Major::kK>(q);
  if (q.la == Major::kMN && q.lb == Major::kMN) return launch_fallback_typed<Major::kMN, Major::kMN>(q);
  return {cudaErrorInvalidValue, "fallback_gemm_kernel: A kMN with B kK is not instantiated"};
}

inline Status launch_fold(const float* partials, int shards, std::int64_t n, bf16* c) {
  if (n == 0) return {};
  const std::int64_t blocks = (n + 255) / 256;
  fold_kernel<bf16><<<static_cast<unsigned>(blocks < 65536 ? blocks : 65536), 256>>>(partials, shards, n, c);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return {e, "fold_kernel launch"};
  return {};
}

// The rule of the vocabulary-sized products (lm_head, linear_logp). The tensor core's FP32
// accumulation drops low bits at each k16 step (it does not round to nearest); over the
// vocabulary (lm_head's dhidden, K = 151936) one accumulator came out 5x further from the FP32
// reference than cpu_bf16 on the H200 (docs/log/gpu-runs.md). A reduction longer than kLongK
// therefore runs in shards of kPromoteK k, each from zero, the shard sums added with
// round-to-nearest FP32 adds in increasing k; the order depends on K alone. The shards of a
// tile stay on one CTA: the tiles fill the machine at these widths.
inline constexpr int kLongK = 16384, kPromoteK = 512;
inline void promote_long_k(Problem& q) {
  if (q.k_len <= kLongK) return;
  q.shard_len = kPromoteK;
  q.shards = (q.k_len + kPromoteK - 1) / kPromoteK;
  q.split = 0;
}

// One product by the rules with whichever kernel applies (the choice depends on the operands'
// alignment and the shard lengths, never on M). M, N > 0; k_len may be 0 (zeros).
inline Status launch_product(const Problem& q) {
  if (q.a_lo != nullptr || q.c_in != nullptr) {  // the tensor-core kernel's alone
    if (q.k_len == 0 || q.M <= 0 || q.N <= 0 || !wgmma_applies(q))
      return {cudaErrorInvalidValue, "det_gemm: a_lo / c_in need the tensor-core kernel (TMA operands; c_in: A kK, B kMN)"};
    return launch_wgmma(q);
  }
  if (q.k_len == 0) {
    const std::size_t es = q.f32_out ? 4 : 2;
    const cudaError_t e = cudaMemset2DAsync(q.c, static_cast<std::size_t>(q.ldc) * es, 0,
                                            static_cast<std::size_t>(q.N) * es, static_cast<std::size_t>(q.M));
    return e == cudaSuccess ? Status{} : Status{e, "cudaMemset2DAsync"};
  }
  return wgmma_applies(q) ? launch_wgmma(q) : launch_fallback(q);
}

}  // namespace ws1cuda::detgemm

// det_gemm on cuda_bf16: c[M,N] = a[M,K] · b[K,N]; backward da = dy · bᵀ (over N), db = aᵀ · dy
// (over M); bf16 in and out. Same contract and input checks as the cpu_bf16 candidate
// (lib/ops/det_gemm.cpp, det_gemm_inputs), and the same bits: the declared tree (spec §9.2
// Option B) in exactly the candidate's operations (lib/ops/gemm_cpu.cpp), per output element:
//   the reduction range [lo,hi) is a leaf when hi - lo <= k_tree_leaf, else it splits at
//   mid = lo + (hi - lo) / 2; a leaf is an FP32 fma chain from 0.0f in increasing k
//   (acc = fma(a, b, acc)), rounded to bf16; a merge is bf16(float(left) + float(right)).
// The tree depends on K and the leaf width only, so the host lists its leaves once, in k order,
// each with the number of merges that complete right after it (TreeStep, the CPU's plan), and
// every thread evaluates it in post-order with a small stack of pending bf16 values per output.
//
// Kernel det_gemm_tree_kernel<LA, LB> (one per product: NN forward, NT for da, TN for db):
// a block of 256 threads owns a 64 x 64 tile of the output, each thread 4 x 4 elements; K goes
// through shared memory in 32-wide slices (coalesced loads, widened to FP32), independent of
// the leaves, which may start and end anywhere in a slice. Every element's arithmetic involves
// only its row of the left operand and its column of the right one, in the tree's fixed order:
// deterministic, and c's / da's rows do not depend on M. The arithmetic is spelled with
// __fmaf_rn / __fadd_rn: which operations fuse is part of the contract, not left to -fmad.
// No tensor cores: an MMA sums its k16 products in its own order, which the declared FP32 fma
// chain of a leaf does not allow (det_gemm_tc.cu is the tensor-core variant: the same tree,
// leaves summed by the MMA, within the contract's tolerance rather than bit-equal).
//
// Kernel det_gemm_leaf_kernel (forward, M <= kSkinnyRows: a decode step's one token per
// sequence): the tiled kernel computes 64 rows per tile, so a one-row c would waste 63/64 of its
// work and stream b through too few blocks. Here a block owns 32 columns: its 8 warps compute
// the leaves (warp w takes leaves w, w + 8, ...; lane = column, so b's rows are read coalesced),
// each leaf the same FP32 fma chain rounded to bf16, into shared memory; then one thread per
// (row, column) runs the plan's merges in post-order. Same operations on the same values as the
// tiled kernel: equal bits (test/gpu/det_gemm_skinny_test.cpp).
#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "det_gemm.hpp"
#include "det_gemm_tree.cuh"
#include "gemm_tiles.cuh"
#include "op_support.hpp"
#include "registry.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/launch_region.cuh"

namespace ws1cuda {
namespace {

constexpr std::string_view kOp = "det_gemm";
using gemm::Major;
using gemm::Operand;

// ---- The tree plan (host) -------------------------------------------------------------------------
// TreeStep, tree_steps, round_bf16 and TreePlan live in det_gemm_tree.cuh (shared with
// det_gemm_tc.cu); make_tree_plan is defined below, after this namespace.

// Pending values per output element; the post-order stack of a mid-split tree over K < 2^31
// holds at most 32 (one per level, plus the newest leaf).
constexpr int kMaxStack = 32;

// ---- The kernel -------------------------------------------------------------------------------------

constexpr int kThreadsX = 16, kThreadsY = 16, kThreads = kThreadsX * kThreadsY;
constexpr int kRM = 4, kRN = 4;                                     // elements per thread
constexpr int kTM = kThreadsY * kRM, kTN = kThreadsX * kRN, kTK = 32;  // 64 x 64 tile, 32-wide K slices
constexpr int kPad = 4;  // keeps float4 rows aligned; breaks the power-of-two row stride

// Rows [x0, x0 + X) of an operand's K slice [k0, k0 + kTK) into s[k][x] as FP32, zero outside.
// Consecutive threads read consecutive addresses along the operand's contiguous dimension.
template <Major L, int X>
__device__ __forceinline__ void stage_slice(const Operand& o, int x0, int k0, int x_extent, int K,
                                            float (*s)[X + kPad]) {
  static_assert((X * kTK) % kThreads == 0, "whole elements per thread");
#pragma unroll
  for (int i = 0; i < X * kTK / kThreads; ++i) {
    const int e = static_cast<int>(threadIdx.x) + i * kThreads;
    const int x = L == Major::kK ? e / kTK : e % X;
    const int k = L == Major::kK ? e % kTK : e / X;
    const int gx = x0 + x, gk = k0 + k;
    s[k][x] = gx < x_extent && gk < K ? to_f32(o.data[gemm::element_offset<L>(o, gx, gk)]) : 0.0f;
  }
}

// Post-order step after a leaf: round it, merge it with the `merges` newest pending values
// (left + right, rounded), push the result.
__device__ __forceinline__ void close_leaf(float (&acc)[kRM * kRN], unsigned short (&stack)[kMaxStack][kRM * kRN],
                                           int& sp, int merges) {
#pragma unroll
  for (int e = 0; e < kRM * kRN; ++e) {
    float v = round_bf16(acc[e]);
    for (int q = 1; q <= merges; ++q)
      v = round_bf16(__fadd_rn(__uint_as_float(static_cast<unsigned>(stack[sp - q][e]) << 16), v));
    stack[sp - merges][e] = static_cast<unsigned short>(__float_as_uint(v) >> 16);  // exact: v is bf16
    acc[e] = 0.0f;
  }
  sp += 1 - merges;
}

template <Major LA, Major LB>
__global__ void __launch_bounds__(kThreads)
    det_gemm_tree_kernel(Operand a, Operand b, bf16* c, int M, int N, int K, const TreeStep* steps) {
  __shared__ __align__(16) float sa[kTK][kTM + kPad];
  __shared__ __align__(16) float sb[kTK][kTN + kPad];
  const int tiles_n = (N + kTN - 1) / kTN;
  const int m0 = static_cast<int>(blockIdx.x) / tiles_n * kTM, n0 = static_cast<int>(blockIdx.x) % tiles_n * kTN;
  const int tx = static_cast<int>(threadIdx.x) % kThreadsX, ty = static_cast<int>(threadIdx.x) / kThreadsX;

  float acc[kRM * kRN];
#pragma unroll
  for (int e = 0; e < kRM * kRN; ++e) acc[e] = 0.0f;
  unsigned short stack[kMaxStack][kRM * kRN];  // bf16 bits of the pending values
  int sp = 0, step = 0;
  int leaf_end = steps[0].hi;  // the sentinel when K = 0

  for (int k0 = 0; k0 < K; k0 += kTK) {
    stage_slice<LA, kTM>(a, m0, k0, M, K, sa);
    stage_slice<LB, kTN>(b, n0, k0, N, K, sb);
    __syncthreads();
    const int kc = min(kTK, K - k0);
    int kk = 0;
    while (kk < kc) {
      const int stop = min(kc, leaf_end - k0);  // the slice's end or the leaf's
      for (; kk < stop; ++kk) {
        const float4 av = *reinterpret_cast<const float4*>(&sa[kk][ty * kRM]);
        const float4 bv = *reinterpret_cast<const float4*>(&sb[kk][tx * kRN]);
        const float ar[kRM] = {av.x, av.y, av.z, av.w}, br[kRN] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
        for (int i = 0; i < kRM; ++i)
#pragma unroll
          for (int j = 0; j < kRN; ++j) acc[i * kRN + j] = __fmaf_rn(ar[i], br[j], acc[i * kRN + j]);
      }
      if (k0 + kk == leaf_end) {
        close_leaf(acc, stack, sp, steps[step].merges);
        leaf_end = steps[++step].hi;
      }
    }
    __syncthreads();  // the slice is read; the next one may overwrite it
  }

  // The root is the one value left (nothing when K = 0: zeros, as the CPU).
#pragma unroll
  for (int i = 0; i < kRM; ++i) {
    const int row = m0 + ty * kRM + i;
    if (row >= M) continue;
    unsigned short out[kRN];
#pragma unroll
    for (int j = 0; j < kRN; ++j) out[j] = sp > 0 ? stack[0][i * kRN + j] : 0;
    const int col = n0 + tx * kRN;
    unsigned short* dst = reinterpret_cast<unsigned short*>(c) + static_cast<std::int64_t>(row) * N + col;
    if (col + kRN <= N && N % kRN == 0) {  // (row * N + col) % 4 == 0: an 8-byte aligned store
      *reinterpret_cast<uint2*>(dst) = make_uint2(out[0] | (static_cast<unsigned>(out[1]) << 16),
                                                  out[2] | (static_cast<unsigned>(out[3]) << 16));
    } else {
      for (int j = 0; j < kRN && col + j < N; ++j) dst[j] = out[j];
    }
  }
}

// c[M,N] = A · B with the tree over K; nothing is launched for an empty c.
template <Major LA, Major LB>
void tree_gemm(const Operand& a, const Operand& b, DeviceArray<bf16>& c, int M, int N, int K,
               const TreePlan& plan, const char* kernel_name) {
  if (M == 0 || N == 0) return;
  const std::int64_t blocks = static_cast<std::int64_t>((M + kTM - 1) / kTM) * ((N + kTN - 1) / kTN);
  det_gemm_tree_kernel<LA, LB><<<static_cast<unsigned>(blocks), kThreads>>>(a, b, c.get(), M, N, K, plan.steps.get());
  check_launch(kernel_name);
}

// ---- The skinny forward (few rows) ------------------------------------------------------------------

constexpr int kSkinnyRows = 4, kLeafWarps = 8, kSkinnyThreads = kLeafWarps * 32;
constexpr std::size_t kSkinnySmemLimit = 160 * 1024;  // leaf values of a block, bytes

struct LeafPlan {
  DeviceArray<int> lo;  // leaf j covers [lo[j], lo[j + 1]); lo has nleaves + 1 entries
  int leaves = 0;
};

LeafPlan make_leaf_plan(std::int64_t K, std::int64_t leaf) {
  std::vector<TreeStep> steps;
  if (K > 0) tree_steps(0, K, leaf, steps);
  std::vector<int> lo{0};
  for (const TreeStep& s : steps) lo.push_back(s.hi);
  LeafPlan p{DeviceArray<int>(lo.size()), static_cast<int>(steps.size())};
  WS1_CUDA(cudaMemcpy(p.lo.get(), lo.data(), p.lo.bytes(), cudaMemcpyHostToDevice));
  return p;
}

std::size_t skinny_smem(int M, int leaves) {
  return static_cast<std::size_t>(leaves) * M * 32 * sizeof(unsigned short);
}

// c[M,N] = a[M,K] · b[K,N], a and b row-major; M <= kSkinnyRows.
__global__ void __launch_bounds__(kSkinnyThreads)
    det_gemm_leaf_kernel(const bf16* __restrict__ a, const bf16* __restrict__ b, bf16* c, int M, int N, int K,
                         const int* __restrict__ leaf_lo, int leaves, const TreeStep* __restrict__ steps) {
  extern __shared__ unsigned short leaf_bits[];  // [leaf][row][lane]
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int col = static_cast<int>(blockIdx.x) * 32 + lane;
  const bool live = col < N;
  for (int j = warp; j < leaves; j += kLeafWarps) {
    const int lo = leaf_lo[j], hi = leaf_lo[j + 1];
    float acc[kSkinnyRows] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 8
    for (int k = lo; k < hi; ++k) {
      const float bv = live ? to_f32(b[static_cast<std::int64_t>(k) * N + col]) : 0.0f;
#pragma unroll
      for (int r = 0; r < kSkinnyRows; ++r)
        if (r < M) acc[r] = __fmaf_rn(to_f32(a[static_cast<std::int64_t>(r) * K + k]), bv, acc[r]);
    }
#pragma unroll
    for (int r = 0; r < kSkinnyRows; ++r)
      if (r < M) leaf_bits[(j * M + r) * 32 + lane] = static_cast<unsigned short>(__float_as_uint(round_bf16(acc[r])) >> 16);
  }
  __syncthreads();
  const int r = static_cast<int>(threadIdx.x) / 32;
  if (r >= M || !live) return;
  unsigned short stack[kMaxStack];
  int sp = 0;
  for (int j = 0; j < leaves; ++j) {
    float v = __uint_as_float(static_cast<unsigned>(leaf_bits[(j * M + r) * 32 + lane]) << 16);
    const int merges = steps[j].merges;
    for (int q = 1; q <= merges; ++q)
      v = round_bf16(__fadd_rn(__uint_as_float(static_cast<unsigned>(stack[sp - q]) << 16), v));
    stack[sp - merges] = static_cast<unsigned short>(__float_as_uint(v) >> 16);
    sp += 1 - merges;
  }
  reinterpret_cast<unsigned short*>(c)[static_cast<std::int64_t>(r) * N + col] = stack[0];
}

// Whether the skinny kernel takes this forward (K > 0, few rows, its leaves fit in shared memory).
bool skinny(int M, int K, const LeafPlan& plan) {
  return K > 0 && M > 0 && M <= kSkinnyRows && skinny_smem(M, plan.leaves) <= kSkinnySmemLimit;
}

void skinny_gemm(const DeviceArray<bf16>& a, const DeviceArray<bf16>& b, DeviceArray<bf16>& c, int M, int N, int K,
                 const LeafPlan& leaves, const TreePlan& plan) {
  const std::size_t smem = skinny_smem(M, leaves.leaves);
  WS1_CUDA(cudaFuncSetAttribute(det_gemm_leaf_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(kSkinnySmemLimit)));
  det_gemm_leaf_kernel<<<blocks_for(N, 32), kSkinnyThreads, smem>>>(a.get(), b.get(), c.get(), M, N, K,
                                                                    leaves.lo.get(), leaves.leaves, plan.steps.get());
  check_launch("det_gemm_leaf_kernel");
}

// ---- Host functions ---------------------------------------------------------------------------------

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::DetGemmInputs x = ws1::ops::det_gemm_inputs(kOp, in, false);
    const std::int64_t leaf = ws1::ops::det_gemm_tree_leaf(kOp, ctx);
    const DetGemmExtents e = det_gemm_extents(x);
    const TreePlan plan = make_tree_plan(e.K, leaf);
    const DeviceArray<bf16> a = upload_bf16(x.a), b = upload_bf16(x.b);
    DeviceArray<bf16> c = poisoned<bf16>(static_cast<std::size_t>(e.M) * e.N);
    // c[m, n] = sum over k of a[m, k] * b[k, n]: A = a [M][K], B = b [K][N].
    const LeafPlan leaves = make_leaf_plan(e.K, leaf);
    launch_region("det_gemm.fwd", [&] {
      if (skinny(e.M, e.K, leaves)) {
        skinny_gemm(a, b, c, e.M, e.N, e.K, leaves, plan);
        return;
      }
      tree_gemm<Major::kK, Major::kMN>(gemm::make_operand(a.get(), e.K), gemm::make_operand(b.get(), e.N), c, e.M,
                                       e.N, e.K, plan, "det_gemm_tree_kernel_nn");
    });
    return ws1::Tensors{{"c", download_bf16(c, {e.M, e.N})}};
  });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::DetGemmInputs x = ws1::ops::det_gemm_inputs(kOp, in, true);
    const std::int64_t leaf = ws1::ops::det_gemm_tree_leaf(kOp, ctx);
    const DetGemmExtents e = det_gemm_extents(x);
    const TreePlan over_n = make_tree_plan(e.N, leaf), over_m = make_tree_plan(e.M, leaf);
    const DeviceArray<bf16> a = upload_bf16(x.a), b = upload_bf16(x.b), dy = upload_bf16(*x.dy);
    DeviceArray<bf16> da = poisoned<bf16>(static_cast<std::size_t>(e.M) * e.K);
    DeviceArray<bf16> db = poisoned<bf16>(static_cast<std::size_t>(e.K) * e.N);
    launch_region("det_gemm.bwd", [&] {
      // da[m, k] = sum over n of dy[m, n] * b[k, n]: A = dy [M][N], B = bᵀ (b is [K][N]).
      tree_gemm<Major::kK, Major::kK>(gemm::make_operand(dy.get(), e.N), gemm::make_operand(b.get(), e.N), da, e.M,
                                      e.K, e.N, over_n, "det_gemm_tree_kernel_nt");
      det_gemm_naive_db(a, dy, db, e.M, e.K, e.N, over_m);
    });
    return ws1::Tensors{{"da", download_bf16(da, {e.M, e.K})}, {"db", download_bf16(db, {e.K, e.N})}};
  });
}

}  // namespace

// The plan on the device, followed by a sentinel leaf that never ends (hi = INT_MAX).
TreePlan make_tree_plan(std::int64_t K, std::int64_t leaf) {
  std::vector<TreeStep> steps;
  if (K > 0) tree_steps(0, K, leaf, steps);
  int sp = 0, most = 0;
  for (const TreeStep& s : steps) {
    sp = sp - s.merges + 1;
    most = std::max(most, sp);
  }
  ws1::ops::require(most <= kMaxStack, kOp, "k_tree_leaf",
                    "the tree over K = " + std::to_string(K) + " needs " + std::to_string(most) +
                        " pending values (the cuda kernel holds " + std::to_string(kMaxStack) + ")");
  steps.push_back({INT_MAX, 0});
  TreePlan p{DeviceArray<TreeStep>(steps.size())};
  WS1_CUDA(cudaMemcpy(p.steps.get(), steps.data(), p.steps.bytes(), cudaMemcpyHostToDevice));
  return p;
}

void det_gemm_naive_db(const DeviceArray<bf16>& a, const DeviceArray<bf16>& dy, DeviceArray<bf16>& db, int M, int K,
                       int N, const TreePlan& over_m) {
  // db[k, n] = sum over m of a[m, k] * dy[m, n]: A = aᵀ (a is [M][K]), B = dy [M][N].
  tree_gemm<Major::kMN, Major::kMN>(gemm::make_operand(a.get(), K), gemm::make_operand(dy.get(), N), db, K, N, M,
                                    over_m, "det_gemm_tree_kernel_tn");
}

const CudaOp& det_gemm_cuda() {
  static const CudaOp op{kOp, forward, backward, "det_gemm_tree_kernel_nn,det_gemm_leaf_kernel",
                         "det_gemm_tree_kernel_nt,det_gemm_tree_kernel_tn"};
  return op;
}

}  // namespace ws1cuda

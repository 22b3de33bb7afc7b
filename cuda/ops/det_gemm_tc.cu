// det_gemm's tensor-core variant on cuda_bf16 (ws1cuda/det_gemm_tc.hpp): the declared tree of
// det_gemm.cu (spec §9.2 Option B, det_gemm_tree.cuh) with each leaf's FP32 sum from mma.sync.
//
// Applies when the tree over the reduction length R is regular (det_gemm_regular_tree): 2^d
// leaves of one width w (w % 8 == 0, w <= 32, d <= 10), so leaf j is k in [j*w, (j+1)*w), its
// start 16-byte aligned, and the post-order merges form a binary counter over the leaf index.
// Everything else runs det_gemm's naive kernels (det_gemm.cu). The choice depends on R and the
// leaf width only, never on M.
//
// Kernel det_gemm_tc_kernel<LB, kDepth, kPacked>: a block of 256 threads owns a 64 x 64 tile of c; each
// of its 8 warps owns 32 x 16 (2 x 2 m16n8 tiles: 16 accumulators per thread). The block walks
// the leaves in k order, one leaf per 32-wide shared-memory slice (4-stage cp.async pipeline,
// gemm_tiles.cuh's loader and swizzle), k past the leaf's end zero-filled, so a leaf of 24 is
// summed as two k16 steps whose last 8 products are exact zeros (0 * 0: no NaN from the next
// leaf's data). Per leaf and output element:
//   acc = 0; acc += the leaf's k16 steps in increasing k (mma.sync m16n8k16 bf16 -> f32, the
//   16 products of a step summed in the tensor core's fixed internal order); leaf = bf16(acc)
// then, the leaf being number j (0-based), its post-order merges: for each level l = 0, 1, ...
// while bit l of j is set, leaf = bf16(float(pending[l]) + float(leaf)) (pending[l], the
// completed left subtree of 2^l leaves, is the left operand), then pending[l] = leaf at the
// first clear bit. After the last leaf (j = 2^d - 1) the carried value is the root. Rounding
// is round_bf16 (RNE, the CPU's NaN rule) and each add is __fadd_rn, as in the naive kernels;
// only the order inside a leaf differs from them (the MMA's, not the fma chain's).
// The pending values stay in registers as bf16 pairs: stack[kDepth][8] words, indexed only by
// the unrolled level loop; kDepth (7, 9 or 10) is the smallest instantiation >= d.
//
// Arithmetic (kPacked): the kernel computes that definition two elements per instruction
// (bf16_pack.cuh: cvt.rn.bf16x2.f32 for a leaf, add.rn.bf16x2 for a merge, the definition re-run
// on a thread's 8 words when the hardware gave a NaN in any of them), bit-equal to it for every
// input; the per-element form (kPacked = false: round_bf16 and __fadd_rn on each value, ~17
// instructions per element and leaf, which bounded the kernel) is kept only for the self-test
// entries (det_gemm_tc_selftest.cu), which compare the two bit for bit.
// ptxas (sm_90, CUDA 13.0) registers, NN (B N-major) / NT (B K-major), kDepth 7, 9, 10: packed
// 116 / 112, 128 / 124, 140 / 137; per-element 116 / 112, 128 / 128, 140 / 137 (kDepth 10 runs
// one block per SM); no stack frame, no spills.
//
// Deterministic and invariant: no atomics, no split-K; an element's arithmetic involves only its
// row of A and its column of B (rows past M and columns past N are zero-filled, each output
// element is its own MMA lane value), so rows of c do not depend on M or the tile position; the
// tree is the declared one over the whole R, so its root is bf16(left half + right half) of the
// two half-R trees (TP2).
#include <algorithm>
#include <bit>
#include <climits>
#include <string>
#include <vector>

#include "det_gemm.hpp"
#include "bf16_pack.cuh"
#include "det_gemm_tc.hpp"
#include "det_gemm_tree.cuh"
#include "gemm_tiles.cuh"
#include "op_support.hpp"
#include "registry.hpp"
#include "ws1cuda/det_gemm_tc.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/launch_region.cuh"

namespace ws1cuda {
namespace {

constexpr std::string_view kOp = "det_gemm";
using gemm::Major;
using gemm::Operand;

// ---- Geometry ---------------------------------------------------------------------------------------

constexpr int kBM = 64, kBN = 64;            // block tile of c
constexpr int kBK = gemm::MmaTile::kBK;      // 32: one leaf (at most 32 wide) per slice
constexpr int kWarpsM = 2, kWarpsN = 4, kThreads = 32 * kWarpsM * kWarpsN;
constexpr int kWM = kBM / kWarpsM, kWN = kBN / kWarpsN;  // 32 x 16 per warp
constexpr int kMT = kWM / 16, kNT = kWN / 8;              // 2 x 2 mma tiles per warp
constexpr int kWords = kMT * kNT * 2;                     // bf16 pairs per thread (c0c1, c2c3)
constexpr int kStages = 4;
constexpr int kStageElems = (kBM + kBN) * kBK;            // 8 KiB per stage
static_assert(kThreads == gemm::MmaTile::kThreads, "gemm::load_tile strides by MmaTile::kThreads");
static_assert(kNT == 2, "one ldmatrix.x4 gives a warp's two n8 tiles of B");
static_assert(kBK == 32 && kDetGemmTcMaxDepth <= 30, "a leaf fits one slice; the leaf count fits an int");

// ---- Fragments (layouts of gemm_tiles.cuh, for this kernel's tile widths) -----------------------------

// A fragment (rows m_base..+15, k kk..+15) of the A tile: A is always K-major here (a [M][K] in
// the forward, dy [M][N] for da).
__device__ __forceinline__ void load_a(unsigned (&a)[4], const bf16* s, int m_base, int kk) {
  const int lane = static_cast<int>(threadIdx.x) & 31, j = lane >> 3, r = lane & 7;
  // Matrices 0..3: (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15).
  gemm::ldmatrix_x4(a, s + gemm::chunk_offset<Major::kK, kBM>(m_base + r + 8 * (j & 1), kk + 8 * (j >> 1)));
}

// B fragments of two n8 tiles (columns n_base..+15, k kk..+15): b[0], b[1] for columns
// n_base..+7, b[2], b[3] for n_base+8..+15.
template <Major L>
__device__ __forceinline__ void load_b(unsigned (&b)[4], const bf16* s, int n_base, int kk) {
  const int lane = static_cast<int>(threadIdx.x) & 31, j = lane >> 3, r = lane & 7;
  // Matrices 0..3: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
  if constexpr (L == Major::kK)
    gemm::ldmatrix_x4(b, s + gemm::chunk_offset<L, kBN>(n_base + r + 8 * (j >> 1), kk + 8 * (j & 1)));
  else
    gemm::ldmatrix_x4_trans(b, s + gemm::chunk_offset<L, kBN>(n_base + 8 * (j >> 1), kk + r + 8 * (j & 1)));
}

// ---- The binary counter -------------------------------------------------------------------------

// v = merge(left, v), word by word: det_gemm's bf16(float(left) + float(v)), packed or per element.
template <bool kPacked>
__device__ __forceinline__ void merge_into(const unsigned (&left)[kWords], unsigned (&v)[kWords]) {
  if constexpr (kPacked) {
    bf16_pack::merge_words(left, v);
  } else {
#pragma unroll
    for (int q = 0; q < kWords; ++q) v[q] = bf16_pack::merge_definition(left[q], v[q]);
  }
}

// Leaf j's post-order merges, the carries of a binary counter: with `carries` the trailing ones
// of j (the same for every thread: j is uniform), levels 0 .. carries - 1 merge their pending
// left subtree into v and level `carries` keeps v. Every level is a compile-time index (the
// stack stays in registers: no early exit from the unrolled loop, which would not be unrolled).
// The empty volatile asm keeps the store a branch: speculated, it became 8 selects at every
// level above `carries`, ~9 instructions per level and leaf. When carries = kDepth (the last
// leaf of the deepest tree) every level merges; after the last leaf v is the root.
template <bool kPacked, int kDepth>
__device__ __forceinline__ void carry(unsigned (&stack)[kDepth][kWords], unsigned (&v)[kWords], int carries) {
#pragma unroll
  for (int l = 0; l < kDepth; ++l) {
    if (l < carries) {
      merge_into<kPacked>(stack[l], v);
    } else if (l == carries) {
      asm volatile("");  // not speculated: see above
#pragma unroll
      for (int q = 0; q < kWords; ++q) stack[l][q] = v[q];
    }
  }
}

// ---- The kernel -----------------------------------------------------------------------------------

// c[M,N] = A · B over 2^d leaves of `width` (d <= kDepth); A K-major ([M][R]), B as LB;
// kPacked: bf16_pack's packed arithmetic, else the per-element definition (same bits).
// Two blocks per SM (128 registers) hold a stack of up to 9 levels without spills; 10 levels
// take one block per SM.
template <Major LB, int kDepth, bool kPacked>
__global__ void __launch_bounds__(kThreads, kDepth <= 9 ? 2 : 1)
    det_gemm_tc_kernel(Operand a, Operand b, bf16* c, int M, int N, int width, int leaves, int tiles_n) {
  __shared__ __align__(128) bf16 smem[kStages * kStageElems];
  const int bid = static_cast<int>(blockIdx.x);
  const int m0 = bid / tiles_n * kBM, n0 = bid % tiles_n * kBN;  // consecutive blocks share A's rows
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int wm = (warp / kWarpsN) * kWM, wn = (warp % kWarpsN) * kWN;

  auto stage_a = [&](int s) { return smem + s * kStageElems; };
  auto stage_b = [&](int s) { return smem + s * kStageElems + kBM * kBK; };
  // Leaf j's k range [j * width, (j + 1) * width) into stage j % kStages; the slice's k past the
  // leaf (and rows / columns past M / N) zero-filled.
  auto load_leaf = [&](int j) {
    const int s = j % kStages, lo = j * width;
    gemm::load_tile<Major::kK, kBM>(a, m0, lo, M, lo + width, stage_a(s));
    gemm::load_tile<LB, kBN>(b, n0, lo, N, lo + width, stage_b(s));
  };
  const int k16_steps = width > 16 ? 2 : 1;

  unsigned stack[kDepth][kWords];  // pending[l]: the left subtree of 2^l leaves, bf16 pairs
  // One commit group per leaf (empty past the end) keeps the wait count uniform.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < leaves) load_leaf(s);
    gemm::cp_async_commit();
  }
  for (int j = 0; j < leaves; ++j) {
    gemm::cp_async_wait<kStages - 2>();  // leaf j has landed (this thread's copies)
    __syncthreads();                     // ... everyone's; and leaf j - 1's stage is no longer read
    if (j + kStages - 1 < leaves) load_leaf(j + kStages - 1);
    gemm::cp_async_commit();
    const bf16* sa = stage_a(j % kStages);
    const bf16* sb = stage_b(j % kStages);

    // The leaf's FP32 sum, from zero.
    float acc[kMT][kNT][4];
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int t = 0; t < kNT; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][t][e] = 0.0f;
#pragma unroll
    for (int step = 0; step < 2; ++step) {
      if (step >= k16_steps) continue;  // a leaf of at most 16: one step
      unsigned af[kMT][4], bfr[4];
#pragma unroll
      for (int i = 0; i < kMT; ++i) load_a(af[i], sa, wm + 16 * i, 16 * step);
      load_b<LB>(bfr, sb, wn, 16 * step);
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int t = 0; t < kNT; ++t) gemm::mma_bf16_16816(acc[i][t], af[i], bfr[2 * t], bfr[2 * t + 1]);
    }

    // Round the leaf, then its post-order merges (the binary counter's carries). Word
    // (i * kNT + t) * 2 + h holds acc[i][t][2h], acc[i][t][2h + 1]: row g (h = 0) or g + 8.
    unsigned v[kWords];
    if constexpr (kPacked) {
      float x[2 * kWords];  // acc in word order (registers renamed, no copies)
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int t = 0; t < kNT; ++t)
#pragma unroll
          for (int e = 0; e < 4; ++e) x[(i * kNT + t) * 4 + e] = acc[i][t][e];
      bf16_pack::round_words(x, v);
    } else {
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int t = 0; t < kNT; ++t)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            v[(i * kNT + t) * 2 + h] = bf16_pack::round_pack_definition(acc[i][t][2 * h], acc[i][t][2 * h + 1]);
    }
    carry<kPacked>(stack, v, __ffs(~j) - 1);  // carries: the trailing ones of j
    if (j + 1 < leaves) continue;

    // The last leaf's carries ended at the root: store it.
    unsigned short* out = reinterpret_cast<unsigned short*>(c);
    const int row0 = m0 + wm + (lane >> 2), col0 = n0 + wn + 2 * (lane & 3);
#pragma unroll
    for (int i = 0; i < kMT; ++i)
#pragma unroll
      for (int t = 0; t < kNT; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row0 + 16 * i + 8 * h, col = col0 + 8 * t;
          if (row >= M || col >= N) continue;
          const unsigned w = v[(i * kNT + t) * 2 + h];
          unsigned short* p = out + static_cast<std::int64_t>(row) * N + col;
          if (col + 1 < N && N % 2 == 0) {  // (row * N + col) even: a 4-byte aligned pair
            *reinterpret_cast<unsigned*>(p) = w;
          } else {
            p[0] = static_cast<unsigned short>(w & 0xFFFFu);
            if (col + 1 < N) p[1] = static_cast<unsigned short>(w >> 16);
          }
        }
  }
  gemm::cp_async_wait<0>();
}

template <Major LB, bool kPacked>
void launch_tc_as(const Operand& a, const Operand& b, bf16* c, int M, int N, const RegularTree& t,
                  const char* kernel_name) {
  if (M == 0 || N == 0) return;
  const std::int64_t tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + kBN - 1) / kBN;
  const std::int64_t blocks = tiles_m * tiles_n;
  ws1::ops::require(blocks <= INT_MAX, kOp, "c",
                    std::to_string(M) + " x " + std::to_string(N) + " needs more tiles than one launch takes");
  ws1::ops::require(t.width % 8 == 0 && t.width > 0 && t.width <= kBK && t.depth >= 0 && t.depth <= kDetGemmTcMaxDepth,
                    kOp, "k_tree_leaf", "internal: not a regular tree");
  // The smallest stack that holds the tree: fewer live registers for the common depths.
  auto* kernel = t.depth <= 7   ? &det_gemm_tc_kernel<LB, 7, kPacked>
                 : t.depth <= 9 ? &det_gemm_tc_kernel<LB, 9, kPacked>
                                : &det_gemm_tc_kernel<LB, kDetGemmTcMaxDepth, kPacked>;
  kernel<<<static_cast<unsigned>(blocks), kThreads>>>(a, b, c, M, N, t.width, 1 << t.depth,
                                                      static_cast<int>(tiles_n));
  check_launch(kernel_name);
}

template <Major LB>
void launch_tc(const Operand& a, const Operand& b, bf16* c, int M, int N, const RegularTree& t,
               TcArithmetic arithmetic, const char* kernel_name) {
  if (arithmetic == TcArithmetic::kPacked)
    launch_tc_as<LB, true>(a, b, c, M, N, t, kernel_name);
  else
    launch_tc_as<LB, false>(a, b, c, M, N, t, kernel_name);
}

// ---- Host functions ---------------------------------------------------------------------------------

// The tensors of a result computed elsewhere (det_gemm's naive op), its error rethrown for guarded().
ws1::Tensors value_or_throw(ws1::Result<ws1::Tensors> r) {
  if (!r) throw ws1::ops::OpInputError{r.error()};
  return std::move(r).value();
}

}  // namespace

std::optional<RegularTree> det_gemm_regular_tree(std::int64_t R, std::int64_t leaf) {
  // More than 2^kDetGemmTcMaxDepth leaves of at most 32: not taken (and never listed).
  if (R <= 0 || leaf < 1 || R > (std::int64_t{kBK} << kDetGemmTcMaxDepth)) return std::nullopt;
  std::vector<TreeStep> steps;
  tree_steps(0, R, leaf, steps);
  const auto leaves = static_cast<unsigned>(steps.size());
  if (!std::has_single_bit(leaves)) return std::nullopt;
  const int depth = std::countr_zero(leaves);
  const int width = steps[0].hi;
  if (depth > kDetGemmTcMaxDepth || width % 8 != 0 || width > kBK) return std::nullopt;
  // Leaf j ends at (j + 1) * width, and the merges after it are the carries of a binary counter
  // (the trailing ones of j): the perfect tree the kernel evaluates.
  for (unsigned j = 0; j < leaves; ++j) {
    if (steps[j].hi != static_cast<std::int64_t>(j + 1) * width || steps[j].merges != std::countr_zero(j + 1))
      return std::nullopt;
  }
  return RegularTree{width, depth};
}

void det_gemm_tc_nn(const bf16* a, const bf16* b, bf16* c, int M, int N, const RegularTree& t,
                    TcArithmetic arithmetic) {
  const std::int64_t R = t.length();
  // A = a [M][R] (K-major), B = b [R][N] (N-major).
  launch_tc<Major::kMN>(gemm::make_operand(a, R), gemm::make_operand(b, N), c, M, N, t, arithmetic,
                        "det_gemm_tc_kernel_nn");
}

void det_gemm_tc_nt(const bf16* a, const bf16* b, bf16* c, int M, int N, const RegularTree& t,
                    TcArithmetic arithmetic) {
  const std::int64_t R = t.length();
  // A = a [M][R] (K-major), B = bᵀ with b [N][R] (K-major).
  launch_tc<Major::kK>(gemm::make_operand(a, R), gemm::make_operand(b, R), c, M, N, t, arithmetic,
                       "det_gemm_tc_kernel_nt");
}

bool det_gemm_tc_applies(std::int64_t R, std::int64_t leaf) { return det_gemm_regular_tree(R, leaf).has_value(); }

ws1::Result<ws1::Tensors> det_gemm_tc_forward_with(const ws1::Tensors& in, const ws1::OpContext& ctx,
                                                   TcArithmetic arithmetic) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::DetGemmInputs x = ws1::ops::det_gemm_inputs(kOp, in, false);
    const std::int64_t leaf = ws1::ops::det_gemm_tree_leaf(kOp, ctx);
    const DetGemmExtents e = det_gemm_extents(x);
    const std::optional<RegularTree> tree = det_gemm_regular_tree(e.K, leaf);
    if (!tree) return value_or_throw(det_gemm_cuda().forward(in, ctx));  // not regular: the naive kernels
    const DeviceArray<bf16> a = upload_bf16(x.a), b = upload_bf16(x.b);
    DeviceArray<bf16> c = poisoned<bf16>(static_cast<std::size_t>(e.M) * e.N);
    launch_region(arithmetic == TcArithmetic::kPacked ? "det_gemm_tc.fwd" : "det_gemm_tc.fwd.per_element",
                  [&] { det_gemm_tc_nn(a.get(), b.get(), c.get(), e.M, e.N, *tree, arithmetic); });
    return ws1::Tensors{{"c", download_bf16(c, {e.M, e.N})}};
  });
}

ws1::Result<ws1::Tensors> det_gemm_tc_backward_with(const ws1::Tensors& in, const ws1::OpContext& ctx,
                                                    TcArithmetic arithmetic) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::DetGemmInputs x = ws1::ops::det_gemm_inputs(kOp, in, true);
    const std::int64_t leaf = ws1::ops::det_gemm_tree_leaf(kOp, ctx);
    const DetGemmExtents e = det_gemm_extents(x);
    const std::optional<RegularTree> over_n = det_gemm_regular_tree(e.N, leaf);  // da's reduction
    if (!over_n) return value_or_throw(det_gemm_cuda().backward(in, ctx));      // not regular: the naive kernels
    const TreePlan over_m = make_tree_plan(e.M, leaf);                           // db's, naive
    const DeviceArray<bf16> a = upload_bf16(x.a), b = upload_bf16(x.b), dy = upload_bf16(*x.dy);
    DeviceArray<bf16> da = poisoned<bf16>(static_cast<std::size_t>(e.M) * e.K);
    DeviceArray<bf16> db = poisoned<bf16>(static_cast<std::size_t>(e.K) * e.N);
    launch_region(arithmetic == TcArithmetic::kPacked ? "det_gemm_tc.bwd" : "det_gemm_tc.bwd.per_element", [&] {
      // da[m, k] = sum over n of dy[m, n] * b[k, n]: A = dy [M][N], B = bᵀ (b is [K][N]).
      det_gemm_tc_nt(dy.get(), b.get(), da.get(), e.M, e.K, *over_n, arithmetic);
      // db[k, n] = sum over m of a[m, k] * dy[m, n]: the naive kernel (any M).
      det_gemm_naive_db(a, dy, db, e.M, e.K, e.N, over_m);
    });
    return ws1::Tensors{{"da", download_bf16(da, {e.M, e.K})}, {"db", download_bf16(db, {e.K, e.N})}};
  });
}

ws1::Result<ws1::Tensors> det_gemm_tensor_core_forward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return det_gemm_tc_forward_with(in, ctx, TcArithmetic::kPacked);
}

ws1::Result<ws1::Tensors> det_gemm_tensor_core_backward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return det_gemm_tc_backward_with(in, ctx, TcArithmetic::kPacked);
}

}  // namespace ws1cuda

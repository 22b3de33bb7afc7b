// det_gemm on cuda_bf16: c[M,N] = a[M,K] · b[K,N]; backward da = dy · bᵀ (over N), db = aᵀ · dy
// (over M); bf16 in and out. Same input checks as the cpu_bf16 candidate (lib/ops/det_gemm.cpp,
// det_gemm_inputs). Numerics: DESIGN §3.1 Option A, the contract's det_gemm_k_split
// (ws1/op.hpp OpContext::k_shards, k_partial):
//   * forward: K is cut into k_shards contiguous shards [r*K/t, (r+1)*K/t); each shard is summed
//     in FP32 from zero (the wgmma accumulator, k16 steps in increasing k), the partials are
//     added in FP32 in shard order (p0 + p1, then + p2, ...), and c is rounded to bf16 once;
//   * k_partial: c is the FP32 sum over the K given (no split, no rounding, dtype float32),
//     bit-identical to that shard's partial inside the t-shard forward, because a shard's sum
//     depends only on its length and N (same kernel, same k16 steps, whatever M, the tile or
//     the shard's offset in K);
//   * backward: da and db plain FP32 sums over N resp. M, rounded once (k_shards is the
//     forward's only).
// Kernels (det_gemm_wgmma.cuh): the sm_90a TMA + wgmma kernel, or, where TMA cannot take the
// operands or a shard is not a multiple of 16 (except at K's end), an FP32 CUDA-core kernel
// with the same rules. A forward whose shards would take different kernels as separate
// k_partial calls runs each shard exactly as that call would (its columns of a copied to a
// contiguous [M, L] array), into FP32 partials, then folds them in shard order. Where the
// tiles alone would leave SMs idle (decode-sized M), the forward's declared shards run on
// different CTAs (detgemm::split_for), each shard's partial from zero, the tile's last arriving
// CTA folding them in shard order: the same partials and adds as on one CTA, so the same bits.
// No other split of K, no arrival order that reaches a value: deterministic, and a row of c or
// da never depends on M.
#include <cstdint>
#include <string>
#include <vector>

#include "det_gemm_wgmma.cuh"
#include "registry.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/launch_region.cuh"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

namespace ws1cuda {
namespace {

constexpr std::string_view kOp = "det_gemm";
using detgemm::Major;
using detgemm::Problem;

void check_status(const detgemm::Status& s) {
  if (!s) check(s.error, s.what);
}

struct Extents {
  int M = 0, N = 0, K = 0;
};

Extents extents(const ws1::ops::DetGemmInputs& x) {
  const std::int64_t M = x.a.shape()[0], K = x.a.shape()[1], N = x.b.shape()[1];
  ws1::ops::require(M < (std::int64_t{1} << 31) && K < (std::int64_t{1} << 31) && N < (std::int64_t{1} << 31) &&
                        M * N < (std::int64_t{1} << 40),
                    kOp, "a", "shape too large for the cuda kernels");
  return {static_cast<int>(M), static_cast<int>(N), static_cast<int>(K)};
}

// The forward's shard count (1 on a k_partial call; the contract's k_shards, >= 1, else).
int k_shards(const ws1::OpContext& ctx) {
  const std::int64_t t = ws1::ops::det_gemm_shards(kOp, ctx);
  ws1::ops::require(t <= (1 << 20), kOp, "k_shards", "at most 2^20 shards (got " + std::to_string(t) + ")");
  return static_cast<int>(t);
}

// C = A · B over k in [k_lo, k_lo + k_len) cut into `shards`; C [M][ldc], bf16 (or float with
// f32_out).
Problem forward_problem(const bf16* a, std::int64_t lda, const bf16* b, int M, int N, int K, int k_lo, int k_len,
                        int shards, void* c, bool f32_out) {
  return detgemm::product(a, lda, Major::kK, b, N, Major::kMN, M, N, K, k_lo, k_len, shards, c, N, f32_out);
}

// The forward's launches for the bf16 output (k_shards = t). `scratch`: the tensor-core
// kernel's shard total (detgemm::scratch_floats); `a_shards` (room for every shard's columns of
// a, each copy 16-byte aligned) and `partials` ([t][M][N]): the composite path's.
void forward_launches(const DeviceArray<bf16>& a, const DeviceArray<bf16>& b, DeviceArray<bf16>& c, const Extents& e,
                      int t, DeviceArray<float>& scratch, DeviceArray<bf16>& a_shards, DeviceArray<float>& partials) {
  if (e.M == 0 || e.N == 0) return;
  Problem whole = forward_problem(a.get(), e.K, b.get(), e.M, e.N, e.K, 0, e.K, t, c.get(), false);
  whole.scratch = scratch.get();
  if (e.K == 0 || detgemm::wgmma_applies(whole)) {
    check_status(detgemm::launch_product(whole));
    return;
  }
  // Each shard as its own k_partial call would run it: a [M, L] copy of its columns of a, the
  // rows [ks, ke) of b.
  std::int64_t a_off = 0;
  bool any_wgmma = false;
  std::vector<Problem> parts;
  for (int r = 0; r < t; ++r) {
    const int ks = detgemm::shard_begin(0, e.K, t, 0, r), L = detgemm::shard_begin(0, e.K, t, 0, r + 1) - ks;
    bf16* a_r = a_shards.get() + a_off;
    const Problem p = forward_problem(a_r, L, b.get() + static_cast<std::int64_t>(ks) * e.N, e.M, e.N, L, 0, L, 1,
                                      partials.get() + static_cast<std::int64_t>(r) * e.M * e.N, true);
    any_wgmma = any_wgmma || (L > 0 && detgemm::wgmma_applies(p));
    parts.push_back(p);
    // The next copy 16-byte aligned, as a freshly uploaded tensor (TMA needs that).
    a_off += (static_cast<std::int64_t>(e.M) * L + 7) / 8 * 8;
  }
  if (!any_wgmma) {  // every shard on the CUDA-core kernel: it folds them itself, in the same order
    check_status(detgemm::launch_fallback(whole));
    return;
  }
  for (int r = 0; r < t; ++r) {
    const int ks = detgemm::shard_begin(0, e.K, t, 0, r);
    const Problem& p = parts[static_cast<std::size_t>(r)];
    if (p.k_len > 0)
      WS1_CUDA(cudaMemcpy2DAsync(const_cast<bf16*>(p.a), static_cast<std::size_t>(p.k_len) * sizeof(bf16),
                                 a.get() + ks, static_cast<std::size_t>(e.K) * sizeof(bf16),
                                 static_cast<std::size_t>(p.k_len) * sizeof(bf16), static_cast<std::size_t>(e.M),
                                 cudaMemcpyDeviceToDevice));
    check_status(detgemm::launch_product(p));
  }
  check_status(detgemm::launch_fold(partials.get(), t, static_cast<std::int64_t>(e.M) * e.N, c.get()));
}

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::DetGemmInputs x = ws1::ops::det_gemm_inputs(kOp, in, false);
    const int t = k_shards(ctx);
    const Extents e = extents(x);
    const DeviceArray<bf16> a = upload_bf16(x.a), b = upload_bf16(x.b);
    const std::size_t n = static_cast<std::size_t>(e.M) * e.N;
    if (ctx.k_partial) {
      // The FP32 partial of the K given: one shard, no rounding.
      DeviceArray<float> c = poisoned<float>(n);
      launch_region("det_gemm.fwd", [&] {
        if (n == 0) return;
        check_status(detgemm::launch_product(
            forward_problem(a.get(), e.K, b.get(), e.M, e.N, e.K, 0, e.K, 1, c.get(), true)));
      });
      return ws1::Tensors{{"c", download_f32(c, {e.M, e.N})}};
    }
    DeviceArray<bf16> c = poisoned<bf16>(n);
    // The tensor-core kernel's scratch (n256 shard total or split partials, t > 1), and the composite path's
    // copies and partials (shards on different kernels); each empty when not needed.
    const Problem whole = forward_problem(a.get(), e.K, b.get(), e.M, e.N, e.K, 0, e.K, t, c.get(), false);
    const bool composite = n > 0 && e.K > 0 && t > 1 && !detgemm::wgmma_applies(whole);
    DeviceArray<float> scratch(n > 0 ? detgemm::scratch_floats(whole) : 0);
    if (scratch.size() > 0) {  // the split's arrival counters start at zero
      Problem prep = whole;
      prep.scratch = scratch.get();
      check_status(detgemm::prepare_scratch(prep));
    }
    DeviceArray<bf16> a_shards(composite ? static_cast<std::size_t>(e.M) * e.K + 8 * static_cast<std::size_t>(t) : 0);
    DeviceArray<float> partials(composite ? n * static_cast<std::size_t>(t) : 0);
    launch_region("det_gemm.fwd", [&] { forward_launches(a, b, c, e, t, scratch, a_shards, partials); });
    return ws1::Tensors{{"c", download_bf16(c, {e.M, e.N})}};
  });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext&) {
  return ws1::ops::guarded(kOp, [&] {
    const ws1::ops::DetGemmInputs x = ws1::ops::det_gemm_inputs(kOp, in, true);
    const Extents e = extents(x);
    const DeviceArray<bf16> a = upload_bf16(x.a), b = upload_bf16(x.b), dy = upload_bf16(*x.dy);
    DeviceArray<bf16> da = poisoned<bf16>(static_cast<std::size_t>(e.M) * e.K);
    DeviceArray<bf16> db = poisoned<bf16>(static_cast<std::size_t>(e.K) * e.N);
    launch_region("det_gemm.bwd", [&] {
      // da[m, k] = sum over n of dy[m, n] * b[k, n]: A = dy [M][N] (kK), B(n, k) = b[k][n] (kK).
      if (e.M > 0 && e.K > 0)
        check_status(detgemm::launch_product(detgemm::product(dy.get(), e.N, Major::kK, b.get(), e.N, Major::kK, e.M, e.K, e.N,
                                                     0, e.N, 1, da.get(), e.K, false)));
      // db[k, n] = sum over m of a[m, k] * dy[m, n]: A(k, m) = a[m][k] (kMN), B = dy [M][N] (kMN).
      if (e.K > 0 && e.N > 0)
        check_status(detgemm::launch_product(detgemm::product(a.get(), e.K, Major::kMN, dy.get(), e.N, Major::kMN, e.K, e.N, e.M,
                                                     0, e.M, 1, db.get(), e.N, false)));
    });
    return ws1::Tensors{{"da", download_bf16(da, {e.M, e.K})}, {"db", download_bf16(db, {e.K, e.N})}};
  });
}

}  // namespace

const CudaOp& det_gemm_cuda() {
  static const CudaOp op{kOp, forward, backward,
                         "cuda_bf16.det_gemm.wgmma_tma.v2:wgmma_gemm_kernel_nn[128x128x64s6,"
                         "shards_on_ctas_when_tiles_leave_sms_idle,st16],fallback_gemm_kernel_fp32,fold_kernel",
                         "cuda_bf16.det_gemm.wgmma_tma.v2:wgmma_gemm_kernel_nt[128x256x64s4,st16],"
                         "wgmma_gemm_kernel_tn[128x256x64s4,st16],fallback_gemm_kernel_fp32"};
  return op;
}

}  // namespace ws1cuda

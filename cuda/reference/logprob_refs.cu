// FP32 references on the device for logp, batch_invariant_logp and linear_logp: the CPU
// references' definitions (ws1/op_orders.hpp, lib/ops/logsumexp.cpp, lib/ops/linear_logp.cpp) with the same
// input checks, outputs and conventions, in FP32 throughout:
//   logp, batch_invariant_logp  logp[r] = x[r, y] - lse(x[r]) on the bf16 logits widened exactly;
//                               backward dlogits = dy * (onehot(y) - expf(x - lse)), float32.
//                               batch_invariant_logp honours ctx.ignore_index: such a row gives
//                               logp +0 and an all +0 gradient row.
//   linear_logp                 the FP32 logits hidden @ weightᵀ by cublasSgemm, then the same
//                               row kernels; backward G = dy * (onehot(y) - softmax) in place
//                               over the logits, dhidden = G @ weight, dweight = Gᵀ @ hidden
//                               (cublasSgemm), both float32.
// The row logsumexp is the reference's, not the candidates' chunked one: m = the row max (NaN
// skipped, as the CPU's `x > m ? x : m`), lse = m + logf(sum expf(x - m)), -inf for a row whose
// max is -inf. One block per row; the sum runs per thread then over the block (a fixed tree),
// where the CPU sums pairwise: the two differ only in FP32 rounding.
#include <climits>
#include <cstdint>
#include <string_view>
#include <vector>

#include "host_vectors.cuh"
#include "reference_ops.hpp"
#include "reference_support.cuh"
#include "ws1cuda/kernel_support.cuh"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

namespace ws1cuda::reference {
namespace {

constexpr const char* kKernelsEngine = "cuda_fp32 (FP32 kernels on bf16 logits widened to FP32)";
constexpr const char* kCublasEngine = "cuda_fp32 (cublasSgemm per 32-long K slice, pairwise tree, + FP32 kernels on bf16 operands widened to FP32)";
constexpr int kThreads = 256;  // per row block; a multiple of 32 (block_sum / block_max)

__device__ __forceinline__ float as_f32(float v) { return v; }
__device__ __forceinline__ float as_f32(bf16 v) { return __bfloat162float(v); }  // exact

// The reference logsumexp of x[0..n) (see the top). Call from every thread of the block; the
// result is the same in all of them (both reductions broadcast), so the early return is
// block-uniform.
template <class T>
__device__ float row_lse(const T* x, std::int64_t n, float* scratch) {
  float m = -INFINITY;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = as_f32(x[i]);
    m = v > m ? v : m;  // a NaN never becomes the max (it reaches the sum below)
  }
  m = block_max(m, scratch);
  if (m == -INFINITY) return m;  // empty or all -inf: lse = -inf, as lse_reference
  float s = 0.0f;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) s += expf(as_f32(x[i]) - m);
  s = block_sum(s, scratch);
  return m + logf(s);
}

// One block per row r of logits [rows, vocab]: logp[r] = x[r, y] - lse, or +0 for an ignored
// row (ignored may be null: no row is).
template <class T>
__global__ void logp_rows_kernel(const T* logits, std::int64_t vocab, const std::int64_t* targets,
                                 const std::uint8_t* ignored, float* logp) {
  __shared__ float scratch[32];
  const std::int64_t r = blockIdx.x;
  if (ignored != nullptr && ignored[r] != 0) {  // block-uniform
    if (threadIdx.x == 0) logp[r] = 0.0f;
    return;
  }
  const T* x = logits + r * vocab;
  const float lse = row_lse(x, vocab, scratch);
  if (threadIdx.x == 0) logp[r] = as_f32(x[targets[r]]) - lse;
}

// One block per row r: grad[r, i] = dy[r] * ((i == y) - expf(x[r, i] - lse)), an all +0 row
// when ignored. `grad` may be `logits` itself (T = float): every element is read for the lse
// before block_sum's barrier, and afterwards read and written by the same thread.
template <class T>
__global__ void dlogits_rows_kernel(const T* logits, std::int64_t vocab, const std::int64_t* targets,
                                    const std::uint8_t* ignored, const float* dy, float* grad) {
  __shared__ float scratch[32];
  const std::int64_t r = blockIdx.x;
  float* g = grad + r * vocab;
  if (ignored != nullptr && ignored[r] != 0) {  // block-uniform
    for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) g[i] = 0.0f;
    return;
  }
  const T* x = logits + r * vocab;
  const float lse = row_lse(x, vocab, scratch);
  const std::int64_t y = targets[r];
  const float d = dy[r];
  for (std::int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float p = expf(as_f32(x[i]) - lse);
    g[i] = d * ((i == y ? 1.0f : 0.0f) - p);
  }
}

// One block per row: the grid's x extent must hold the rows.
unsigned row_grid(std::int64_t rows, std::string_view op, const char* name) {
  ws1::ops::require(rows <= INT_MAX, op, name, "too many rows for one kernel launch");
  return static_cast<unsigned>(rows);
}

// logp and batch_invariant_logp (`honour_ignore_index` for the latter), as
// selected_logp_forward/backward's reference path.
ws1::Tensors selected_logp(std::string_view op, const ws1::Tensors& in, const ws1::OpContext& ctx,
                           bool honour_ignore_index, bool backward) {
  const ws1::ops::LogitRows s = ws1::ops::check_logit_rows(op, in, ctx, honour_ignore_index, backward);
  if (s.rows == 0) {  // nothing to launch; the CPU's shapes (zero elements)
    if (!backward) return {{"logp", ws1::Tensor(ws1::DType::kF32, s.targets->shape())}};
    return {{"dlogits", ws1::Tensor(ws1::DType::kF32, s.logits->shape())}};
  }
  const unsigned grid = row_grid(s.rows, op, "targets");
  const DeviceArray<bf16> logits = upload_bf16(*s.logits);  // row-major, contiguous
  const DeviceArray<std::int64_t> ids = to_device(s.ids);
  std::vector<std::uint8_t> flags;
  if (honour_ignore_index) flags.assign(s.ignored.begin(), s.ignored.end());
  const DeviceArray<std::uint8_t> ignored = to_device(flags);  // null when not honoured
  if (!backward) {
    DeviceArray<float> out = poisoned<float>(static_cast<std::size_t>(s.rows));
    logp_rows_kernel<<<grid, kThreads>>>(logits.get(), s.vocab, ids.get(), ignored.get(), out.get());
    check_launch("logp_rows_kernel<bf16>");
    return {{"logp", download_f32(out, s.targets->shape())}};
  }
  const DeviceArray<float> dy = upload_f32(*s.dy);
  DeviceArray<float> grad = poisoned<float>(static_cast<std::size_t>(s.rows * s.vocab));
  dlogits_rows_kernel<<<grid, kThreads>>>(logits.get(), s.vocab, ids.get(), ignored.get(), dy.get(), grad.get());
  check_launch("dlogits_rows_kernel<bf16>");
  return {{"dlogits", download_f32(grad, s.logits->shape())}};
}

// linear_logp: the reference path of lib/ops/linear_logp.cpp with the [rows, V] FP32 logits
// held on the device (8192 x 151936 x 4 B = 5 GB at the real shapes).
ws1::Tensors linear_logp(const ws1::Tensors& in, cublasHandle_t h, bool backward) {
  constexpr std::string_view op = "linear_logp";
  const ws1::ops::LinearLogpInputs p = ws1::ops::check_linear_logp_inputs(op, in, backward);
  ws1::Shape dh_shape = p.lead;
  dh_shape.push_back(p.width);
  if (p.rows == 0) {  // as the CPU: an empty logp; dhidden empty and dweight all +0
    if (!backward) return {{"logp", ws1::Tensor(ws1::DType::kF32, p.lead)}};
    return {{"dhidden", ws1::Tensor(ws1::DType::kF32, dh_shape)},
            {"dweight", ws1::Tensor(ws1::DType::kF32, p.weight->shape())}};
  }
  const int T = extent(p.rows, op, "hidden"), H = extent(p.width, op, "hidden"), V = extent(p.vocab, op, "weight");
  const unsigned grid = row_grid(p.rows, op, "targets");
  const DeviceArray<float> hidden = widened(p.hidden), weight = widened(*p.weight);
  const DeviceArray<std::int64_t> ids = to_device(p.targets);
  DeviceArray<float> logits = gemm(h, hidden, false, weight, true, T, V, H);  // [T, V]
  if (!backward) {
    DeviceArray<float> out = poisoned<float>(static_cast<std::size_t>(p.rows));
    logp_rows_kernel<<<grid, kThreads>>>(logits.get(), p.vocab, ids.get(), nullptr, out.get());
    check_launch("logp_rows_kernel<float>");
    return {{"logp", download_f32(out, p.lead)}};
  }
  const DeviceArray<float> dy = upload_f32(*p.dy);
  // G in place of the logits.
  dlogits_rows_kernel<<<grid, kThreads>>>(logits.get(), p.vocab, ids.get(), nullptr, dy.get(), logits.get());
  check_launch("dlogits_rows_kernel<float>");
  return {{"dhidden", download_f32(gemm(h, logits, false, weight, false, T, H, V), dh_shape)},
          {"dweight", download_f32(gemm(h, logits, true, hidden, false, V, H, T), p.weight->shape())}};
}

DeviceRef selected_logp_ref(std::string_view op, bool honour_ignore_index) {
  return {kKernelsEngine, false,
          [op, honour_ignore_index](const ws1::Tensors& in, const ws1::OpContext& ctx, cublasHandle_t) {
            return selected_logp(op, in, ctx, honour_ignore_index, false);
          },
          [op, honour_ignore_index](const ws1::Tensors& in, const ws1::OpContext& ctx, cublasHandle_t) {
            return selected_logp(op, in, ctx, honour_ignore_index, true);
          }};
}

}  // namespace

void add_logprob_refs(Table& t) {
  t.emplace("logp", selected_logp_ref("logp", false));
  t.emplace("batch_invariant_logp", selected_logp_ref("batch_invariant_logp", true));
  t.emplace("linear_logp",
            DeviceRef{kCublasEngine, true,
                      [](const ws1::Tensors& in, const ws1::OpContext&, cublasHandle_t h) {
                        return linear_logp(in, h, false);
                      },
                      [](const ws1::Tensors& in, const ws1::OpContext&, cublasHandle_t h) {
                        return linear_logp(in, h, true);
                      }});
}

}  // namespace ws1cuda::reference

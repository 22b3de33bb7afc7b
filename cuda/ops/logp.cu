// logp on cuda_bf16 (lib/ops/logp.cpp states the definition): logp[t] = logits[t, y] -
// logsumexp(logits[t]) in FP32, FLOAT32 out; backward dlogits = dy * (onehot(y) - softmax),
// bf16. The host functions here also serve batch_invariant_logp (which honours ignore_index:
// such a row gives logp +0 and an all +0 gradient row); logprob.cuh has the row order.
//
// Kernels, in launch order:
//   logp_chunk_kernel    one (row, 1024-wide chunk) task per thread, 32 tasks per 32-thread
//                        block: the block first copies its tasks' chunks into shared memory
//                        (coalesced, 16-byte cp.async when V % 8 == 0, since the tasks of a block
//                        are consecutive in memory), then each thread runs its chunk's max and
//                        its in-order sum of expf(x - max) sequentially — the declared chunk
//                        state, bit for bit the CPU's sequence — and writes it to [rows,
//                        nchunks]; the thread whose chunk holds the target writes its logit.
//   logprob_row_kernel   one thread per row folds the chunk states left to right (lse_merge),
//                        lse = M + logf(S), logp = target logit - lse.
//   logp_dlogits_kernel  (backward) grid rows x vocabulary blocks, 8 elements per thread:
//                        bf16(dy * (onehot - expf(x - lse))), every operation rounded as the CPU.
// A row's bits depend on its values and V only (batch invariant). cpu_bf16 runs the same
// operations in the same order; the results differ only where CUDA's expf/logf and glibc's do
// (an ulp, now and then), so they are close, not bit-equal.
#include <string_view>

#include "logprob.cuh"
#include "ws1cuda/launch_region.cuh"
#include "logsumexp.hpp"
#include "op_support.hpp"
#include "registry.hpp"

namespace ws1cuda {
namespace logprob {
namespace {

static_assert(kChunk == ws1::ops::kLseChunk, "the declared chunk width");

constexpr int kTeam = 32;                // chunk tasks (and threads) per block of logp_chunk_kernel
constexpr int kSlot = kChunk + 8;        // bf16 per staged chunk: thread s reads 16 bytes at bank
                                         // group 4s mod 32, 8 distinct groups per 8 threads
constexpr std::size_t kChunkSmem = std::size_t{kTeam} * kSlot * sizeof(unsigned short);
constexpr int kRowThreads = 128;
constexpr int kGradThreads = 256;
constexpr unsigned kMaxGridY = 65535;
constexpr std::int64_t kMaxGridX = 0x7fffffff;

// Eight bf16 from 16 aligned bytes (element 2j in the low half of word j), or one.
template <int kVec>
__device__ __forceinline__ void load_f32(const unsigned short* p, float (&v)[kVec]) {
  if constexpr (kVec == 8) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    const unsigned w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[2 * j] = __uint_as_float(w[j] << 16);
      v[2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
    }
  } else {
    v[0] = bf16_bits_to_f32(*p);
  }
}

// The declared chunk state of x[0 .. n) (lse_chunk in lib/ops/logsumexp.cpp); n % kVec == 0.
template <int kVec>
__device__ Lse chunk_state(const unsigned short* x, int n) {
  float m = -INFINITY;
  for (int i = 0; i < n; i += kVec) {
    float v[kVec];
    load_f32<kVec>(x + i, v);
#pragma unroll
    for (int j = 0; j < kVec; ++j) m = v[j] > m ? v[j] : m;
  }
  if (m == -INFINITY) return {m, 0.0f};  // empty or all -inf
  float s = 0.0f;
  for (int i = 0; i < n; i += kVec) {
    float v[kVec];
    load_f32<kVec>(x + i, v);
#pragma unroll
    for (int j = 0; j < kVec; ++j) s = __fadd_rn(s, expf(__fsub_rn(v[j], m)));
  }
  return {m, s};
}

// kVec == 8 needs vocab % 8 == 0: every chunk then starts 16-byte aligned and its length is a
// multiple of 8.
template <int kVec>
__global__ void __launch_bounds__(kTeam)
    logp_chunk_kernel(const unsigned short* logits, std::int64_t rows, std::int64_t vocab, std::int64_t nchunks,
                      RowTargets targets, Lse* states, float* target_logit) {
  extern __shared__ __align__(16) unsigned short slots[];
  const int lane = static_cast<int>(threadIdx.x);
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kTeam;
  const std::int64_t tasks = rows * nchunks;
  // Stage: the whole block copies its chunks one after the other.
  for (int s = 0; s < kTeam && first + s < tasks; ++s) {
    const std::int64_t r = (first + s) / nchunks, c0 = (first + s) % nchunks * kChunk;
    if (targets.ignored(r)) continue;
    const int n = static_cast<int>(vocab - c0 < kChunk ? vocab - c0 : kChunk);
    const unsigned short* src = logits + r * vocab + c0;
    unsigned short* dst = slots + s * kSlot;
    if constexpr (kVec == 8) {
      for (int i = lane * 8; i < n; i += kTeam * 8) cp_async16(dst + i, src + i);
    } else {
      for (int i = lane; i < n; i += kTeam) dst[i] = src[i];
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  // Reduce: thread s owns chunk s.
  const std::int64_t task = first + lane;
  if (task >= tasks) return;
  const std::int64_t r = task / nchunks, c0 = task % nchunks * kChunk;
  if (targets.ignored(r)) return;
  const int n = static_cast<int>(vocab - c0 < kChunk ? vocab - c0 : kChunk);
  const unsigned short* x = slots + lane * kSlot;
  states[task] = chunk_state<kVec>(x, n);
  const std::int64_t y = targets.ids[r];
  if (y >= c0 && y < c0 + n) target_logit[r] = bf16_bits_to_f32(x[y - c0]);
}

__global__ void __launch_bounds__(kRowThreads)
    logprob_row_kernel(const Lse* states, std::int64_t rows, std::int64_t nchunks, const float* target_logit,
                       RowTargets targets, float* logp, float* lse) {
  const std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * kRowThreads + threadIdx.x;
  if (r >= rows) return;
  if (targets.ignored(r)) {
    logp[r] = 0.0f;
    if (lse != nullptr) lse[r] = 0.0f;
    return;
  }
  Lse acc = lse_empty();
  for (std::int64_t c = 0; c < nchunks; ++c) lse_merge(acc, states[r * nchunks + c]);
  const float l = lse_value(acc);
  logp[r] = __fsub_rn(target_logit[r], l);
  if (lse != nullptr) lse[r] = l;
}

// dlogits of row blockIdx.x: bf16(dy * (onehot - expf(x - lse))); ignored rows +0.
template <int kVec>
__global__ void __launch_bounds__(kGradThreads)
    logp_dlogits_kernel(const unsigned short* logits, std::int64_t vocab, RowTargets targets, const float* dy,
                        const float* lse, unsigned short* dlogits) {
  const std::int64_t r = blockIdx.x;
  const bool ignored = targets.ignored(r);
  const std::int64_t y = targets.ids[r];
  const float d = dy[r], l = ignored ? 0.0f : lse[r];
  const unsigned short* x = logits + r * vocab;
  unsigned short* out = dlogits + r * vocab;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.y) * kGradThreads * kVec;
  for (std::int64_t i0 = (static_cast<std::int64_t>(blockIdx.y) * kGradThreads + threadIdx.x) * kVec; i0 < vocab;
       i0 += step) {
    float v[kVec];
    load_f32<kVec>(x + i0, v);
    unsigned short g[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float p = expf(__fsub_rn(v[j], l));
      g[j] = ignored ? 0 : f32_to_bf16_bits(__fmul_rn(d, __fsub_rn(i0 + j == y ? 1.0f : 0.0f, p)));
    }
    if constexpr (kVec == 8) {
      unsigned w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) w[j] = g[2 * j] | (static_cast<unsigned>(g[2 * j + 1]) << 16);
      *reinterpret_cast<uint4*>(out + i0) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
      out[i0] = g[0];
    }
  }
}

const unsigned short* bits(const DeviceArray<bf16>& a) { return reinterpret_cast<const unsigned short*>(a.get()); }

// Chunk states and target logits of every row (rows > 0).
void chunk_states(const DeviceArray<bf16>& logits, std::int64_t rows, std::int64_t vocab, std::int64_t nchunks,
                  RowTargets targets, DeviceArray<Lse>& states, DeviceArray<float>& target_logit) {
  const std::int64_t blocks = (rows * nchunks + kTeam - 1) / kTeam;  // < 2^31: forward_pass
  if (vocab % 8 == 0) {
    allow_smem(logp_chunk_kernel<8>, kChunkSmem);
    logp_chunk_kernel<8><<<static_cast<unsigned>(blocks), kTeam, kChunkSmem>>>(
        bits(logits), rows, vocab, nchunks, targets, states.get(), target_logit.get());
  } else {
    allow_smem(logp_chunk_kernel<1>, kChunkSmem);
    logp_chunk_kernel<1><<<static_cast<unsigned>(blocks), kTeam, kChunkSmem>>>(
        bits(logits), rows, vocab, nchunks, targets, states.get(), target_logit.get());
  }
  check_launch("logp_chunk_kernel");
}

struct RowPass {
  DeviceArray<bf16> logits;
  DeviceArray<std::int64_t> ids;
  RowTargets targets;
  DeviceArray<float> logp, lse;
};

// Uploads the inputs and runs the forward's kernels (rows > 0): logp and lse of every row.
RowPass forward_pass(std::string_view op, const ws1::ops::LogitRows& s, const ws1::OpContext& ctx,
                     bool honour_ignore_index) {
  const std::int64_t nchunks = (s.vocab + kChunk - 1) / kChunk;
  ws1::ops::require(s.rows < kMaxGridX && s.rows * nchunks / kTeam < kMaxGridX, op, "logits",
                    "too many rows for one cuda_bf16 launch");
  RowPass p;
  p.logits = upload_bf16(*s.logits);
  p.ids = upload_i64(*s.targets);
  p.targets = RowTargets{p.ids.get(), ctx.ignore_index, honour_ignore_index};
  DeviceArray<Lse> states(static_cast<std::size_t>(s.rows * nchunks));
  DeviceArray<float> target_logit = poisoned<float>(static_cast<std::size_t>(s.rows));
  p.logp = poisoned<float>(static_cast<std::size_t>(s.rows));
  p.lse = poisoned<float>(static_cast<std::size_t>(s.rows));
  launch_region(std::string(op) + ".lse", [&] {
    chunk_states(p.logits, s.rows, s.vocab, nchunks, p.targets, states, target_logit);
    launch_row_logp(states.get(), s.rows, nchunks, target_logit.get(), p.targets, p.logp.get(), p.lse.get());
  });
  return p;
}

}  // namespace

void launch_row_logp(const Lse* states, std::int64_t rows, std::int64_t nchunks, const float* target_logit,
                     RowTargets targets, float* logp, float* lse) {
  logprob_row_kernel<<<blocks_for(rows, kRowThreads), kRowThreads>>>(states, rows, nchunks, target_logit, targets,
                                                                      logp, lse);
  check_launch("logprob_row_kernel");
}

ws1::Tensors selected_logp_forward(std::string_view op, const ws1::Tensors& in, const ws1::OpContext& ctx,
                                   bool honour_ignore_index) {
  const ws1::ops::LogitRows s = ws1::ops::check_logit_rows(op, in, ctx, honour_ignore_index, false);
  if (s.rows == 0) return {{"logp", ws1::Tensor(ws1::DType::kF32, s.targets->shape())}};
  const RowPass p = forward_pass(op, s, ctx, honour_ignore_index);
  return {{"logp", download_f32(p.logp, s.targets->shape())}};
}

ws1::Tensors selected_logp_backward(std::string_view op, const ws1::Tensors& in, const ws1::OpContext& ctx,
                                    bool honour_ignore_index) {
  const ws1::ops::LogitRows s = ws1::ops::check_logit_rows(op, in, ctx, honour_ignore_index, true);
  if (s.rows == 0) return {{"dlogits", ws1::Tensor(ws1::DType::kBF16, s.logits->shape())}};
  const RowPass p = forward_pass(op, s, ctx, honour_ignore_index);
  const DeviceArray<float> dy = upload_f32(*s.dy);
  DeviceArray<bf16> dlogits = poisoned<bf16>(p.logits.size());
  const unsigned per_row = blocks_for(s.vocab, std::int64_t{kGradThreads} * 8);
  const dim3 grid(static_cast<unsigned>(s.rows), per_row < kMaxGridY ? per_row : kMaxGridY);  // rows < 2^31
  auto* out = reinterpret_cast<unsigned short*>(dlogits.get());
  launch_region(std::string(op) + ".dlogits", [&] {
    if (s.vocab % 8 == 0)
      logp_dlogits_kernel<8><<<grid, kGradThreads>>>(bits(p.logits), s.vocab, p.targets, dy.get(), p.lse.get(), out);
    else
      logp_dlogits_kernel<1><<<grid, kGradThreads>>>(bits(p.logits), s.vocab, p.targets, dy.get(), p.lse.get(), out);
    check_launch("logp_dlogits_kernel");
  });
  return {{"dlogits", download_bf16(dlogits, s.logits->shape())}};
}

}  // namespace logprob

namespace {

constexpr std::string_view kOp = "logp";

ws1::Result<ws1::Tensors> forward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] { return logprob::selected_logp_forward(kOp, in, ctx, false); });
}

ws1::Result<ws1::Tensors> backward(const ws1::Tensors& in, const ws1::OpContext& ctx) {
  return ws1::ops::guarded(kOp, [&] { return logprob::selected_logp_backward(kOp, in, ctx, false); });
}

}  // namespace

const CudaOp& logp_cuda() {
  static const CudaOp op{kOp, forward, backward, "logp_chunk_kernel,logprob_row_kernel",
                         "logp_chunk_kernel,logprob_row_kernel,logp_dlogits_kernel"};
  return op;
}

}  // namespace ws1cuda

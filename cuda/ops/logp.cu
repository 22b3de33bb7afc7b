// logp on cuda_bf16 (lib/ops/logp.cpp states the definition): logp[t] = logits[t, y] -
// logsumexp(logits[t]) in FP32, FLOAT32 out; backward dlogits = dy * (onehot(y) - softmax),
// bf16. The host functions here also serve batch_invariant_logp (which honours ignore_index:
// such a row gives logp +0 and an all +0 gradient row); logprob.cuh has the row order.
//
// Kernels, in launch order:
//   logp_chunk_kernel    (row, 1024-wide chunk) tasks, 32 consecutive tasks per warp, lane s
//                        owning task s. The declared chunk state needs the chunk's max before
//                        its sum, so the warp reads its chunks twice (twice the bytes; the
//                        single-read kernel it replaced staged whole chunks in shared memory,
//                        2 KiB per task, which held an SM to 3 warps and left it latency-bound):
//                          max  the whole warp reads each of its chunks with coalesced 16-byte
//                               loads, each lane a strided subset, and a butterfly combines the
//                               lanes (the sequential max's value; see warp_chunk_max for a
//                               zero's sign);
//                          sum  the warp streams its 32 chunks through shared memory 64
//                               elements at a time (cp.async, two stages), and each lane adds
//                               its chunk's expf(x - max) in index order — the declared chunk
//                               state, bit for bit the CPU's sequence.
//                        The lane whose chunk holds the target writes its logit.
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
#include "registry.hpp"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

namespace ws1cuda {
namespace logprob {
namespace {

static_assert(kChunk == ws1::ops::kLseChunk, "the declared chunk width");

constexpr int kChunkWarps = 4;     // warps per block of logp_chunk_kernel, each on its own 32 tasks
constexpr int kPiece = 64;         // elements of a chunk staged per step: one 128-byte line
constexpr int kPiecePitch = kPiece + 8;  // bf16 per staged piece: lane s's 16-byte reads start at
                                         // bank group 4s mod 32, 8 distinct groups per 8 lanes
constexpr int kPieceStages = 2;
constexpr int kStageElems = 32 * kPiecePitch;
constexpr std::size_t kChunkSmem =
    std::size_t{kChunkWarps} * kPieceStages * kStageElems * sizeof(unsigned short);
static_assert(kChunk % kPiece == 0 && kPiece % 8 == 0, "whole 16-byte copies per piece");
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

// One task of logp_chunk_kernel: chunk c0 / kChunk of row r, n elements at x (n = 0: nothing to
// do — past the last task, or a row the op ignores).
struct ChunkTask {
  const unsigned short* x = nullptr;
  std::int64_t r = 0, c0 = 0;
  int n = 0;
};

__device__ ChunkTask chunk_task(const unsigned short* logits, std::int64_t task, std::int64_t tasks,
                                std::int64_t vocab, std::int64_t nchunks, const RowTargets& targets) {
  ChunkTask t;
  if (task >= tasks) return t;
  t.r = task / nchunks;
  t.c0 = task % nchunks * kChunk;
  if (targets.ignored(t.r)) return t;
  t.n = static_cast<int>(vocab - t.c0 < kChunk ? vocab - t.c0 : kChunk);
  t.x = logits + t.r * vocab + t.c0;
  return t;
}

// The max of x[0 .. n) as the sequential x > m ? x : m from -inf (NaN skipped), computed by the
// whole warp; every lane gets it. Lane l reads the kVec-wide groups l, l + 32, ... (16-byte
// loads when kVec == 8, n % 8 == 0: coalesced). Values that compare equal have equal bits except
// +0 and -0, so only a zero max may differ from the sequential one ("the first of equal maxima"),
// and only in its sign — which changes no output: x - (±0) is the same for every x but ±0, where
// expf gives 1 either way; lse_merge compares and subtracts maxima the same way; and
// lse = M + logf(S) is the same for M = ±0 (logf(S) is never -0).
template <int kVec>
__device__ float warp_chunk_max(const unsigned short* x, int n, int lane) {
  float m = -INFINITY;
  for (int i = lane * kVec; i < n; i += 32 * kVec) {
    float v[kVec];
    load_f32<kVec>(x + i, v);
#pragma unroll
    for (int j = 0; j < kVec; ++j) m = v[j] > m ? v[j] : m;
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, m, offset);
    m = o > m ? o : m;
  }
  return m;
}

// Chunk states of tasks [32 w, 32 w + 32) for warp w of the grid, into states[task]; the
// target logit of a row from the lane whose chunk holds it. kVec == 8 needs vocab % 8 == 0:
// every chunk then starts 16-byte aligned and its length is a multiple of 8.
template <int kVec>
__global__ void __launch_bounds__(kChunkWarps * 32)
    logp_chunk_kernel(const unsigned short* logits, std::int64_t rows, std::int64_t vocab, std::int64_t nchunks,
                      RowTargets targets, Lse* states, float* target_logit) {
  extern __shared__ __align__(16) unsigned short staged[];
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const std::int64_t first = (static_cast<std::int64_t>(blockIdx.x) * kChunkWarps + warp) * 32;
  const std::int64_t tasks = rows * nchunks;
  if (first >= tasks) return;  // whole warps
  const ChunkTask mine = chunk_task(logits, first + lane, tasks, vocab, nchunks, targets);

  // Max: the warp on each task in turn.
  float my_max = -INFINITY;
  for (int s = 0; s < 32; ++s) {
    const int n = __shfl_sync(0xffffffffu, mine.n, s);
    if (n == 0) continue;  // warp-uniform
    const auto* x = reinterpret_cast<const unsigned short*>(
        __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(mine.x), s));
    const float m = warp_chunk_max<kVec>(x, n, lane);
    if (lane == s) my_max = m;
  }

  // Sum: piece p of every task is staged (row s of the stage), then lane s adds its own.
  unsigned short* stage = staged + warp * kPieceStages * kStageElems;
  const int pieces = (__reduce_max_sync(0xffffffffu, static_cast<unsigned>(mine.n)) + kPiece - 1) / kPiece;
  const auto load_piece = [&](int p) {
    unsigned short* buf = stage + (p % kPieceStages) * kStageElems;
    constexpr int kPerTask = kPiece / 8;  // 16-byte segments of a piece
#pragma unroll
    for (int k = 0; k < 32 * kPerTask / 32; ++k) {
      const int idx = k * 32 + lane, s = idx / kPerTask, e = p * kPiece + idx % kPerTask * 8;
      const int n = __shfl_sync(0xffffffffu, mine.n, s);
      const auto* x = reinterpret_cast<const unsigned short*>(
          __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(mine.x), s));
      unsigned short* dst = buf + s * kPiecePitch + idx % kPerTask * 8;
      if constexpr (kVec == 8) {
        if (e < n) cp_async16(dst, x + e);
      } else {
        for (int j = 0; j < 8; ++j)
          if (e + j < n) dst[j] = x[e + j];
      }
    }
    cp_async_commit();
  };
  float sum = 0.0f;
  if (pieces > 0) load_piece(0);
  for (int p = 0; p < pieces; ++p) {
    if (p + 1 < pieces) {
      load_piece(p + 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();  // every lane's copies of piece p have landed
    const int e0 = p * kPiece, e1 = mine.n - e0 < kPiece ? mine.n : e0 + kPiece;
    const unsigned short* row = stage + (p % kPieceStages) * kStageElems + lane * kPiecePitch - e0;
    for (int e = e0; e < e1; e += 8) {
      float v[8];
      load_f32<8>(row + e, v);  // 16-byte aligned: pitch and e0 are multiples of 8
      const int m = e1 - e < 8 ? e1 - e : 8;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (j < m) sum = __fadd_rn(sum, expf(__fsub_rn(v[j], my_max)));
    }
    __syncwarp();  // piece p is consumed before its buffer takes piece p + 2
  }
  if (mine.n == 0) return;
  states[first + lane] = my_max == -INFINITY ? Lse{my_max, 0.0f} : Lse{my_max, sum};  // empty or all -inf
  const std::int64_t y = targets.ids[mine.r];
  if (y >= mine.c0 && y < mine.c0 + mine.n) target_logit[mine.r] = bf16_bits_to_f32(mine.x[y - mine.c0]);
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
  const std::int64_t per_block = std::int64_t{kChunkWarps} * 32;
  const std::int64_t blocks = (rows * nchunks + per_block - 1) / per_block;  // < 2^31: forward_pass
  if (vocab % 8 == 0) {
    allow_smem(logp_chunk_kernel<8>, kChunkSmem);
    logp_chunk_kernel<8><<<static_cast<unsigned>(blocks), kChunkWarps * 32, kChunkSmem>>>(
        bits(logits), rows, vocab, nchunks, targets, states.get(), target_logit.get());
  } else {
    allow_smem(logp_chunk_kernel<1>, kChunkSmem);
    logp_chunk_kernel<1><<<static_cast<unsigned>(blocks), kChunkWarps * 32, kChunkSmem>>>(
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
  ws1::ops::require(s.rows < kMaxGridX && s.rows * nchunks / (kChunkWarps * 32) < kMaxGridX, op, "logits",
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

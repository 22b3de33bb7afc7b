// RMSNorm on cuda_bf16, shared by rms_norm (rows of the hidden width) and qk_norm (one row per
// head, over head_dim): y = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps) over each row,
// and its backward (lib/ops/rms_norm.cpp has the definition).
//
// Arithmetic and order are the cpu_bf16 candidate's, operation by operation, so the bits match:
//  - statistic: sum of x*x in fixed 32-wide chunks; one thread per chunk runs the chunk's fused
//    multiply-adds left to right, then one thread adds the chunk sums in chunk order. The
//    backward's sum(g*x) (g = dy*w) uses the same chunks.
//  - every other operation is one IEEE operation written as an intrinsic (__fmul_rn,
//    __fadd_rn, __fdiv_rn, __fsqrt_rn): nvcc contracts a*b+c into an FMA by default, where the
//    CPU (compiled with -ffp-contract=off) rounds twice.
//  - forward, "kernel" order: bf16(fp32(fp32(x*rstd)*w)); "hf" order: bf16(bf16(x*rstd)*w).
//  - backward: dx = bf16(rstd*g - x*coef) with coef = rstd^3 * sum(g*x) / W evaluated left to
//    right as the CPU writes it; dweight in the candidate's declared two-level order
//    (ws1/op_orders.hpp, docs/decisions.md D24): per column, each block of kDwRowBlock rows
//    sums fma(dy*x, rstd, acc) in row order from +0, then the block partials are added in
//    block order in FP32 and rounded to bf16 once.
//
// Work split of the row kernels: widths of 32, 64, 128 or 256 (qk_norm's 128-wide heads) run the
// lane kernels, a lane per 32-wide chunk and 32 / chunks rows per warp, in registers (see
// "narrow rows" below). Other widths: a team normalises one row, a warp for rows up to 256
// wide, a 128-thread block above (rms_norm's 4096).
// A row is staged tile by tile into shared memory as float with coalesced loads (16-byte when
// width % 8 == 0, so every row starts 16-byte aligned; else element by element); each
// 32-element chunk is padded to 33 floats so the per-chunk threads read on distinct banks.
// When the row is a single tile the output pass reads it back from shared memory. A row's
// arithmetic depends on its width only: the kernels are batch-invariant.
//
// dweight: two kernels, no atomics. The partials kernel runs one thread per (row block, group
// of kVec columns: 2 for even widths, else 1), reading dy and x straight from global memory
// with coalesced loads (neighbouring threads, neighbouring columns) and writing FP32 partials
// to a [row blocks, width] workspace; the merge kernel runs one thread per column over its
// partials in block order (staged through shared memory from 128 row blocks on). For 128-wide
// rows (qk_norm's heads) one fused kernel computes dx and the partials in a single pass over x
// and dy instead (section "fused backward of 128-wide rows").
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string_view>
#include <type_traits>

#include "ws1cuda/device_array.cuh"
#include "ws1cuda/launch_region.cuh"
#include "ws1cuda/kernel_support.cuh"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

namespace ws1cuda::rms {

constexpr int kChunk = 32;       // the statistic's chunk (chunked_sum_squares in lib/ops)
constexpr int kChunkPitch = 33;  // floats per staged chunk: chunk c's element j on bank (c+j)%32

// ---- bf16 <-> float, kVec elements at a time (8: one 16-byte access; 1: one element) ----

template <int kVec>
struct Packed;
template <>
struct Packed<8> {
  uint4 v = make_uint4(0, 0, 0, 0);
};
template <>
struct Packed<1> {
  bf16 v = __float2bfloat16_rn(0.0f);
};

template <int kVec>
__device__ __forceinline__ Packed<kVec> load_packed(const bf16* p) {
  Packed<kVec> r;
  if constexpr (kVec == 8)
    r.v = *reinterpret_cast<const uint4*>(p);
  else
    r.v = *p;
  return r;
}

template <int kVec>
__device__ __forceinline__ void unpack(const Packed<kVec>& r, float (&v)[kVec]) {
  if constexpr (kVec == 8) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r.v);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const float2 f = __bfloat1622float2(h[k]);
      v[2 * k] = f.x;
      v[2 * k + 1] = f.y;
    }
  } else {
    v[0] = to_f32(r.v);
  }
}

template <int kVec>
__device__ __forceinline__ void load_vec(const bf16* p, float (&v)[kVec]) {
  unpack<kVec>(load_packed<kVec>(p), v);
}

// Rounds each value to bf16 (RNE) and stores them.
template <int kVec>
__device__ __forceinline__ void store_vec(bf16* p, const float (&v)[kVec]) {
  if constexpr (kVec == 8) {
    uint4 raw;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) h[k] = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
    *p = to_bf16(v[0]);
  }
}

// ---- row teams and the staged row ----

// kThreads threads normalise one row, staging kTileChunks chunks of it at a time.
template <int kThreads_, int kTileChunks_>
struct Team {
  static constexpr int kThreads = kThreads_;
  static constexpr int kTileChunks = kTileChunks_;
  static constexpr int kTile = kTileChunks * kChunk;         // elements per staged tile
  static constexpr int kStaged = kTileChunks * kChunkPitch;  // floats per staged tile
  static_assert(kTileChunks <= kThreads, "one thread per chunk of a tile");
  __device__ static void sync() {
    if constexpr (kThreads == 32)
      __syncwarp();
    else
      __syncthreads();
  }
};
using WarpTeam = Team<32, 8>;     // rows up to 256 wide (one tile): qk_norm's heads
using BlockTeam = Team<128, 128>;  // wider rows; rms_norm's hidden 4096 is one tile
constexpr int kRowBlock = 128;    // threads per block of the row kernels (both teams)

// One team's shared memory: the staged tile of x (and of g = dy*w in the backward) and the
// tile's chunk sums.
template <class T, bool kBackward>
struct RowStage {
  float x[T::kStaged];
  float g[kBackward ? T::kStaged : 1];
  alignas(16) float sumsq[T::kTileChunks];  // read four at a time by the ordered fold
  alignas(16) float dot[kBackward ? T::kTileChunks : 1];
  float total_sumsq, total_dot;
};

// Where element e of a staged tile lives.
__device__ __forceinline__ int staged_index(int e) { return (e / kChunk) * kChunkPitch + e % kChunk; }

// Writes elements [0, n) of a tile into `staged`; value(e, v) gives the kVec values from
// tile element e on (kVec divides n, and kVec divides kChunk, so a group never straddles chunks).
template <class T, int kVec, class Value>
__device__ __forceinline__ void stage_tile(int rank, int n, float* staged, Value value) {
  for (int e = rank * kVec; e < n; e += T::kThreads * kVec) {
    float v[kVec];
    value(e, v);
    float* s = staged + staged_index(e);
#pragma unroll
    for (int k = 0; k < kVec; ++k) s[k] = v[k];
  }
}

template <int kVec>
__device__ __forceinline__ void read_staged(const float* staged, int e, float (&v)[kVec]) {
  const float* s = staged + staged_index(e);
#pragma unroll
  for (int k = 0; k < kVec; ++k) v[k] = s[k];
}

// Sum of a[j]*b[j] over one staged chunk of `len` elements: fused multiply-adds left to right.
__device__ __forceinline__ float chunk_dot(const float* a, const float* b, int len) {
  float part = 0.0f;
  if (len == kChunk) {
#pragma unroll
    for (int j = 0; j < kChunk; ++j) part = __fmaf_rn(a[j], b[j], part);
  } else {
    for (int j = 0; j < len; ++j) part = __fmaf_rn(a[j], b[j], part);
  }
  return part;
}

struct RowSums {
  float sumsq = 0.0f;  // sum of x*x
  float dot = 0.0f;    // sum of g*x (backward)
};

// The row's chunked sums in the CPU's order, returned to every thread of the team. Stages the
// row's tiles through s.x (and s.g): load_x(col, v) / load_g(col, v) give kVec values from row
// column col on. On return s.x / s.g hold the row's last tile.
template <class T, int kVec, bool kBackward, class LoadX, class LoadG>
__device__ RowSums row_sums(RowStage<T, kBackward>& s, int rank, std::int64_t width, LoadX load_x,
                            LoadG load_g) {
  RowSums acc;  // rank 0's running totals
  for (std::int64_t t0 = 0; t0 < width; t0 += T::kTile) {
    const int n = static_cast<int>(width - t0 < T::kTile ? width - t0 : T::kTile);
    stage_tile<T, kVec>(rank, n, s.x, [&](int e, float (&v)[kVec]) { load_x(t0 + e, v); });
    if constexpr (kBackward)
      stage_tile<T, kVec>(rank, n, s.g, [&](int e, float (&v)[kVec]) { load_g(t0 + e, v); });
    T::sync();
    const int chunks = (n + kChunk - 1) / kChunk;
    if (rank < chunks) {
      const int len = min(kChunk, n - rank * kChunk);
      const float* xs = s.x + rank * kChunkPitch;
      s.sumsq[rank] = chunk_dot(xs, xs, len);
      if constexpr (kBackward) s.dot[rank] = chunk_dot(s.g + rank * kChunkPitch, xs, len);
    }
    T::sync();
    if (rank == 0) {
      // In chunk order; the chunk sums are read four at a time, several loads ahead of the
      // dependent adds (the fold is the row's serial step).
      int c = 0;
#pragma unroll 8
      for (; c + 4 <= chunks; c += 4) {
        const float4 q = *reinterpret_cast<const float4*>(s.sumsq + c);
        acc.sumsq = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(acc.sumsq, q.x), q.y), q.z), q.w);
        if constexpr (kBackward) {
          const float4 d = *reinterpret_cast<const float4*>(s.dot + c);
          acc.dot = __fadd_rn(__fadd_rn(__fadd_rn(__fadd_rn(acc.dot, d.x), d.y), d.z), d.w);
        }
      }
      for (; c < chunks; ++c) {
        acc.sumsq = __fadd_rn(acc.sumsq, s.sumsq[c]);
        if constexpr (kBackward) acc.dot = __fadd_rn(acc.dot, s.dot[c]);
      }
    }
    // No sync needed here: the next tile's staging writes s.x / s.g, which nobody reads any
    // more, and the chunk sums are rewritten only after the next sync, which rank 0 reaches
    // after reading them.
  }
  if (rank == 0) {
    s.total_sumsq = acc.sumsq;
    s.total_dot = acc.dot;
  }
  T::sync();
  return {s.total_sumsq, s.total_dot};
}

// rstd = 1 / sqrt(sumsq / W + eps), as row_rstd in lib/ops/rms_norm.cpp.
__device__ __forceinline__ float row_rstd(float sumsq, std::int64_t width, float eps) {
  const float mean = __fdiv_rn(sumsq, static_cast<float>(width));
  return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(mean, eps)));
}

// The team's rank and its shared stage; rows are visited grid-stride, one per team.
template <class T>
struct RowLoop {
  static constexpr int kTeams = kRowBlock / T::kThreads;
  __device__ static int team() { return static_cast<int>(threadIdx.x) / T::kThreads; }
  __device__ static int rank() { return static_cast<int>(threadIdx.x) % T::kThreads; }
  __device__ static std::int64_t first_row() {
    return static_cast<std::int64_t>(blockIdx.x) * kTeams + team();
  }
  __device__ static std::int64_t row_stride() {
    return static_cast<std::int64_t>(gridDim.x) * kTeams;
  }
};

// ---- kernels ----

template <class T, int kVec>
__global__ void __launch_bounds__(kRowBlock)
    rms_norm_fwd_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                        bf16* __restrict__ y, std::int64_t rows, std::int64_t width, float eps,
                        bool hf) {
  using L = RowLoop<T>;
  __shared__ RowStage<T, false> stages[L::kTeams];
  RowStage<T, false>& s = stages[L::team()];
  const int rank = L::rank();
  const bool resident = width <= T::kTile;  // the row stays staged after the statistic
  for (std::int64_t row = L::first_row(); row < rows; row += L::row_stride()) {
    const bf16* xr = x + row * width;
    bf16* yr = y + row * width;
    const auto load_x = [&](std::int64_t c, float (&v)[kVec]) { load_vec<kVec>(xr + c, v); };
    const RowSums sums = row_sums<T, kVec, false>(s, rank, width, load_x, load_x);
    const float rstd = row_rstd(sums.sumsq, width, eps);
    for (std::int64_t c = static_cast<std::int64_t>(rank) * kVec; c < width;
         c += T::kThreads * kVec) {
      float xv[kVec], wv[kVec], yv[kVec];
      if (resident)
        read_staged<kVec>(s.x, static_cast<int>(c), xv);
      else
        load_vec<kVec>(xr + c, xv);
      load_vec<kVec>(w + c, wv);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const float normed = __fmul_rn(xv[k], rstd);
        yv[k] = hf ? __fmul_rn(to_f32(to_bf16(normed)), wv[k]) : __fmul_rn(normed, wv[k]);
      }
      store_vec<kVec>(yr + c, yv);
    }
    T::sync();  // the next row restages s
  }
}

template <class T, int kVec>
__global__ void __launch_bounds__(kRowBlock)
    rms_norm_bwd_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                        const bf16* __restrict__ dy, bf16* __restrict__ dx,
                        float* __restrict__ rstd_out, std::int64_t rows, std::int64_t width,
                        float eps) {
  using L = RowLoop<T>;
  __shared__ RowStage<T, true> stages[L::kTeams];
  RowStage<T, true>& s = stages[L::team()];
  const int rank = L::rank();
  const bool resident = width <= T::kTile;
  const float inv_width = __fdiv_rn(1.0f, static_cast<float>(width));
  for (std::int64_t row = L::first_row(); row < rows; row += L::row_stride()) {
    const bf16* xr = x + row * width;
    const bf16* dyr = dy + row * width;
    bf16* dxr = dx + row * width;
    const auto load_x = [&](std::int64_t c, float (&v)[kVec]) { load_vec<kVec>(xr + c, v); };
    // g = dy*w, rounded to float as the CPU stores it.
    const auto load_g = [&](std::int64_t c, float (&v)[kVec]) {
      float wv[kVec];
      load_vec<kVec>(dyr + c, v);
      load_vec<kVec>(w + c, wv);
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[k] = __fmul_rn(v[k], wv[k]);
    };
    const RowSums sums = row_sums<T, kVec, true>(s, rank, width, load_x, load_g);
    const float rs = row_rstd(sums.sumsq, width, eps);
    if (rank == 0) rstd_out[row] = rs;
    const float coef = __fmul_rn(__fmul_rn(__fmul_rn(__fmul_rn(rs, rs), rs), sums.dot), inv_width);
    for (std::int64_t c = static_cast<std::int64_t>(rank) * kVec; c < width;
         c += T::kThreads * kVec) {
      float xv[kVec], gv[kVec], dxv[kVec];
      if (resident) {
        read_staged<kVec>(s.x, static_cast<int>(c), xv);
        read_staged<kVec>(s.g, static_cast<int>(c), gv);
      } else {
        load_x(c, xv);
        load_g(c, gv);
      }
#pragma unroll
      for (int k = 0; k < kVec; ++k) dxv[k] = __fsub_rn(__fmul_rn(rs, gv[k]), __fmul_rn(xv[k], coef));
      store_vec<kVec>(dxr + c, dxv);
    }
    T::sync();  // the next row restages s
  }
}

// ---- narrow rows: a lane per chunk ----
//
// Widths of 1, 2, 4 or 8 whole chunks (32 to 256; qk_norm's 128-wide heads): a warp normalises
// 32 / kC rows at once, lane l owning chunk l % kC of row l / kC. The lane loads its chunk's 32
// elements into registers (four 16-byte loads), runs the chunk's fused multiply-adds, and the
// row's kC lanes add their chunk sums in chunk order from +0 by shuffles (every lane the same
// adds, so each holds the row's total). The operations and their order are the team kernels'
// (and the CPU's); the team kernels ran qk_norm's rows one per warp, with 4 of 32 lanes
// summing and the row staged through shared memory.
template <int kC>
struct Lanes {
  static_assert(kC == 1 || kC == 2 || kC == 4 || kC == 8, "whole rows per warp");
  static constexpr int kWidth = kC * kChunk;
  static constexpr int kRowsPerWarp = 32 / kC;
  static constexpr int kRowsPerBlock = kRowBlock / 32 * kRowsPerWarp;
  // The first row of this warp's group and the stride between groups (grid-stride).
  __device__ static std::int64_t first_row() {
    return (static_cast<std::int64_t>(blockIdx.x) * (kRowBlock / 32) + threadIdx.x / 32) * kRowsPerWarp;
  }
  __device__ static std::int64_t row_stride() {
    return static_cast<std::int64_t>(gridDim.x) * kRowsPerBlock;
  }
};

// A chunk's 32 values from p (16-byte aligned), or zeros when !live.
__device__ __forceinline__ void load_chunk(const bf16* p, bool live, float (&v)[kChunk]) {
#pragma unroll
  for (int q = 0; q < kChunk / 8; ++q) {
    float t[8] = {};
    if (live) load_vec<8>(p + 8 * q, t);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[8 * q + k] = t[k];
  }
}

__device__ __forceinline__ void store_chunk(bf16* p, const float (&v)[kChunk]) {
#pragma unroll
  for (int q = 0; q < kChunk / 8; ++q) {
    float t[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) t[k] = v[8 * q + k];
    store_vec<8>(p + 8 * q, t);
  }
}

// The row's total of `part` over its kC lanes: chunk sums added in chunk order from +0.
template <int kC>
__device__ __forceinline__ float row_total(float part, int lane) {
  const int base = lane / kC * kC;
  float total = 0.0f;
#pragma unroll
  for (int c = 0; c < kC; ++c) total = __fadd_rn(total, __shfl_sync(0xffffffffu, part, base + c));
  return total;
}

// Runs f(row, live, at, c) for this lane's row in each of its warp's row groups, grid-stride:
// `at` indexes the lane's chunk (chunk c of the row), `live` says whether the row exists. Every
// lane runs every iteration, as row_total's shuffles need the whole warp.
template <int kC, class F>
__device__ __forceinline__ void for_each_lane_row(std::int64_t rows, F&& f) {
  using L = Lanes<kC>;
  const int lane = static_cast<int>(threadIdx.x % 32), c = lane % kC;
  for (std::int64_t r0 = L::first_row(); r0 < rows; r0 += L::row_stride()) {  // warp-uniform
    const std::int64_t row = r0 + lane / kC;
    f(row, row < rows, row * L::kWidth + c * kChunk, c);
  }
}

template <int kC>
__global__ void __launch_bounds__(kRowBlock)
    rms_norm_fwd_lanes_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                              bf16* __restrict__ y, std::int64_t rows, float eps, bool hf) {
  using L = Lanes<kC>;
  const int lane = static_cast<int>(threadIdx.x % 32);
  float wv[kChunk];
  load_chunk(w + lane % kC * kChunk, true, wv);
  for_each_lane_row<kC>(rows, [&](std::int64_t, bool live, std::int64_t at, int) {
    float v[kChunk];
    load_chunk(x + at, live, v);
    float part = 0.0f;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) part = __fmaf_rn(v[j], v[j], part);
    const float rstd = row_rstd(row_total<kC>(part, lane), L::kWidth, eps);
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      const float normed = __fmul_rn(v[j], rstd);
      v[j] = hf ? __fmul_rn(to_f32(to_bf16(normed)), wv[j]) : __fmul_rn(normed, wv[j]);
    }
    if (live) store_chunk(y + at, v);
  });
}

template <int kC>
__global__ void __launch_bounds__(kRowBlock)
    rms_norm_bwd_lanes_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                              const bf16* __restrict__ dy, bf16* __restrict__ dx,
                              float* __restrict__ rstd_out, std::int64_t rows, float eps) {
  using L = Lanes<kC>;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const float inv_width = __fdiv_rn(1.0f, static_cast<float>(L::kWidth));
  float wv[kChunk];
  load_chunk(w + lane % kC * kChunk, true, wv);
  for_each_lane_row<kC>(rows, [&](std::int64_t row, bool live, std::int64_t at, int c) {
    float xv[kChunk], g[kChunk];
    load_chunk(x + at, live, xv);
    load_chunk(dy + at, live, g);
    float sumsq = 0.0f, dot = 0.0f;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) {
      g[j] = __fmul_rn(g[j], wv[j]);  // g = dy*w, rounded to float as the CPU stores it
      sumsq = __fmaf_rn(xv[j], xv[j], sumsq);
      dot = __fmaf_rn(g[j], xv[j], dot);
    }
    const float rs = row_rstd(row_total<kC>(sumsq, lane), L::kWidth, eps);
    const float coef =
        __fmul_rn(__fmul_rn(__fmul_rn(__fmul_rn(rs, rs), rs), row_total<kC>(dot, lane)), inv_width);
    if (live && c == 0) rstd_out[row] = rs;
#pragma unroll
    for (int j = 0; j < kChunk; ++j) g[j] = __fsub_rn(__fmul_rn(rs, g[j]), __fmul_rn(xv[j], coef));
    if (live) store_chunk(dx + at, g);
  });
}

// ---- dweight (docs/decisions.md D24; the order is stated in ws1/op_orders.hpp) ----
//
// Partials kernel: task (block b, column group g) sums rows [b*kDwRows, min(rows, (b+1)*kDwRows))
// of columns [g*kVec, g*kVec + kVec), each column in its own chain acc = fma(dy*x, rstd, acc)
// from +0, and writes the kVec partials to partial[b, column] (row-major [blocks, width]).
// Tasks are numbered block-major (task = b * groups + g) and visited grid-stride, one per
// thread, so neighbouring threads take neighbouring column groups of one row block: each row
// is one coalesced load of dy and one of x per warp (kVec 2: 32 lanes x 4 bytes = 128 bytes).
// kDwUnroll rows' loads are issued before their fused multiply-adds, which then run in row
// order. kVec is 2 when the width is even (then every group starts 4-byte aligned), else 1.
//
// Merge kernel: one thread per column (grid-stride) adds the column's partials in block order,
// s = 0, s = s + p_0, s = s + p_1, ..., loading them kDwMergeUnroll at a time (the next batch in
// flight while the current one is added), and writes bf16(s). With no rows (no blocks) that is
// bf16(+0). qk_norm's 128 columns are one block of threads here: its 1024 partials per column
// at 8192 tokens are a chain of 1024 dependent adds, so the loads must run ahead of them.
//
// Which thread computes a value and in how many threads the work is spread change nothing:
// every partial and every column's merge is one fixed sequence of operations.
constexpr int kDwRows = static_cast<int>(ws1::ops::kDwRowBlock);
static_assert(kDwRows > 0 && static_cast<std::int64_t>(kDwRows) == ws1::ops::kDwRowBlock);
constexpr int kDwThreads = 128;       // threads per block of the partials kernel
constexpr int kDwUnroll = 8;          // rows whose loads are in flight together
constexpr int kDwMergeThreads = 128;  // threads per block of the merge kernel
constexpr int kDwMergeUnroll = 32;    // partials per batch of loads (two batches in flight)
constexpr std::int64_t kMaxDwBlocks = std::int64_t{1} << 20;  // beyond: grid-stride

// kVec (1 or 2) bf16 values from p on, as floats (exact).
template <int kVec>
__device__ __forceinline__ void load_dw(const bf16* p, float (&v)[kVec]) {
  static_assert(kVec == 1 || kVec == 2, "one element or one 4-byte pair");
  if constexpr (kVec == 2) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
    v[0] = f.x;
    v[1] = f.y;
  } else {
    v[0] = to_f32(*p);
  }
}

template <int kVec>
__global__ void __launch_bounds__(kDwThreads)
    rms_norm_dweight_partial_kernel(const bf16* __restrict__ dy, const bf16* __restrict__ x,
                                    const float* __restrict__ rstd, float* __restrict__ partial,
                                    std::int64_t rows, std::int64_t width) {
  const std::int64_t groups = width / kVec;  // kVec divides width
  const std::int64_t tasks = groups * ((rows + kDwRows - 1) / kDwRows);
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kDwThreads;
  for (std::int64_t task = static_cast<std::int64_t>(blockIdx.x) * kDwThreads + threadIdx.x; task < tasks;
       task += stride) {
    const std::int64_t b = task / groups;
    const std::int64_t c = (task - b * groups) * kVec;
    const std::int64_t r0 = b * kDwRows;
    const int n = static_cast<int>(rows - r0 < kDwRows ? rows - r0 : kDwRows);  // 1..kDwRows
    const bf16* dyb = dy + r0 * width + c;
    const bf16* xb = x + r0 * width + c;
    const float* rsb = rstd + r0;
    float acc[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) acc[k] = 0.0f;
    int r = 0;
    for (; r + kDwUnroll <= n; r += kDwUnroll) {
      float dv[kDwUnroll][kVec], xv[kDwUnroll][kVec], rs[kDwUnroll];
#pragma unroll
      for (int u = 0; u < kDwUnroll; ++u) {
        load_dw<kVec>(dyb + static_cast<std::int64_t>(r + u) * width, dv[u]);
        load_dw<kVec>(xb + static_cast<std::int64_t>(r + u) * width, xv[u]);
        rs[u] = rsb[r + u];
      }
      // Row order: the CPU's product dy*x rounded to float, then one fused multiply-add.
#pragma unroll
      for (int u = 0; u < kDwUnroll; ++u)
#pragma unroll
        for (int k = 0; k < kVec; ++k) acc[k] = __fmaf_rn(__fmul_rn(dv[u][k], xv[u][k]), rs[u], acc[k]);
    }
    for (; r < n; ++r) {  // the block's last n % kDwUnroll rows
      float dv[kVec], xv[kVec];
      load_dw<kVec>(dyb + static_cast<std::int64_t>(r) * width, dv);
      load_dw<kVec>(xb + static_cast<std::int64_t>(r) * width, xv);
      const float rs = rsb[r];
#pragma unroll
      for (int k = 0; k < kVec; ++k) acc[k] = __fmaf_rn(__fmul_rn(dv[k], xv[k]), rs, acc[k]);
    }
    float* out = partial + b * width + c;
#pragma unroll
    for (int k = 0; k < kVec; ++k) out[k] = acc[k];
  }
}

// A template (on the batch size) as every kernel of this header, which two .cu files include:
// one definition per instantiation at link time.
template <int kBatch>
__global__ void __launch_bounds__(kDwMergeThreads)
    rms_norm_dweight_merge_kernel(const float* __restrict__ partial, bf16* __restrict__ dweight,
                                  std::int64_t blocks, std::int64_t width) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kDwMergeThreads;
  for (std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kDwMergeThreads + threadIdx.x; c < width;
       c += stride) {
    const float* pc = partial + c;
    // Batches of kBatch partials; batch k + 1 is loaded while batch k is added.
    const auto load_batch = [&](std::int64_t b0, float (&p)[kBatch]) {
#pragma unroll
      for (int u = 0; u < kBatch; ++u) p[u] = pc[(b0 + u) * width];
    };
    const std::int64_t batches = blocks / kBatch;
    float s = 0.0f;
    float cur[kBatch];
    if (batches > 0) load_batch(0, cur);
    for (std::int64_t k = 0; k < batches; ++k) {
      const bool more = k + 1 < batches;
      float next[kBatch];
      if (more) load_batch((k + 1) * kBatch, next);
#pragma unroll
      for (int u = 0; u < kBatch; ++u) s = __fadd_rn(s, cur[u]);  // block order
      if (more) {
#pragma unroll
        for (int u = 0; u < kBatch; ++u) cur[u] = next[u];
      }
    }
    for (std::int64_t b = batches * kBatch; b < blocks; ++b) s = __fadd_rn(s, pc[b * width]);
    dweight[c] = to_bf16(s);
  }
}

// The merge for many blocks (qk_norm's 1024 at 8192 tokens): a block of threads stages the
// partials of kMergeCols columns, kMergeTile blocks at a time, with coalesced loads, and one
// thread per column adds them from shared memory in block order from +0, as the merge kernel
// does: the per-column thread of that kernel waits on global loads 32 at a time.
constexpr int kMergeCols = 8, kMergeTile = 512, kMergeStagedThreads = 256;
constexpr std::int64_t kMergeStagedFrom = 128;  // blocks from which launch_dweight_merge stages

template <int kCols>  // a template, as the merge kernel: two .cu files include this header
__global__ void __launch_bounds__(kMergeStagedThreads)
    rms_norm_dweight_merge_staged_kernel(const float* __restrict__ partial, bf16* __restrict__ dweight,
                                         std::int64_t blocks, std::int64_t width) {
  __shared__ float tile[kMergeTile][kCols + 1];
  const int t = static_cast<int>(threadIdx.x);
  for (std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kCols; c0 < width;
       c0 += static_cast<std::int64_t>(gridDim.x) * kCols) {
    float s = 0.0f;  // column c0 + t's sum, for t < kCols
    for (std::int64_t b0 = 0; b0 < blocks; b0 += kMergeTile) {
      const int n = static_cast<int>(blocks - b0 < kMergeTile ? blocks - b0 : kMergeTile);
      for (int e = t; e < n * kCols; e += kMergeStagedThreads) {
        const int bb = e / kCols, j = e % kCols;
        tile[bb][j] = c0 + j < width ? partial[(b0 + bb) * width + c0 + j] : 0.0f;
      }
      __syncthreads();
      if (t < kCols) {
#pragma unroll 8
        for (int bb = 0; bb < n; ++bb) s = __fadd_rn(s, tile[bb][t]);
      }
      __syncthreads();
    }
    if (t < kCols && c0 + t < width) dweight[c0 + t] = to_bf16(s);
  }
}

// Blocks for `items` items of `per_block` each: at least 1, at most kMaxDwBlocks.
inline unsigned dw_grid(std::int64_t items, int per_block) {
  const std::int64_t b = (items + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 1 ? 1 : (b < kMaxDwBlocks ? b : kMaxDwBlocks));
}

// Row blocks of `rows` rows: the partials workspace holds dw_row_blocks(rows) * width floats.
inline std::int64_t dw_row_blocks(std::int64_t rows) { return (rows + kDwRows - 1) / kDwRows; }

// dweight [width] from its block partials ([dw_row_blocks(rows), width]; none when rows == 0).
inline void launch_dweight_merge(const float* partial, bf16* dweight, std::int64_t rows, std::int64_t width) {
  const std::int64_t blocks = dw_row_blocks(rows);
  if (blocks >= kMergeStagedFrom) {
    rms_norm_dweight_merge_staged_kernel<kMergeCols>
        <<<dw_grid(width, kMergeCols), kMergeStagedThreads>>>(partial, dweight, blocks, width);
    check_launch("rms_norm_dweight_merge_staged_kernel");
    return;
  }
  rms_norm_dweight_merge_kernel<kDwMergeUnroll><<<dw_grid(width, kDwMergeThreads), kDwMergeThreads>>>(
      partial, dweight, blocks, width);
  check_launch("rms_norm_dweight_merge_kernel");
}

// dweight [width] from dy, x [rows, width] and the rows' rstd; `partial` is the workspace
// (unused, and may be null, when rows == 0). width > 0.
inline void launch_dweight(const bf16* dy, const bf16* x, const float* rstd, float* partial, bf16* dweight,
                           std::int64_t rows, std::int64_t width) {
  const std::int64_t blocks = dw_row_blocks(rows);
  if (blocks > 0) {
    if (width % 2 == 0)
      rms_norm_dweight_partial_kernel<2><<<dw_grid(blocks * (width / 2), kDwThreads), kDwThreads>>>(
          dy, x, rstd, partial, rows, width);
    else
      rms_norm_dweight_partial_kernel<1><<<dw_grid(blocks * width, kDwThreads), kDwThreads>>>(
          dy, x, rstd, partial, rows, width);
    check_launch("rms_norm_dweight_partial_kernel");
  }
  launch_dweight_merge(partial, dweight, rows, width);
}

// ---- fused backward of 128-wide rows: dx and dweight's partials in one pass over x and dy ----
//
// The lane kernels read x and dy for dx, and the partials kernel reads them again. For rows of
// kC chunks (qk_norm's 128-wide heads: kC = 4) one kernel reads them once: a block of threads
// walks row blocks (kDwRows rows) grid-stride, each in batches of kBatchRows = 256 / kC rows (a
// thread per chunk of a batch), staged through shared memory by cp.async one batch ahead, across
// row-block boundaries. Per batch:
//  - thread (r, c) runs its chunk's fused multiply-adds of x*x and g*x (g = dy*w); one thread
//    per row adds the row's chunk sums in chunk order from +0 (the lane kernels' and the CPU's
//    order), giving rstd and coef;
//  - thread (r, c) forms its chunk of dx, staged and stored coalesced; the thread owning column
//    j runs dweight's chain for j, acc = fma(dy*x, rstd, acc), over the batch's rows in row order
//    (dy*x of two bf16 values is exact in float, so it is formed from the staged bf16 again).
// After a row block's last batch the owners write its partials; the merge kernel adds them in
// block order. Every operation and its order are the unfused kernels', so the bits are the same
// (test_gpu "[norm_dweight]").
// Measured on the H200 (docs/log/performance.md, "rms_norm / qk_norm backward"): qk_norm's backward
// at 8192 tokens x 32 heads went from 0.121 to about 0.10 ms. The same design across a cluster
// for rms_norm's 4096-wide rows (chunk sums exchanged through distributed shared memory) took
// 172 us against the row and partials kernels' 120: the per-batch row sums and chains serialise
// each block, and two blocks per SM do not hide them. So other widths keep the unfused kernels.
constexpr int kFusedThreads = 256;  // = chunks per batch: kBatchRows * kC
constexpr int kChunkBytes = kChunk * 2;

// Byte offset of 16-byte piece k (0..3) of staged chunk i: pieces rotated by (i / 2) % 4, so
// the 8 threads of a quarter warp reading piece k of 8 consecutive chunks hit distinct banks.
__device__ __forceinline__ int fused_piece(int i, int k) { return i * kChunkBytes + ((k ^ ((i >> 1) & 3)) << 4); }

template <int kC>
struct FusedShape {
  static constexpr int kWidth = kC * kChunk;
  static constexpr int kBatchRows = kFusedThreads / kC;
  static_assert(kFusedThreads % kC == 0 && kDwRows % kBatchRows == 0, "batches tile a row block");
  static_assert(kWidth <= kFusedThreads, "a thread per column for dweight's chains");
  static constexpr int kStageBytes = kFusedThreads * kChunkBytes;  // one tensor's batch
  // Shared memory: x and dy, two batches each; dx of one batch; the chunk sums of one batch
  // ([chunk][row] float2, rows padded by one against bank conflicts); each row's (rstd, coef).
  static constexpr int kDxOff = 4 * kStageBytes;
  static constexpr int kStatsOff = kDxOff + kStageBytes;
  static constexpr int kRowOff = kStatsOff + kC * (kBatchRows + 1) * 8;
  static constexpr int kBytes = kRowOff + kBatchRows * 8;
};

template <int kC>
__global__ void __launch_bounds__(kFusedThreads, 2)
    rms_norm_bwd_fused_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                              const bf16* __restrict__ dy, bf16* __restrict__ dx,
                              float* __restrict__ partial, std::int64_t rows, float eps) {
  using F = FusedShape<kC>;
  constexpr std::int64_t kWidth = F::kWidth;
  constexpr int kR = F::kBatchRows;
  extern __shared__ __align__(16) unsigned char smem[];
  const int t = static_cast<int>(threadIdx.x);
  const std::int64_t blocks = (rows + kDwRows - 1) / kDwRows;
  const int r = t / kC, c = t % kC;  // this thread's chunk of a batch
  const float inv_width = __fdiv_rn(1.0f, static_cast<float>(kWidth));

  const auto stage = [&](int buf, int tensor) { return smem + (2 * buf + tensor) * F::kStageBytes; };
  unsigned char* dx_stage = smem + F::kDxOff;
  float2* stats = reinterpret_cast<float2*>(smem + F::kStatsOff);   // [chunk][kR + 1]
  float2* row_coef = reinterpret_cast<float2*>(smem + F::kRowOff);  // (rstd, coef) per row

  // The block's row blocks and their batches, one sequence of items.
  struct Item {
    std::int64_t b, row0;  // row block, first row of the batch
    int k, live, batches;  // batch of the row block, its rows, the row block's batches
  };
  const auto item = [&](std::int64_t b, int k) {
    const std::int64_t block_row0 = b * kDwRows;
    const int block_rows = static_cast<int>(rows - block_row0 < kDwRows ? rows - block_row0 : kDwRows);
    return Item{b, block_row0 + std::int64_t{k} * kR, k, min(kR, block_rows - k * kR), (block_rows + kR - 1) / kR};
  };
  const auto next = [&](const Item& it) {
    return it.k + 1 < it.batches ? item(it.b, it.k + 1) : item(it.b + gridDim.x, 0);
  };

  // Piece p of a tensor's batch is piece p % 4 of chunk p / 4 (row p / 4 / kC); rows past the
  // row block are not loaded (nothing reads them as live).
  const auto global_at = [&](const Item& it, int p) {
    const int i = p >> 2;
    return (it.row0 + i / kC) * kWidth + (i % kC) * kChunk + (p & 3) * 8;
  };
  const auto issue = [&](const Item& it, int buf) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int p = t + j * kFusedThreads;
      if ((p >> 2) / kC < it.live) {
        const std::int64_t at = global_at(it, p);
        cp_async16(stage(buf, 0) + fused_piece(p >> 2, p & 3), x + at);
        cp_async16(stage(buf, 1) + fused_piece(p >> 2, p & 3), dy + at);
      }
    }
    cp_async_commit();
  };
  const auto read_chunk = [&](const unsigned char* s, float (&v)[kChunk]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float e[8];
      unpack<8>(Packed<8>{*reinterpret_cast<const uint4*>(s + fused_piece(t, k))}, e);
#pragma unroll
      for (int m = 0; m < 8; ++m) v[8 * k + m] = e[m];
    }
  };

  uint4 wraw[4];  // this thread's chunk of w, kept as bf16 (registers limit the blocks per SM)
#pragma unroll
  for (int k = 0; k < 4; ++k) wraw[k] = *reinterpret_cast<const uint4*>(w + c * kChunk + 8 * k);
  float acc = 0.0f;  // dweight's chain for column t (t < kWidth)

  Item cur = item(blockIdx.x, 0);
  if (cur.b < blocks) issue(cur, 0);
  for (int n = 0; cur.b < blocks; cur = next(cur), ++n) {
    const int buf = n & 1;
    const Item nxt = next(cur);
    if (nxt.b < blocks) {
      issue(nxt, buf ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    // x and g = dy*w of this thread's chunk (g rounded to float as the CPU stores it); read
    // from the stage again after the row sums rather than held across them.
    const auto load_xg = [&](float (&xv)[kChunk], float (&g)[kChunk]) {
      read_chunk(stage(buf, 0), xv);
      read_chunk(stage(buf, 1), g);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        float wv[8];
        unpack<8>(Packed<8>{wraw[kk]}, wv);
#pragma unroll
        for (int m = 0; m < 8; ++m) g[8 * kk + m] = __fmul_rn(g[8 * kk + m], wv[m]);
      }
    };
    {
      float xv[kChunk], g[kChunk], sumsq = 0.0f, dot = 0.0f;
      load_xg(xv, g);
#pragma unroll
      for (int j = 0; j < kChunk; ++j) {
        sumsq = __fmaf_rn(xv[j], xv[j], sumsq);
        dot = __fmaf_rn(g[j], xv[j], dot);
      }
      stats[c * (kR + 1) + r] = make_float2(sumsq, dot);
    }
    __syncthreads();
    if (t < kR) {
      float s2 = 0.0f, sd = 0.0f;
#pragma unroll
      for (int j = 0; j < kC; ++j) {
        const float2 v = stats[j * (kR + 1) + t];
        s2 = __fadd_rn(s2, v.x);
        sd = __fadd_rn(sd, v.y);
      }
      const float rs = row_rstd(s2, kWidth, eps);
      row_coef[t] = make_float2(rs, __fmul_rn(__fmul_rn(__fmul_rn(__fmul_rn(rs, rs), rs), sd), inv_width));
    }
    __syncthreads();
    {
      const float2 rc = row_coef[r];
      float xv[kChunk], g[kChunk];
      load_xg(xv, g);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        uint4 raw;
        __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const int j = 8 * kk + 2 * m;
          h[m] = __floats2bfloat162_rn(__fsub_rn(__fmul_rn(rc.x, g[j]), __fmul_rn(xv[j], rc.y)),
                                       __fsub_rn(__fmul_rn(rc.x, g[j + 1]), __fmul_rn(xv[j + 1], rc.y)));
        }
        *reinterpret_cast<uint4*>(dx_stage + fused_piece(t, kk)) = raw;
      }
    }
    __syncthreads();
    // dweight: the owner of column t runs its chain over the batch's rows in order.
    if (t < kWidth) {
      const int e = t % kChunk, piece = e >> 3, within = (e & 7) * 2;
      const auto step = [&](int rr) {
        const int off = fused_piece(rr * kC + t / kChunk, piece) + within;
        const float p = __fmul_rn(to_f32(*reinterpret_cast<const bf16*>(stage(buf, 1) + off)),
                                  to_f32(*reinterpret_cast<const bf16*>(stage(buf, 0) + off)));
        acc = __fmaf_rn(p, row_coef[rr].x, acc);
      };
      if (cur.live == kR) {
#pragma unroll 8
        for (int rr = 0; rr < kR; ++rr) step(rr);
      } else {
        for (int rr = 0; rr < cur.live; ++rr) step(rr);
      }
      if (cur.k + 1 == cur.batches) {  // the row block's last batch: its partial
        partial[cur.b * kWidth + t] = acc;
        acc = 0.0f;
      }
    }
    // dx out, coalesced, in issue()'s pieces.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int p = t + j * kFusedThreads;
      if ((p >> 2) / kC < cur.live)
        *reinterpret_cast<uint4*>(dx + global_at(cur, p)) = *reinterpret_cast<const uint4*>(dx_stage + fused_piece(p >> 2, p & 3));
    }
    __syncthreads();  // the stage buffer, dx_stage and row_coef are rewritten by the next items
  }
}

constexpr int kFusedChunks = 4;  // the one row width (in chunks) the fused backward takes

// dx and dweight's partials for `rows` (> 0) rows of kFusedChunks chunks.
inline void launch_bwd_fused(const bf16* x, const bf16* w, const bf16* dy, bf16* dx, float* partial,
                             std::int64_t rows, float eps) {
  using F = FusedShape<kFusedChunks>;
  const auto kernel = rms_norm_bwd_fused_kernel<kFusedChunks>;
  WS1_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, F::kBytes));
  // As many blocks as fit at once (each walks row blocks grid-stride), at most one per row block.
  int device = 0, sms = 0, per_sm = 0;
  WS1_CUDA(cudaGetDevice(&device));
  WS1_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  WS1_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kFusedThreads, F::kBytes));
  if (per_sm < 1) throw std::runtime_error("rms_norm_bwd_fused_kernel: no block fits on an SM");
  const std::int64_t grid = std::min<std::int64_t>(dw_row_blocks(rows), std::int64_t{sms} * per_sm);
  kernel<<<static_cast<unsigned>(grid), kFusedThreads, F::kBytes>>>(x, w, dy, dx, partial, rows, eps);
  check_launch("rms_norm_bwd_fused_kernel");
}

// ---- host side ----

constexpr unsigned kMaxRowBlocks = 1u << 20;  // rows beyond grid * teams are visited grid-stride

// Calls f(team, vec) with the row team for `width` and the access width as compile-time types.
template <class F>
void dispatch(std::int64_t width, F&& f) {
  using V8 = std::integral_constant<int, 8>;
  using V1 = std::integral_constant<int, 1>;
  const bool vec = width % 8 == 0;
  if (width <= WarpTeam::kTile) {
    if (vec)
      f(WarpTeam{}, V8{});
    else
      f(WarpTeam{}, V1{});
  } else {
    if (vec)
      f(BlockTeam{}, V8{});
    else
      f(BlockTeam{}, V1{});
  }
}

// Calls f(C) with the lane kernels' chunks per row for widths of 1, 2, 4 or 8 whole chunks and
// returns true; false (f not called) for other widths.
template <class F>
bool dispatch_lanes(std::int64_t width, F&& f) {
  switch (width) {
    case 1 * kChunk: f(std::integral_constant<int, 1>{}); return true;
    case 2 * kChunk: f(std::integral_constant<int, 2>{}); return true;
    case 4 * kChunk: f(std::integral_constant<int, 4>{}); return true;
    case 8 * kChunk: f(std::integral_constant<int, 8>{}); return true;
    default: return false;
  }
}

template <int kC>
unsigned lane_blocks(std::int64_t rows) {
  const unsigned b = blocks_for(rows, Lanes<kC>::kRowsPerBlock);
  return b < kMaxRowBlocks ? b : kMaxRowBlocks;
}

template <class T>
unsigned row_blocks(std::int64_t rows) {
  const unsigned b = blocks_for(rows, RowLoop<T>::kTeams);
  return b < kMaxRowBlocks ? b : kMaxRowBlocks;
}

inline float eps_of(const ws1::OpContext& ctx) { return static_cast<float>(ctx.rms_norm_eps); }

// The forward on checked-here inputs; throws OpInputError (call inside guarded()).
inline ws1::Tensors forward(std::string_view op, const ws1::Tensors& in, const ws1::OpContext& ctx) {
  const ws1::ops::NormInputs s = ws1::ops::check_norm_inputs(op, in, false);
  const DeviceArray<bf16> x = upload_bf16(*s.x), w = upload_bf16(*s.weight);
  DeviceArray<bf16> y = poisoned<bf16>(x.size());
  const bool hf = ctx.rms_norm_order == ws1::RmsNormOrder::kHf;
  launch_region(std::string(op) + ".fwd", [&] {
    if (s.rows == 0) return;
    const bool lanes = dispatch_lanes(s.width, [&](auto chunks) {
      constexpr int kC = decltype(chunks)::value;
      rms_norm_fwd_lanes_kernel<kC><<<lane_blocks<kC>(s.rows), kRowBlock>>>(x.get(), w.get(), y.get(), s.rows,
                                                                            eps_of(ctx), hf);
      check_launch("rms_norm_fwd_lanes_kernel");
    });
    if (lanes) return;
    dispatch(s.width, [&](auto team, auto vec) {
      using T = decltype(team);
      rms_norm_fwd_kernel<T, decltype(vec)::value><<<row_blocks<T>(s.rows), kRowBlock>>>(
          x.get(), w.get(), y.get(), s.rows, s.width, eps_of(ctx), hf);
      check_launch("rms_norm_fwd_kernel");
    });
  });
  return {{"y", download_bf16(y, s.x->shape())}};
}

// The backward on checked-here inputs; throws OpInputError (call inside guarded()).
inline ws1::Tensors backward(std::string_view op, const ws1::Tensors& in, const ws1::OpContext& ctx) {
  const ws1::ops::NormInputs s = ws1::ops::check_norm_inputs(op, in, true);
  const DeviceArray<bf16> x = upload_bf16(*s.x), w = upload_bf16(*s.weight), dy = upload_bf16(*s.dy);
  DeviceArray<bf16> dx = poisoned<bf16>(x.size());
  DeviceArray<bf16> dweight = poisoned<bf16>(w.size());
  DeviceArray<float> rstd = poisoned<float>(static_cast<std::size_t>(s.rows));
  // dweight's block partials, [row blocks, width]; each is written before it is read, so a
  // repeated region (bench) needs no clearing. Poisoned: one the kernel missed would be a NaN.
  DeviceArray<float> partial = poisoned<float>(static_cast<std::size_t>(dw_row_blocks(s.rows) * s.width));
  launch_region(std::string(op) + ".bwd", [&] {
    if (s.rows > 0 && s.width == FusedShape<kFusedChunks>::kWidth) {
      launch_bwd_fused(x.get(), w.get(), dy.get(), dx.get(), partial.get(), s.rows, eps_of(ctx));
      launch_dweight_merge(partial.get(), dweight.get(), s.rows, s.width);
      return;
    }
    if (s.rows > 0) {
      const bool lanes = dispatch_lanes(s.width, [&](auto chunks) {
        constexpr int kC = decltype(chunks)::value;
        rms_norm_bwd_lanes_kernel<kC><<<lane_blocks<kC>(s.rows), kRowBlock>>>(
            x.get(), w.get(), dy.get(), dx.get(), rstd.get(), s.rows, eps_of(ctx));
        check_launch("rms_norm_bwd_lanes_kernel");
      });
      if (!lanes)
        dispatch(s.width, [&](auto team, auto vec) {
          using T = decltype(team);
          rms_norm_bwd_kernel<T, decltype(vec)::value><<<row_blocks<T>(s.rows), kRowBlock>>>(
              x.get(), w.get(), dy.get(), dx.get(), rstd.get(), s.rows, s.width, eps_of(ctx));
          check_launch("rms_norm_bwd_kernel");
        });
    }
    if (s.width > 0)  // also with no rows: dweight is then zero
      launch_dweight(dy.get(), x.get(), rstd.get(), partial.get(), dweight.get(), s.rows, s.width);
  });
  return {{"dx", download_bf16(dx, s.x->shape())},
          {"dweight", download_bf16(dweight, s.weight->shape())}};
}

// The kernels each direction launches, for the kernel id.
inline constexpr std::string_view kForwardKernels = "rms_norm_fwd_kernel,rms_norm_fwd_lanes_kernel";
inline constexpr std::string_view kBackwardKernels =
    "rms_norm_bwd_kernel,rms_norm_bwd_lanes_kernel,rms_norm_bwd_fused_kernel,rms_norm_dweight_partial_kernel,"
    "rms_norm_dweight_merge_kernel,rms_norm_dweight_merge_staged_kernel";

}  // namespace ws1cuda::rms

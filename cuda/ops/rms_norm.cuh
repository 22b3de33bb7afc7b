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
//    right as the CPU writes it; dweight = bf16 of the sum over rows, in row index order, of
//    fma(dy*x, rstd, acc).
//
// Work split of the row kernels: a team normalises one row, a warp for rows up to 256 wide
// (qk_norm's 128-wide heads, 4 rows per block), a 128-thread block above (rms_norm's 4096).
// A row is staged tile by tile into shared memory as float with coalesced loads (16-byte when
// width % 8 == 0, so every row starts 16-byte aligned; else element by element); each
// 32-element chunk is padded to 33 floats so the per-chunk threads read on distinct banks.
// When the row is a single tile the output pass reads it back from shared memory. A row's
// arithmetic depends on its width only: the kernels are batch-invariant.
//
// dweight: one thread per column (warp 0 of a 256-thread block owns 32 columns, or 8 for
// narrow rows); the whole block stages tiles of rows of dy*x and the rows' rstd into shared
// memory, prefetching the next tile into registers while warp 0 runs its sequential sums over
// the current one.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "op_support.hpp"
#include "rms_norm.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/launch_region.cuh"
#include "ws1cuda/kernel_support.cuh"

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
  float sumsq[T::kTileChunks];
  float dot[kBackward ? T::kTileChunks : 1];
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
#pragma unroll 4
      for (int c = 0; c < chunks; ++c) {
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

// dweight: kCols columns per block, one thread of warp 0 each (32 columns; 8 for narrow rows
// such as qk_norm's 128-wide heads, so more SMs load); tiles of DwTile::kRows rows, kDwGroups
// kVec-wide loads of dy and of x per thread per tile.
constexpr int kDwThreads = 256;
constexpr int kDwGroups = 4;
constexpr std::int64_t kDwNarrowWidth = 1024;  // up to this width, 8 columns per block

template <int kVec, int kCols>
struct DwTile {
  static constexpr int kPitch = kCols + 1;  // odd: the loaders' stores land on distinct banks
  static constexpr int kGroupsPerRow = kCols / kVec;
  static constexpr int kRows = kDwThreads * kDwGroups / kGroupsPerRow;
  static constexpr int kRstdPerThread = (kRows + kDwThreads - 1) / kDwThreads;
  static_assert(kCols % kVec == 0 && kCols <= 32, "whole groups; consumers in warp 0");
  static_assert(kRows * (kPitch + 1) * 4 <= 48 * 1024, "static shared memory");
};

template <int kVec, int kCols>
__global__ void __launch_bounds__(kDwThreads)
    rms_norm_dweight_kernel(const bf16* __restrict__ dy, const bf16* __restrict__ x,
                            const float* __restrict__ rstd, bf16* __restrict__ dweight,
                            std::int64_t rows, std::int64_t width) {
  using Tile = DwTile<kVec, kCols>;
  __shared__ float prod[Tile::kRows * Tile::kPitch];  // dy*x of the tile, [row][column]
  __shared__ float tile_rstd[Tile::kRows];
  const int tid = static_cast<int>(threadIdx.x);
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kCols;

  // The next tile in registers (zeros outside the matrix).
  Packed<kVec> dy_next[kDwGroups], x_next[kDwGroups];
  float rstd_next[Tile::kRstdPerThread];
  const auto prefetch = [&](std::int64_t r0) {
#pragma unroll
    for (int i = 0; i < kDwGroups; ++i) {
      const int g = tid + i * kDwThreads;
      const std::int64_t r = r0 + g / Tile::kGroupsPerRow;
      const std::int64_t c = c0 + (g % Tile::kGroupsPerRow) * kVec;
      dy_next[i] = Packed<kVec>{};
      x_next[i] = Packed<kVec>{};
      if (r < rows && c < width) {  // kVec 8 only when width % 8 == 0: whole groups
        dy_next[i] = load_packed<kVec>(dy + r * width + c);
        x_next[i] = load_packed<kVec>(x + r * width + c);
      }
    }
#pragma unroll
    for (int q = 0; q < Tile::kRstdPerThread; ++q) {
      const int j = tid + q * kDwThreads;
      rstd_next[q] = j < Tile::kRows && r0 + j < rows ? rstd[r0 + j] : 0.0f;
    }
  };

  float acc = 0.0f;  // column c0 + tid's sum (threads tid < kCols)
  const std::int64_t tiles = (rows + Tile::kRows - 1) / Tile::kRows;
  if (tiles > 0) prefetch(0);
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t r0 = t * Tile::kRows;
    // The CPU's product dy*x, rounded to float before its fused multiply-add.
#pragma unroll
    for (int i = 0; i < kDwGroups; ++i) {
      const int g = tid + i * kDwThreads;
      float dyv[kVec], xv[kVec];
      unpack<kVec>(dy_next[i], dyv);
      unpack<kVec>(x_next[i], xv);
      float* p = prod + (g / Tile::kGroupsPerRow) * Tile::kPitch + (g % Tile::kGroupsPerRow) * kVec;
#pragma unroll
      for (int k = 0; k < kVec; ++k) p[k] = __fmul_rn(dyv[k], xv[k]);
    }
#pragma unroll
    for (int q = 0; q < Tile::kRstdPerThread; ++q) {
      const int j = tid + q * kDwThreads;
      if (j < Tile::kRows) tile_rstd[j] = rstd_next[q];
    }
    __syncthreads();
    if (t + 1 < tiles) prefetch(r0 + Tile::kRows);  // in flight while warp 0 sums
    if (tid < kCols) {
      const int n = static_cast<int>(rows - r0 < Tile::kRows ? rows - r0 : Tile::kRows);
      const float* pc = prod + tid;
#pragma unroll 8
      for (int r = 0; r < n; ++r) acc = __fmaf_rn(pc[r * Tile::kPitch], tile_rstd[r], acc);
    }
    __syncthreads();  // the tile is consumed before the next one is stored
  }
  if (tid < kCols && c0 + tid < width) dweight[c0 + tid] = to_bf16(acc);
}

template <int kVec, int kCols>
void launch_dweight(const bf16* dy, const bf16* x, const float* rstd, bf16* dweight,
                    std::int64_t rows, std::int64_t width) {
  rms_norm_dweight_kernel<kVec, kCols><<<blocks_for(width, kCols), kDwThreads>>>(
      dy, x, rstd, dweight, rows, width);
  check_launch("rms_norm_dweight_kernel");
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
  launch_region(std::string(op) + ".bwd", [&] {
    if (s.rows > 0) {
      dispatch(s.width, [&](auto team, auto vec) {
        using T = decltype(team);
        rms_norm_bwd_kernel<T, decltype(vec)::value><<<row_blocks<T>(s.rows), kRowBlock>>>(
            x.get(), w.get(), dy.get(), dx.get(), rstd.get(), s.rows, s.width, eps_of(ctx));
        check_launch("rms_norm_bwd_kernel");
      });
    }
    if (s.width > 0) {  // also with no rows: dweight is then zero
      const bool vec = s.width % 8 == 0, narrow = s.width <= kDwNarrowWidth;
      const auto launch = vec ? (narrow ? launch_dweight<8, 8> : launch_dweight<8, 32>)
                              : (narrow ? launch_dweight<1, 8> : launch_dweight<1, 32>);
      launch(dy.get(), x.get(), rstd.get(), dweight.get(), s.rows, s.width);
    }
  });
  return {{"dx", download_bf16(dx, s.x->shape())},
          {"dweight", download_bf16(dweight, s.weight->shape())}};
}

// The kernels each direction launches, for the kernel id.
inline constexpr std::string_view kForwardKernels = "rms_norm_fwd_kernel";
inline constexpr std::string_view kBackwardKernels = "rms_norm_bwd_kernel,rms_norm_dweight_kernel";

}  // namespace ws1cuda::rms

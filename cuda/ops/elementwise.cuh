// Internal: the kernel shapes the elementwise-class ops share on cuda_bf16 (embedding, rope,
// silu, swiglu, pack; lib/ops/elementwise.hpp is their CPU side).
//   map_elements(): a pointwise map over same-shape bf16 tensors (silu, swiglu). Grid-stride
//     over 16-byte vectors of 8 bf16 per thread, then the last n % 8 elements one per thread.
//     Every output element is one FP32 function of the input elements at its index, rounded
//     to bf16 once: no reduction, so nothing depends on the grid.
//   run_map(): the whole host side of such an op direction: upload, map_elements, download.
//   gather_rows(): dst row k = src row map[k], or +0 where map[k] < 0 (embedding forward, pack
//     both ways). A bit copy, 16 bytes per thread where the row width allows.
//   load_bf16 / store_bf16: V = 8 (one 16-byte access) or V = 1 bf16 elements as FP32.
// Vector accesses need 16-byte aligned addresses: every pointer here is a DeviceArray (cudaMalloc,
// 256-byte aligned) plus an offset that is a multiple of 8 elements on the vector path.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/op.hpp"
#include "ws1/tensor.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/kernel_support.cuh"
#include "ws1cuda/launch_region.cuh"

namespace ws1cuda::elementwise {

constexpr int kVec = 8;          // bf16 elements in a 16-byte access
constexpr int kThreads = 256;    // block size of the grid-stride kernels

// Blocks for `items` work items at `threads` per block: one item per thread, capped at what
// the device keeps resident at once (2048 threads per SM on sm_90); the kernels grid-stride
// over the rest. The SM count is read once per process (the backend runs on one device).
inline unsigned grid_for(std::int64_t items, int threads) {
  static const int sms = [] {
    int device = 0, n = 0;
    WS1_CUDA(cudaGetDevice(&device));
    WS1_CUDA(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return std::max(n, 1);
  }();
  const std::int64_t resident = std::int64_t{sms} * std::max(2048 / threads, 1);
  return static_cast<unsigned>(std::min<std::int64_t>(blocks_for(items, threads), resident));
}

// A host vector on the device (the index arrays the host builds while validating).
template <class T>
DeviceArray<T> upload_vector(const std::vector<T>& v) {
  DeviceArray<T> a(v.size());
  if (!v.empty()) WS1_CUDA(cudaMemcpy(a.get(), v.data(), a.bytes(), cudaMemcpyHostToDevice));
  return a;
}

template <int V>
__device__ __forceinline__ void load_bf16(const __nv_bfloat16* p, float (&f)[V]) {
  static_assert(V == kVec || V == 1);
  if constexpr (V == kVec) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const auto* h = reinterpret_cast<const __nv_bfloat16*>(&raw);
#pragma unroll
    for (int j = 0; j < kVec; ++j) f[j] = to_f32(h[j]);
  } else {
    f[0] = to_f32(*p);
  }
}

// Each element rounded to bf16 once (nearest even).
template <int V>
__device__ __forceinline__ void store_bf16(__nv_bfloat16* p, const float (&f)[V]) {
  static_assert(V == kVec || V == 1);
  if constexpr (V == kVec) {
    uint4 raw;
    auto* h = reinterpret_cast<__nv_bfloat16*>(&raw);
#pragma unroll
    for (int j = 0; j < kVec; ++j) h[j] = to_bf16(f[j]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
    *p = to_bf16(f[0]);
  }
}

// sigmoid(x) = 1 / (1 + exp(-x)) with the CPU's operations (lib/ops/elementwise.hpp
// sigmoid_f32), each rounded separately. expf is CUDA's IEEE-mode expf (at most 2 ulp from the
// exact value; the CPU's glibc expf is within about half an ulp), so s can differ from the CPU's
// by an ulp for some x; after the single bf16 output rounding that shows only where a result
// sits within an ulp or two of a bf16 rounding boundary.
__device__ __forceinline__ float sigmoid_f32(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
}

// d silu(x) / dx = s * (1 + x * (1 - s)) with s = sigmoid(x), in the CPU's order.
__device__ __forceinline__ float silu_derivative(float x, float s) {
  return __fmul_rn(s, __fadd_rn(1.0f, __fmul_rn(x, __fsub_rn(1.0f, s))));
}

// ---- map_elements ------------------------------------------------------------------------
// F: a functor type with `static constexpr int kIn, kOut` and
//   __device__ void operator()(const float (&in)[kIn], float (&out)[kOut]) const.
template <class F>
struct MapArgs {
  const __nv_bfloat16* in[F::kIn];
  __nv_bfloat16* out[F::kOut];
  std::int64_t n = 0;  // elements of each tensor
};

template <class F, int V>
__device__ __forceinline__ void map_at(const MapArgs<F>& a, const F& f, std::int64_t at) {
  float x[F::kIn][V], y[F::kOut][V];
#pragma unroll
  for (int k = 0; k < F::kIn; ++k) load_bf16<V>(a.in[k] + at, x[k]);
#pragma unroll
  for (int j = 0; j < V; ++j) {
    float xi[F::kIn], yi[F::kOut];
#pragma unroll
    for (int k = 0; k < F::kIn; ++k) xi[k] = x[k][j];
    f(xi, yi);
#pragma unroll
    for (int k = 0; k < F::kOut; ++k) y[k][j] = yi[k];
  }
#pragma unroll
  for (int k = 0; k < F::kOut; ++k) store_bf16<V>(a.out[k] + at, y[k]);
}

template <class F>
__global__ void __launch_bounds__(kThreads) map_kernel(MapArgs<F> a, F f) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  const std::int64_t first = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::int64_t vectors = a.n / kVec;
  for (std::int64_t v = first; v < vectors; v += stride) map_at<F, kVec>(a, f, v * kVec);
  for (std::int64_t i = vectors * kVec + first; i < a.n; i += stride) map_at<F, 1>(a, f, i);
}

// Launches map_kernel<F> over a.n elements (nothing for n = 0); `kernel` names it in errors.
template <class F>
void map_elements(std::string_view kernel, const MapArgs<F>& a, const F& f = F{}) {
  if (a.n == 0) return;
  map_kernel<F><<<grid_for((a.n + kVec - 1) / kVec, kThreads), kThreads>>>(a, f);
  check_launch(kernel);
}

// One direction of a pointwise op: uploads `inputs` (validated bf16 tensors of one shape),
// runs F over them inside launch_region(`region`) and returns the outputs, named `outputs`,
// in that shape.
template <class F>
ws1::Tensors run_map(std::string_view region, std::string_view kernel,
                     const std::array<const ws1::Tensor*, F::kIn>& inputs,
                     const std::array<std::string_view, F::kOut>& outputs) {
  const ws1::Shape& shape = inputs[0]->shape();
  MapArgs<F> a;
  a.n = ws1::numel(shape);
  std::array<DeviceArray<__nv_bfloat16>, F::kIn> in;
  std::array<DeviceArray<__nv_bfloat16>, F::kOut> out;
  for (int k = 0; k < F::kIn; ++k) {
    in[k] = upload_bf16(*inputs[k]);
    a.in[k] = in[k].get();
  }
  for (int k = 0; k < F::kOut; ++k) {
    out[k] = poisoned<__nv_bfloat16>(static_cast<std::size_t>(a.n));
    a.out[k] = out[k].get();
  }
  launch_region(region, [&] { map_elements(kernel, a); });
  ws1::Tensors result;
  for (int k = 0; k < F::kOut; ++k)
    result.push_back({std::string(outputs[k]), download_bf16(out[k], shape)});
  return result;
}

// ---- gather_rows -------------------------------------------------------------------------
// Unit: uint4 (8 bf16) when the row width is a multiple of 8, else std::uint16_t (one bf16).
template <class Unit>
__global__ void __launch_bounds__(kThreads)
    gather_rows_kernel(Unit* dst, const Unit* src, const std::int64_t* map, std::int64_t rows,
                       std::int64_t units_per_row) {
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  const std::int64_t items = rows * units_per_row;
  for (std::int64_t item = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; item < items;
       item += stride) {
    const std::int64_t row = item / units_per_row;
    const std::int64_t from = map[row];
    dst[item] = from < 0 ? Unit{} : src[from * units_per_row + (item - row * units_per_row)];
  }
}

inline constexpr std::string_view kGatherRowsKernel = "gather_rows_kernel";

// dst [rows, width] from src rows by `map` (device, `rows` entries; map[k] < 0: a +0 row). The
// caller has checked every map[k] against src's row count.
inline void gather_rows(__nv_bfloat16* dst, const __nv_bfloat16* src, const std::int64_t* map,
                        std::int64_t rows, std::int64_t width) {
  if (rows == 0 || width == 0) return;
  if (width % kVec == 0) {
    const std::int64_t units = width / kVec;
    gather_rows_kernel<uint4><<<grid_for(rows * units, kThreads), kThreads>>>(
        reinterpret_cast<uint4*>(dst), reinterpret_cast<const uint4*>(src), map, rows, units);
  } else {
    gather_rows_kernel<std::uint16_t><<<grid_for(rows * width, kThreads), kThreads>>>(
        reinterpret_cast<std::uint16_t*>(dst), reinterpret_cast<const std::uint16_t*>(src), map,
        rows, width);
  }
  check_launch(kGatherRowsKernel);
}

}  // namespace ws1cuda::elementwise

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "ws1cuda/bench.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/launch_region.cuh"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

struct Timer {
  BenchSettings settings;
  std::vector<RegionTiming> regions;
  DeviceArray<unsigned char> flush;  // 2x L2, written before each timed run
  cudaEvent_t start = nullptr, stop = nullptr;
};

thread_local Timer* active = nullptr;

RegionTiming& slot(Timer& t, std::string_view name) {
  for (auto& r : t.regions)
    if (r.region == name) return r;
  t.regions.push_back(RegionTiming{std::string(name), {}});
  return t.regions.back();
}

double sorted_at(std::vector<float> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  if (q == 0.5) return n % 2 ? v[n / 2] : 0.5 * (static_cast<double>(v[n / 2 - 1]) + v[n / 2]);
  return v[static_cast<std::size_t>(q * static_cast<double>(n - 1))];
}

// Times `reps` runs of fn (after `warmup` untimed ones) with events around fn only.
template <class F>
std::vector<float> time_runs(const BenchSettings& s, DeviceArray<unsigned char>* flush,
                             cudaEvent_t start, cudaEvent_t stop, F&& fn) {
  for (int i = 0; i < s.warmup; ++i) fn();
  std::vector<float> ms;
  for (int i = 0; i < s.reps; ++i) {
    if (flush != nullptr && flush->size() > 0) WS1_CUDA(cudaMemsetAsync(flush->get(), i & 0xFF, flush->bytes()));
    WS1_CUDA(cudaEventRecord(start));
    fn();
    WS1_CUDA(cudaEventRecord(stop));
    WS1_CUDA(cudaEventSynchronize(stop));
    float t = 0.0f;
    WS1_CUDA(cudaEventElapsedTime(&t, start, stop));
    ms.push_back(t);
  }
  return ms;
}

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    WS1_CUDA(cudaEventCreate(&start));
    WS1_CUDA(cudaEventCreate(&stop));
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

// Standard normal bf16 values from a counter hash (splitmix64 finalizer) and Box-Muller:
// deterministic for a seed, no library needed.
__device__ __forceinline__ unsigned long long mix64(unsigned long long x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

__global__ void fill_normal_bf16_kernel(bf16* p, std::size_t n, unsigned long long seed) {
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const unsigned long long h = mix64(seed * 0x9E3779B97F4A7C15ULL + i);
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
    const float u2 = static_cast<float>((h >> 16) & 0xFFFFFFu) * (1.0f / 16777216.0f);
    p[i] = __float2bfloat16_rn(sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2));
  }
}

void fill_normal_bf16(bf16* p, std::size_t n, unsigned long long seed) {
  if (n == 0) return;
  const std::size_t blocks = std::min<std::size_t>((n + 255) / 256, 4096);
  fill_normal_bf16_kernel<<<static_cast<unsigned>(blocks), 256>>>(p, n, seed);
  WS1_CUDA(cudaGetLastError());
}

DeviceArray<unsigned char> l2_flush_buffer() {
  int device = 0, l2 = 0;
  WS1_CUDA(cudaGetDevice(&device));
  WS1_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  return DeviceArray<unsigned char>(2 * static_cast<std::size_t>(l2));
}

}  // namespace

double RegionTiming::median_ms() const { return sorted_at(ms, 0.5); }
double RegionTiming::min_ms() const { return sorted_at(ms, 0.0); }
double RegionTiming::max_ms() const { return sorted_at(ms, 1.0); }

void run_region(std::string_view name, void (*fn)(void*), void* ctx) {
  Timer* t = active;
  if (t == nullptr) {
    fn(ctx);
    return;
  }
  active = nullptr;  // a region inside a region runs plainly
  try {
    Events ev;
    slot(*t, name).ms = time_runs(t->settings, t->settings.flush_l2 ? &t->flush : nullptr, ev.start,
                                  ev.stop, [&] { fn(ctx); });
    fn(ctx);
  } catch (...) {
    active = t;
    throw;
  }
  active = t;
}

BenchScope::BenchScope(BenchSettings settings) {
  auto* t = new Timer{settings, {}, {}};
  if (settings.flush_l2) t->flush = l2_flush_buffer();
  active = t;
}

BenchScope::~BenchScope() {
  delete active;
  active = nullptr;
}

std::vector<RegionTiming> BenchScope::take() {
  std::vector<RegionTiming> out;
  if (active != nullptr) out.swap(active->regions);
  return out;
}

Ceiling measure_copy_bandwidth(std::size_t bytes, const BenchSettings& s) {
  Ceiling c;
  try {
    DeviceArray<unsigned char> a(bytes), b(bytes);
    WS1_CUDA(cudaMemset(a.get(), 0x5A, bytes));
    Events ev;
    RegionTiming r{"copy", time_runs(s, nullptr, ev.start, ev.stop, [&] {
                     WS1_CUDA(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
                   })};
    c.median_ms = r.median_ms();
    c.value = 2.0 * static_cast<double>(bytes) / (c.median_ms * 1e-3) / 1e12;
  } catch (const ws1::ops::DeviceError& e) {
    c.error = e.error.message();
  }
  return c;
}

Ceiling measure_cublas_bf16_gemm(int m, int n, int k, const BenchSettings& s) {
  Ceiling c;
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    c.error = "cublasCreate failed";
    return c;
  }
  try {
    const std::size_t mk = static_cast<std::size_t>(m) * k, kn = static_cast<std::size_t>(k) * n,
                      mn = static_cast<std::size_t>(m) * n;
    DeviceArray<bf16> a(mk), b(kn), out(mn);
    // Random normal inputs, a fixed seed per operand, drawn once per shape (METHOD: never time
    // on zeros or constants; cuBLAS runs faster on such data than on real data).
    fill_normal_bf16(a.get(), mk, 0x5EED0001u);
    fill_normal_bf16(b.get(), kn, 0x5EED0002u);
    WS1_CUDA(cudaDeviceSynchronize());
    const float alpha = 1.0f, beta = 0.0f;
    Events ev;
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    // Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ.
    RegionTiming r{"gemm", time_runs(s, nullptr, ev.start, ev.stop, [&] {
                     status = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b.get(), CUDA_R_16BF, n,
                                           a.get(), CUDA_R_16BF, k, &beta, out.get(), CUDA_R_16BF, n,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                   })};
    if (status != CUBLAS_STATUS_SUCCESS) {
      c.error = std::string("cublasGemmEx: ") + cublasGetStatusString(status);
    } else {
      c.median_ms = r.median_ms();
      c.value = 2.0 * m * static_cast<double>(n) * k / (c.median_ms * 1e-3) / 1e12;
    }
  } catch (const ws1::ops::DeviceError& e) {
    c.error = e.error.message();
  }
  cublasDestroy(h);
  return c;
}

}  // namespace ws1cuda

// det_gemm at decode sizes against cuBLAS, by declared shard count, beside a pure TMA stream of
// B's column strips (no A, no wgmma): where the decode kernel's time goes (docs/log/performance.md,
// "det_gemm decode"). A standalone probe, not part of the build; on the GPU machine:
//   nvcc -std=c++20 -O3 -gencode arch=compute_90a,code=sm_90a -o det_gemm_decode_probe \
//        tools/device/det_gemm_decode_probe.cu -lcublas -lcuda
//   ./det_gemm_decode_probe          # medians of 30 runs, L2 flushed (a 1 GiB write) before each
//   ncu --clock-control none ./det_gemm_decode_probe prof   # one launch each of down at M = 8
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cublas_v2.h>
#include "../../cuda/ops/det_gemm_wgmma.cuh"
using namespace ws1cuda::detgemm;
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("ERR %s: %s\n", #x, cudaGetErrorString(e_)); exit(1);} } while (0)

__global__ void fill(bf16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed; h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65536.0f - 0.5f) * 0.1f);
  }
}
__global__ void flush_k(int* p, size_t n) { for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (int)i; }

// Pure stream: CTA u reads a strip of `w` columns (64*q) x rows [r0, r0+len) of b [K][N] through TMA boxes {64, 64} into a ring, consumer releases at once.
__global__ void __launch_bounds__(256, 1) stream_k(const __grid_constant__ CUtensorMap mb, int N, int K, int shards, int w, int stages, unsigned* sink) {
  extern __shared__ unsigned char raw[];
  unsigned char* smem = (unsigned char*)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023);
  const int stage_bytes = w * 64 * 2;
  uint64_t* bars = (uint64_t*)(smem + stages * stage_bytes);
  const uint32_t full0 = smem_u32(bars), empty0 = smem_u32(bars + stages);
  if (threadIdx.x == 0) { for (int s = 0; s < stages; ++s) { mbar_init(full0 + 8 * s, 1); mbar_init(empty0 + 8 * s, 1); }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
  __syncthreads();
  const int tn = N / w, units = tn * shards;
  if (threadIdx.x == 0) {
    int it = 0;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const int t = u / shards, r = u % shards, n0 = t * w, ks = r * (K / shards), ke = ks + K / shards;
      for (int k = ks; k < ke; k += 64, ++it) {
        const int s = it % stages; mbar_wait(empty0 + 8 * s, ((it / stages) & 1) ^ 1);
        mbar_expect_tx(full0 + 8 * s, stage_bytes);
        for (int q = 0; q < w / 64; ++q) tma_load_2d(smem_u32(smem + s * stage_bytes + q * 8192), &mb, full0 + 8 * s, n0 + 64 * q, k);
      }
    }
  } else if (threadIdx.x == 128) {
    int it = 0; unsigned acc = 0;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const int r = u % shards, ks = r * (K / shards), ke = ks + K / shards;
      for (int k = ks; k < ke; k += 64, ++it) {
        const int s = it % stages; mbar_wait(full0 + 8 * s, (it / stages) & 1);
        acc += smem[s * stage_bytes + (it & 1023)];
        mbar_arrive(empty0 + 8 * s);
      }
    }
    if (acc == 0xdeadbeef) *sink = acc;
  }
}

int main(int argc, char** argv) {
  const bool prof = argc > 1;  // one launch each of down M=8 (ours t=2, t=4) and cuBLAS, for ncu
  const int reps = prof ? 1 : 30;
  cublasHandle_t h; cublasCreate(&h);
  size_t flush_n = 256u << 20; int* fl; CK(cudaMalloc(&fl, flush_n * 4));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  struct S { const char* name; int K, N; } shapes[] = {{"q/o", 4096, 4096}, {"gate/up", 4096, 12288}, {"down", 12288, 4096}};
  const int Ms[] = {1, 8, 64};
  float* scratch; CK(cudaMalloc(&scratch, 512u << 20));
  unsigned* sink; CK(cudaMalloc(&sink, 4));
  for (auto& sh : shapes) {
    if (prof && sh.K != 12288) continue;
    bf16 *a, *b, *c, *c2; int K = sh.K, N = sh.N;
    CK(cudaMalloc(&a, 64 * (size_t)K * 2)); CK(cudaMalloc(&b, (size_t)K * N * 2)); CK(cudaMalloc(&c, 64 * (size_t)N * 2)); CK(cudaMalloc(&c2, 64 * (size_t)N * 2));
    fill<<<1024, 256>>>(a, 64 * (size_t)K, 1); fill<<<1024, 256>>>(b, (size_t)K * N, 2); CK(cudaDeviceSynchronize());
    auto timeit = [&](auto&& f) {
      if (prof) { f(); CK(cudaDeviceSynchronize()); return 1.0f; }
      for (int i = 0; i < 3; ++i) f();
      std::vector<float> ts;
      for (int i = 0; i < reps; ++i) { flush_k<<<1024, 256>>>(fl, flush_n); cudaEventRecord(e0); f(); cudaEventRecord(e1); cudaEventSynchronize(e1); float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms * 1000); }
      CK(cudaGetLastError()); std::sort(ts.begin(), ts.end()); return ts[ts.size() / 2];
    };
    for (int M : Ms) {
      if (prof && M != 8) continue;
      const float one = 1, zero = 0;
      auto cub = [&] { cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, CUDA_R_16BF, N, a, CUDA_R_16BF, K, &zero, c2, CUDA_R_16BF, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT); };
      float tc = timeit(cub);
      printf("%-8s M=%-3d cublas %7.1f us  (%.2f TB/s)\n", sh.name, M, tc, (double)K * N * 2 / tc / 1e6);
      for (int t : {2, 4, 8}) for (int split : {-1}) {
        if (prof && t == 8) continue;
        Problem q = product(a, K, Major::kK, b, N, Major::kMN, M, N, K, 0, K, t, c, N, false);
        q.scratch = scratch; q.split = split;
        if (scratch_floats(q) * 4 > (512u << 20)) { printf("scratch too big\n"); continue; }
        CK(cudaMemset(scratch, 0, 64u << 20));
        auto ours = [&] { Status s = launch_product(q); if (!s) { printf("launch %s\n", s.what); exit(1);} };
        float to = timeit(ours);
        printf("%-8s M=%-3d ours t=%d split=%2d bn=%3d splitapplies=%d %7.1f us  x cublas %.2f\n", sh.name, M, t, split, bn_for(q), (int)split_applies(q), to, tc / to);
      }
    }
    if (prof) continue;
    // pure TMA stream over b
    for (int w : {64, 128, 256}) for (int t : {1, 2, 4, 8}) for (int stages : {4, 8}) {
      if (w * 64 * 2 * stages > 200000) continue;
      CUtensorMap mb; Status s = make_map(mb, b, N, K, N, 64, 64); if (!s) { printf("map\n"); exit(1); }
      const int smem = w * 128 * stages + 2048;
      CK(cudaFuncSetAttribute(stream_k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      const int units = N / w * t, grid = units < sm_count() ? units : sm_count();
      float ts = timeit([&] { stream_k<<<grid, 256, smem>>>(mb, N, K, t, w, stages, sink); });
      printf("%-8s stream w=%3d shards=%d stages=%d units=%4d %7.1f us  %.2f TB/s\n", sh.name, w, t, stages, units, ts, (double)K * N * 2 / ts / 1e6);
    }
    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(c2);
  }
  printf("done\n");
}

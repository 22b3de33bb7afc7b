// lm_head backward's dhidden product (dhidden[T,H] = dy[T,V] · W[V,H], K = V = 151936) at the
// bench-8k shape against cuBLAS, by tile width, shard rule and row stride of A: where the
// kernel's time goes (docs/log/performance.md, "lm_head dhidden"). A standalone probe, not part
// of the build; on the GPU machine:
//   nvcc -std=c++20 -O3 -gencode arch=compute_90a,code=sm_90a -o lm_head_dhidden_probe \
//        tools/device/lm_head_dhidden_probe.cu -lcublas -lcuda
//   ./lm_head_dhidden_probe        # medians of REPS (default 7) runs, L2 flushed before each
// Rows: cublas; n128 (the shard total in registers) and n256 (the total in global scratch)
// under today's rule (shards of kPromoteK = 512), with shards of 2048, and with no shards
// (one accumulator over all K: not the declared rule, a bound on what the shards cost); then
// K = 16384 with A's rows V apart (a slice of dy) and packed (lda = K): what the long row
// stride costs. Each row of the declared rule is compared bit for bit with n128's output.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "../../cuda/ops/det_gemm_wgmma.cuh"
using namespace ws1cuda::detgemm;

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      std::printf("ERR %s: %s\n", #x, cudaGetErrorString(e_));                 \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)
#define ST(x)                                                                  \
  do {                                                                         \
    Status s_ = (x);                                                           \
    if (!s_) {                                                                 \
      std::printf("ERR %s: %s %s\n", #x, s_.what, cudaGetErrorString(s_.error)); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void fill(bf16* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    p[i] = __float2bfloat16(((h & 0xffff) / 65536.0f - 0.5f) * 0.1f);
  }
}
__global__ void flush_k(int* p, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) p[i] = (int)i;
}

int main() {
  const int T = 8192, H = 4096, V = 151936;
  const int reps = std::getenv("REPS") ? std::atoi(std::getenv("REPS")) : 7;
  bf16 *dy, *w, *c0, *c1;
  CK(cudaMalloc(&dy, (size_t)T * V * 2));
  CK(cudaMalloc(&w, (size_t)V * H * 2));
  CK(cudaMalloc(&c0, (size_t)T * H * 2));
  CK(cudaMalloc(&c1, (size_t)T * H * 2));
  fill<<<4096, 256>>>(dy, (size_t)T * V, 1);
  fill<<<4096, 256>>>(w, (size_t)V * H, 2);
  CK(cudaGetLastError());
  float* scratch;
  const size_t scratch_n = (size_t)sm_count() * kBM * 256;
  CK(cudaMalloc(&scratch, scratch_n * 4));
  int* fl;
  const size_t flush_n = 64u << 20;  // 256 MB written: the 60 MB L2 holds none of the operands
  CK(cudaMalloc(&fl, flush_n * 4));
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  auto time = [&](const std::function<void()>& f) {
    f();
    CK(cudaDeviceSynchronize());
    std::vector<float> ts;
    for (int i = 0; i < reps; ++i) {
      flush_k<<<1024, 256>>>(fl, flush_n);
      CK(cudaEventRecord(e0));
      f();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    return ts[ts.size() / 2];
  };
  const float one = 1, zero = 0;
  auto cublas = [&](int K, int lda) {  // row-major C[T][H] = A[T][K] (stride lda) · B[K][H]
    return [=, &h] {
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, H, T, K, &one, w, CUDA_R_16BF, H, dy, CUDA_R_16BF, lda, &zero, c1,
                   CUDA_R_16BF, H, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    };
  };
  auto problem = [&](int K, int lda, int shard_len, bf16* c) {
    Problem q = product(dy, lda, Major::kK, w, H, Major::kMN, T, H, K, 0, K, 1, c, H, false);
    if (shard_len > 0) {
      q.shard_len = shard_len;
      q.shards = (K + shard_len - 1) / shard_len;
    }
    q.split = 0;
    q.scratch = scratch;
    return q;
  };
  auto flops = [&](int K) { return 2.0 * T * H * K; };
  auto row = [&](const char* name, int K, float ms, float cub) {
    std::printf("%-34s K=%-6d %8.3f ms  %6.1f TFLOP/s  x cublas %.2f\n", name, K, ms, flops(K) / ms / 1e9, cub / ms);
  };
  std::vector<unsigned short> ref((size_t)T * H), got((size_t)T * H);
  auto same_as_ref = [&](bf16* c) {
    CK(cudaMemcpy(got.data(), c, got.size() * 2, cudaMemcpyDeviceToHost));
    return std::memcmp(got.data(), ref.data(), got.size() * 2) == 0;
  };

  const float cub = time(cublas(V, V));
  row("cublas", V, cub, cub);
  const Problem base = problem(V, V, kPromoteK, c0);
  const float t128 = time([&] { ST(launch_wgmma_with<128>(base)); });
  row("n128 shards 512 (today)", V, t128, cub);
  CK(cudaMemcpy(ref.data(), c0, ref.size() * 2, cudaMemcpyDeviceToHost));
  const Problem q256 = problem(V, V, kPromoteK, c1);
  const float t256 = time([&] { ST(launch_wgmma_with<256>(q256)); });
  row("n256 shards 512 (total in scratch)", V, t256, cub);
  std::printf("  bits equal to n128: %s\n", same_as_ref(c1) ? "yes" : "NO");
  for (int bn : {128, 256}) {
    for (int len : {2048, 0}) {
      const Problem q = problem(V, V, len, c1);
      const float t = time([&] { ST(bn == 128 ? launch_wgmma_with<128>(q) : launch_wgmma_with<256>(q)); });
      char name[64];
      std::snprintf(name, sizeof name, "n%d %s", bn, len ? "shards 2048" : "no shards (one sum)");
      row(name, V, t, cub);
    }
  }
  const int K = 16384;
  for (int lda : {V, K}) {
    const float tc = time(cublas(K, lda));
    char name[64];
    std::snprintf(name, sizeof name, "cublas lda %d", lda);
    row(name, K, tc, tc);
    const Problem q = problem(K, lda, 0, c1);
    const float t = time([&] { ST(launch_wgmma_with<128>(q)); });
    std::snprintf(name, sizeof name, "n128 one sum, lda %d", lda);
    row(name, K, t, tc);
  }
  CK(cudaDeviceSynchronize());
  return 0;
}

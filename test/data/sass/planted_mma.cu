// Source of planted_mma.sm_90a.sass, the SASS listing test/audit/tf32_test.cpp scans: three
// kernels with tensor-core MMAs, two of them TF32. Not part of the build. Produced on the H200
// machine (nvcc 13.0):
//   nvcc -c -gencode arch=compute_90a,code=sm_90a planted_mma.cu -o planted_mma.o
//   cuobjdump -sass planted_mma.o > planted_mma.sm_90a.sass
#include <cuda_bf16.h>
#include <mma.h>

using namespace nvcuda;

// mma.sync / wmma with TF32 operands (HMMA ... .TF32).
__global__ void tf32_wmma(const float* a, const float* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 8);
  wmma::load_matrix_sync(fb, b, 8);
  for (int i = 0; i < fa.num_elements; i++) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
  for (int i = 0; i < fb.num_elements; i++) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

// The same with BF16 operands and FP32 accumulation: not TF32.
__global__ void bf16_wmma(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}

// sm_90a warpgroup MMA with TF32 operands (HGMMA ... .TF32).
__global__ void tf32_wgmma(unsigned long long desc_a, unsigned long long desc_b, float* c) {
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile(
      "wgmma.fence.sync.aligned;\n"
      "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32 {%0, %1, %2, %3}, %4, %5, 1, 1, 1;\n"
      "wgmma.commit_group.sync.aligned;\n"
      "wgmma.wait_group.sync.aligned 0;\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "l"(desc_a), "l"(desc_b));
  c[threadIdx.x * 4 + 0] = d0;
  c[threadIdx.x * 4 + 1] = d1;
  c[threadIdx.x * 4 + 2] = d2;
  c[threadIdx.x * 4 + 3] = d3;
}

// Device helpers shared by the cuda_fp32 references: bf16 host tensors widened exactly to FP32
// on the device, FP32 GEMMs on row-major arrays (cuBLAS per K slice, a tree over the slices),
// and cuBLAS status checks.
#pragma once

#include <cublas_v2.h>

#include <string_view>

#include "ws1/tensor.hpp"
#include "ws1cuda/device_array.cuh"

namespace ws1cuda::reference {

// A bf16 host tensor on the device as FP32 (row-major, contiguous).
DeviceArray<float> widened(const ws1::Tensor& t);

// Throws ws1::ops::DeviceError (an environment error) unless s is CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t s, const char* what);

// Row-major C[M,N] = op(A)·op(B): op(A) is [M,K] (A stored [M,K], or [K,M] when ta), op(B) is
// [K,N] (B stored [K,N], or [N,K] when tb). FP32 in, FP32 out, on the handle's math mode: cuBLAS
// products of 32-long K slices, their partials added in a pairwise tree (the error of a sum over
// a long K grows with the tree's depth, not with K).
DeviceArray<float> gemm(cublasHandle_t h, const DeviceArray<float>& a, bool ta, const DeviceArray<float>& b,
                        bool tb, int M, int N, int K);

// v as a cuBLAS extent (int); refuses (OpInputError naming op and tensor) when it does not fit.
int extent(std::int64_t v, std::string_view op, const char* name);

}  // namespace ws1cuda::reference

#include <cublas_api.h>
#include <cuda_runtime.h>

#include "ws1cuda/device_info.hpp"

namespace ws1cuda {

DeviceInfo query_device() {
  DeviceInfo info;
  info.compiled_arch = "compute_90,sm_90";
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  // cuBLAS version as MAJOR*10000 + MINOR*100 + PATCH, read without creating a handle.
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    info.cublas_version = major * 10000 + minor * 100 + patch;
  cudaError_t err = cudaGetDeviceCount(&info.device_count);
  if (err != cudaSuccess || info.device_count == 0) {
    // Without any NVIDIA driver the runtime answers "driver version is insufficient": say what
    // that means on a machine with no GPU, and keep the runtime's words beside it.
    const std::string runtime = err != cudaSuccess ? std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err) : "";
    if (err == cudaErrorInsufficientDriver && info.driver_version == 0)
      info.error = "no NVIDIA driver is installed (the CUDA runtime reports " + std::string(cudaGetErrorName(err)) + ")";
    else if (err == cudaErrorNoDevice || err == cudaSuccess)
      info.error = "the driver sees no CUDA device" + (runtime.empty() ? "" : " (" + runtime + ")");
    else
      info.error = runtime;
    info.device_count = 0;
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return info;
  }
  cudaDeviceProp prop{};
  err = cudaGetDeviceProperties(&prop, 0);
  if (err != cudaSuccess) {
    info.error = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    return info;
  }
  info.present = true;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.global_memory_bytes = static_cast<long long>(prop.totalGlobalMem);
  info.l2_cache_bytes = prop.l2CacheSize;
  return info;
}

}  // namespace ws1cuda

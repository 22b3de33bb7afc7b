// What the CUDA runtime reports about the machine. Plain C++: included by host code that
// is compiled without nvcc.
#pragma once

#include <string>

namespace ws1cuda {

struct DeviceInfo {
  bool present = false;        // a usable device was found
  std::string error;           // why not, when !present (CUDA error name and text)
  int device_count = 0;
  int index = 0;
  std::string name;            // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  long long global_memory_bytes = 0;
  int l2_cache_bytes = 0;
  int driver_version = 0;      // cudaDriverGetVersion, e.g. 13000
  int runtime_version = 0;     // cudaRuntimeGetVersion
  int cublas_version = 0;      // MAJOR*10000 + MINOR*100 + PATCH
  std::string compiled_arch;   // the -gencode the library was built with
};

// Queries device 0. Never throws; a missing device is reported in `error`.
DeviceInfo query_device();

}  // namespace ws1cuda

namespace ws1cuda {

// The math mode a cuBLAS handle reports after ws1check asks for pedantic FP32 (DESIGN §3.6),
// read back with cublasGetMathMode: "CUBLAS_PEDANTIC_MATH" when honoured. On failure returns
// false and says why in `error`.
struct MathModeReadback {
  std::string mode;   // e.g. "CUBLAS_PEDANTIC_MATH"
  bool tf32 = false;  // the handle is in CUBLAS_TF32_TENSOR_OP_MATH
};
bool read_pedantic_math_mode(MathModeReadback& out, std::string& error);

}  // namespace ws1cuda

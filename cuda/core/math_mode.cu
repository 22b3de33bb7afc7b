#include <cublas_v2.h>

#include <string>

#include "ws1cuda/device_info.hpp"

namespace ws1cuda {
namespace {

std::string mode_name(cublasMath_t mode) {
  const int base = static_cast<int>(mode) & ~static_cast<int>(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  std::string name;
  switch (base) {
    case CUBLAS_DEFAULT_MATH: name = "CUBLAS_DEFAULT_MATH"; break;
    case CUBLAS_PEDANTIC_MATH: name = "CUBLAS_PEDANTIC_MATH"; break;
    case CUBLAS_TF32_TENSOR_OP_MATH: name = "CUBLAS_TF32_TENSOR_OP_MATH"; break;
    default: name = "CUBLAS_MATH_" + std::to_string(base); break;
  }
  if (static_cast<int>(mode) & CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
    name += "|CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION";
  return name;
}

}  // namespace

bool read_pedantic_math_mode(MathModeReadback& out, std::string& error) {
  cublasHandle_t handle = nullptr;
  cublasStatus_t st = cublasCreate(&handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    error = std::string("cublasCreate: ") + cublasGetStatusString(st);
    return false;
  }
  cublasMath_t mode{};
  st = cublasSetMathMode(handle, CUBLAS_PEDANTIC_MATH);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasGetMathMode(handle, &mode);
  cublasDestroy(handle);
  if (st != CUBLAS_STATUS_SUCCESS) {
    error = std::string("cublas math mode: ") + cublasGetStatusString(st);
    return false;
  }
  out.mode = mode_name(mode);
  // The mode is an enumeration plus one flag bit, not a bit set: TF32 is exactly the TF32 mode.
  const int base = static_cast<int>(mode) & ~static_cast<int>(CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
  out.tf32 = base == CUBLAS_TF32_TENSOR_OP_MATH;
  return true;
}

}  // namespace ws1cuda

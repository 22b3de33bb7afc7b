#include "gpu_environment.hpp"

#include "ws1_build_config.h"
#if WS1_HAVE_CUDA
#include "ws1cuda/device_info.hpp"
#endif

namespace ws1cli {

bool fill_gpu_environment(ws1::Environment& env) {
#if WS1_HAVE_CUDA
  const ws1cuda::DeviceInfo d = ws1cuda::query_device();
  if (!d.present) {
    env.gpu.reset();
    env.gpu_absent_reason = "no GPU found: " + d.error;
    env.backend = "cpu_bf16";
    return false;
  }
  ws1::GpuEnvironment g;
  g.name = d.name;
  g.compute_capability = std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor);
  g.sm_count = d.sm_count;
  g.memory_bytes = d.global_memory_bytes;
  g.l2_cache_bytes = d.l2_cache_bytes;
  g.driver_version = ws1::cuda_version_string(d.driver_version);
  g.cuda_runtime_version = ws1::cuda_version_string(d.runtime_version);
  g.cublas_version = ws1::cublas_version_string(d.cublas_version);
  ws1cuda::MathModeReadback mode;
  std::string error;
  if (ws1cuda::read_pedantic_math_mode(mode, error)) {
    g.cublas_math_mode = mode.mode;
    g.tf32_enabled = mode.tf32;
  } else {
    g.cublas_math_mode = "unreadable: " + error;
  }
  env.gpu = g;
  env.gpu_absent_reason.clear();
  env.backend = "cuda_bf16";
  return true;
#else
  env.gpu.reset();
  env.gpu_absent_reason = "built without CUDA";
  env.backend = "cpu_bf16";
  return false;
#endif
}

}  // namespace ws1cli

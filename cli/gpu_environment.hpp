// Fills the environment's GPU fields from the CUDA library (when built with it).
#pragma once

#include "ws1/environment.hpp"

namespace ws1cli {

// Queries the device; sets env.gpu, env.backend ("cuda_bf16" when a device answers) or
// env.gpu_absent_reason. Returns whether a device is present.
bool fill_gpu_environment(ws1::Environment& env);

}  // namespace ws1cli

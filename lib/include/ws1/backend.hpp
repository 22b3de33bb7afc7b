// A backend runs the candidate kernels of the ops (cpu_bf16, cuda_bf16, external processes).
// The judges and the FP32 references do not depend on it.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ws1/error.hpp"
#include "ws1/evidence.hpp"
#include "ws1/op.hpp"

namespace ws1 {

class ReferenceEngine;  // ws1/reference.hpp

class Backend {
 public:
  virtual ~Backend() = default;
  // The profile name it answers to: "cpu_bf16", "cuda_bf16", ...
  virtual std::string name() const = 0;
  // The kernel that ran, with the build it came from (evidence §10: "underlying kernel ID").
  virtual std::string kernel_id(const Op& op, Direction direction) const = 0;
  virtual Result<Tensors> forward(const Op& op, const Tensors& in, const OpContext& ctx) = 0;
  virtual Result<Tensors> backward(const Op& op, const Tensors& in, const OpContext& ctx) = 0;
  // Whether it has a kernel for op in that direction (an external worker may serve a few ops).
  virtual bool serves(const Op& op, Direction direction) const {
    (void)op;
    (void)direction;
    return true;
  }
  // Whether its kernels receive an input's strided view as such (the layout transform's
  // premise). An external worker gets contiguous copies: ws1-exec-v1 carries no strides.
  virtual bool receives_views() const { return true; }
  // Precision state read back on this backend's path (TF32, cuBLAS math mode).
  virtual RuntimeReadback readback() const { return {}; }

  // A promise that `tensors` (weights used by many calls) keep their contents until
  // release_resident: a device backend may keep copies on its device and use them for any input
  // that is the same view of the same storage. Calls pair up; by default nothing happens.
  virtual void keep_resident(std::span<const Tensor> tensors) { (void)tensors; }
  virtual void release_resident(std::span<const Tensor> tensors) { (void)tensors; }
};

// The CPU candidates of lib/ops (the same algorithms and declared reduction orders as the
// GPU kernels), usable on any machine.
std::unique_ptr<Backend> make_cpu_bf16_backend();

// The backend named `name`: a registered one (below), cpu_bf16, `exec:COMMAND` or the
// triton_cuda_bf16 worker. Unknown or unavailable names are errors naming the option.
Result<std::unique_ptr<Backend>> make_backend(std::string_view name);

// ---- the registry: every backend and reference engine a build offers, in one place ----
// lib/ offers cpu_bf16, exec:COMMAND, triton_cuda_bf16 and the CPU reference; a CUDA build
// registers its own (ws1cuda::register_engines(): cuda_bf16, cuda_fp32) before anything is
// opened. Registering a name again replaces the entry.

struct BackendEntry {
  std::string name;
  bool needs_gpu = false;
  bool default_with_gpu = false;  // the backend a run on a machine with a GPU gets unasked
  std::function<Result<std::unique_ptr<Backend>>()> make;
};
struct ReferenceEntry {
  std::string name;
  bool needs_gpu = false;
  std::function<Result<std::unique_ptr<ReferenceEngine>>()> make;
};
void register_backend(BackendEntry entry);
void register_reference(ReferenceEntry entry);

// --backend: `name`, or "" for the default (the registered default_with_gpu backend when a GPU
// is present, else cpu_bf16, said on the log). A backend that needs a GPU without one is exit 3.
Result<std::unique_ptr<Backend>> open_backend(std::string_view name, bool gpu_present);
// --reference: "" or "cpu" -> nullptr (each op's CPU reference, lib/ref); a registered engine;
// "cuda_fp32" in a build without CUDA is exit 3; any other name is bad input.
Result<std::unique_ptr<ReferenceEngine>> open_reference(std::string_view name, bool gpu_present);

}  // namespace ws1

// A backend runs the candidate kernels of the ops (cpu_bf16 here; cuda_bf16 and external
// processes later). The judges and the FP32 references do not depend on it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ws1/error.hpp"
#include "ws1/evidence.hpp"
#include "ws1/op.hpp"

namespace ws1 {

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

// The backend named `name` ("cpu_bf16"; others as they are built). Unknown or unavailable
// names are errors naming the option.
Result<std::unique_ptr<Backend>> make_backend(std::string_view name);

}  // namespace ws1

// cuda_bf16: each op's host function from cuda/ops (inputs up, kernels, outputs down). An op
// without a cuda_bf16 implementation is a red cell with that reason, never a fallback to the
// CPU.
#include <fmt/format.h>

#include "ws1/build_info.hpp"
#include "ws1cuda/cuda_backend.hpp"
#include "ws1cuda/cuda_reference.hpp"
#include "ws1cuda/cuda_op.hpp"
#include "ws1cuda/device_info.hpp"
#include "ws1cuda/device_judge.hpp"
#include "ws1cuda/resident.hpp"

namespace ws1cuda {
namespace {

class CudaBf16 final : public ws1::Backend {
 public:
  explicit CudaBf16(DeviceInfo device) : device_(std::move(device)) {}

  std::string name() const override { return "cuda_bf16"; }

  std::string kernel_id(const ws1::Op& op, ws1::Direction d) const override {
    const auto& b = ws1::build_info();
    const CudaOp* c = find_cuda_op(op.name());
    const std::string_view kernels =
        c == nullptr ? "none" : (d == ws1::Direction::kForward ? c->forward_kernels : c->backward_kernels);
    return fmt::format("ws1.cuda_bf16.{}.{}[{}]@{}{} {}", op.name(), ws1::direction_name(d), kernels,
                       b.source_commit.substr(0, 12), b.source_state == "dirty" ? "+dirty" : "",
                       device_.compiled_arch);
  }

  ws1::Result<ws1::Tensors> forward(const ws1::Op& op, const ws1::Tensors& in,
                                    const ws1::OpContext& ctx) override {
    const CudaOp* c = find_cuda_op(op.name());
    if (c == nullptr || c->forward == nullptr) return missing(op, "forward");
    return c->forward(in, ctx);
  }

  ws1::Result<ws1::Tensors> backward(const ws1::Op& op, const ws1::Tensors& in,
                                     const ws1::OpContext& ctx) override {
    const CudaOp* c = find_cuda_op(op.name());
    if (c == nullptr || c->backward == nullptr) return missing(op, "backward");
    return c->backward(in, ctx);
  }

  // A weight the device cannot keep is not an error: its uploads copy per call (and a lack of
  // memory there is the op's error); the reason goes to the log.
  void keep_resident(std::span<const ws1::Tensor> tensors) override {
    std::string error;
    if (!ws1cuda::keep_resident(tensors, error))
      fmt::print(stderr, "warning: cuda_bf16: weights not kept on the device ({}); copying per call\n", error);
  }
  void release_resident(std::span<const ws1::Tensor> tensors) override { ws1cuda::release_resident(tensors); }

  ws1::RuntimeReadback readback() const override {
    ws1::RuntimeReadback r;
    MathModeReadback mode;
    std::string error;
    if (read_pedantic_math_mode(mode, error)) {
      r.cublas_math_mode = mode.mode;
      r.tf32_enabled = mode.tf32;
    }
    return r;
  }

 private:
  static ws1::Error missing(const ws1::Op& op, const char* direction) {
    return ws1::environment_error("cuda_bf16",
                                  fmt::format("{} {}: no cuda_bf16 kernel in this build", op.name(), direction));
  }
  DeviceInfo device_;
};

}  // namespace

ws1::Result<std::unique_ptr<ws1::Backend>> make_cuda_bf16_backend() {
  DeviceInfo d = query_device();
  if (!d.present)
    return ws1::Error{"--backend", "cuda_bf16", "needs a CUDA device: " + d.error, ws1::ExitCode::kEnvironment};
  install_device_judge();  // its large outputs stay on the device and are judged there
  return std::unique_ptr<ws1::Backend>(new CudaBf16(std::move(d)));
}

void register_engines() {
  ws1::register_backend({"cuda_bf16", true, true, make_cuda_bf16_backend});
  ws1::register_reference({"cuda_fp32", true, make_cuda_fp32_reference});
}

}  // namespace ws1cuda

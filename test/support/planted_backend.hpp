// A backend that is cpu_bf16 (or another base, e.g. cuda_bf16 for the GPU twins) except for one
// op whose forward and/or backward is replaced: the planted defects every judge and probe test
// uses to show it going red.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "ws1/backend.hpp"

namespace ws1::test {

// A replacement kernel; the op is passed so it can call the op's own paths.
using OpKernel = std::function<Result<Tensors>(const Op&, const Tensors&, const OpContext&)>;
// The same without the op (most planted kernels know which op they replace).
using Kernel = std::function<Result<Tensors>(const Tensors&, const OpContext&)>;

class PlantedBackend final : public Backend {
 public:
  PlantedBackend(std::string op, OpKernel fwd, OpKernel bwd = nullptr)
      : op_(std::move(op)), fwd_(std::move(fwd)), bwd_(std::move(bwd)) {}
  PlantedBackend(std::string op, Kernel fwd, Kernel bwd = nullptr)
      : PlantedBackend(std::move(op), drop_op(std::move(fwd)), drop_op(std::move(bwd))) {}
  // On top of `base` (not owned; it must outlive this backend).
  PlantedBackend(Backend& base, std::string op, OpKernel fwd, OpKernel bwd = nullptr)
      : op_(std::move(op)), fwd_(std::move(fwd)), bwd_(std::move(bwd)), base_(&base) {}
  std::string name() const override { return base_->name(); }
  std::string kernel_id(const Op& op, Direction d) const override {
    return base_->kernel_id(op, d) + "+planted-defect";
  }
  Result<Tensors> forward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return op.name() == op_ && fwd_ ? fwd_(op, in, ctx) : base_->forward(op, in, ctx);
  }
  Result<Tensors> backward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return op.name() == op_ && bwd_ ? bwd_(op, in, ctx) : base_->backward(op, in, ctx);
  }

 private:
  static OpKernel drop_op(Kernel k) {
    if (!k) return nullptr;
    return [k = std::move(k)](const Op&, const Tensors& in, const OpContext& ctx) { return k(in, ctx); };
  }
  std::string op_;
  OpKernel fwd_, bwd_;
  std::unique_ptr<Backend> owned_ = make_cpu_bf16_backend();
  Backend* base_ = owned_.get();
};

}  // namespace ws1::test

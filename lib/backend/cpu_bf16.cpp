// cpu_bf16: the candidates of lib/ops run on the host.
#include <fmt/format.h>

#include "ws1/backend.hpp"
#include "ws1/build_info.hpp"

namespace ws1 {
namespace {

class CpuBf16 final : public Backend {
 public:
  std::string name() const override { return "cpu_bf16"; }
  std::string kernel_id(const Op& op, Direction d) const override {
    const auto& b = build_info();
    return fmt::format("ws1.cpu_bf16.{}.{}@{}{}", op.name(), direction_name(d),
                       b.source_commit.substr(0, 12), b.source_state == "dirty" ? "+dirty" : "");
  }
  Result<Tensors> forward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return op.cpu_forward(in, ctx);
  }
  Result<Tensors> backward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return op.cpu_backward(in, ctx);
  }
  // No TF32-capable unit and no cuBLAS on this path: both readbacks stay absent.
};

}  // namespace

std::unique_ptr<Backend> make_cpu_bf16_backend() { return std::make_unique<CpuBf16>(); }

}  // namespace ws1

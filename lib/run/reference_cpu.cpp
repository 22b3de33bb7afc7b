// The CPU reference engine (ws1/reference.hpp): lib/ref's FP32 reference of each op.
#include "ws1/reference.hpp"

namespace ws1 {
namespace {

constexpr const char* kCpuEngine = "cpu_fp32 (lib/ref)";

class CpuReference final : public ReferenceEngine {
 public:
  std::string name() const override { return "cpu_fp32"; }
  Result<ReferenceResult> forward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return wrap(op.reference_forward(in, ctx));
  }
  Result<ReferenceResult> backward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return wrap(op.reference_backward(in, ctx));
  }

 private:
  static Result<ReferenceResult> wrap(Result<Tensors> r) {
    if (!r) return r.error();
    return ReferenceResult{std::move(r).value(), {kCpuEngine, std::nullopt}};
  }
};

}  // namespace

std::unique_ptr<ReferenceEngine> make_cpu_reference() { return std::make_unique<CpuReference>(); }

}  // namespace ws1

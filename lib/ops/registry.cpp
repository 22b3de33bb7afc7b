#include "registry.hpp"

#include <array>
#include <vector>

#include "ws1/ref.hpp"

namespace ws1 {

std::span<const Op* const> all_ops() {
  static const std::vector<const Op*> ops = {
#define WS1_OP_ADDRESS(name) &ops::name##_op(),
      WS1_OP_LIST(WS1_OP_ADDRESS)
#undef WS1_OP_ADDRESS
  };
  return ops;
}

const Op* find_op_impl(std::string_view name) {
  for (const Op* op : all_ops())
    if (op->name() == name) return op;
  return nullptr;
}

Result<Tensors> Op::reference_forward(const Tensors& in, const OpContext& ctx) const {
  return ref::forward(name(), in, ctx);
}

Result<Tensors> Op::reference_backward(const Tensors& in, const OpContext& ctx) const {
  return ref::backward(name(), in, ctx);
}

const Tensor* find_tensor(std::span<const NamedTensor> tensors, std::string_view name) {
  for (const auto& t : tensors)
    if (t.name == name) return &t.tensor;
  return nullptr;
}

}  // namespace ws1

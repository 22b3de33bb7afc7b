#include "ws1/ref.hpp"

#include <array>
#include <stdexcept>
#include <string>

#include "support.hpp"

namespace ws1::ref {
namespace {

struct Definition {
  std::string_view op;
  Tensors (*forward)(const Call&);
  Tensors (*backward)(const Call&);
};

#define WS1_REF_ENTRY(name) Definition{#name, name##_forward, name##_backward},
constexpr std::array kDefinitions{WS1_OP_LIST(WS1_REF_ENTRY)};
#undef WS1_REF_ENTRY

const Definition* find(std::string_view op) {
  for (const Definition& d : kDefinitions)
    if (d.op == op) return &d;
  return nullptr;
}

Result<Tensors> run(std::string_view op, const Tensors& in, const OpContext& ctx, bool backward) {
  const Definition* d = find(op);
  if (d == nullptr) return bad_input(std::string(op), "", "no FP32 reference is defined for this op");
  try {
    const Call call(op, in, ctx);
    return backward ? d->backward(call) : d->forward(call);
  } catch (const BadInput& e) {
    return e.error;
  } catch (const std::logic_error& e) {  // the tensor layer's shape checks
    return bad_input(std::string(op), "", e.what());
  }
}

}  // namespace

bool defines(std::string_view op) { return find(op) != nullptr; }

Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return run(op, in, ctx, false);
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return run(op, in, ctx, true);
}

}  // namespace ws1::ref

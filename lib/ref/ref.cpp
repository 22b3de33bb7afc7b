#include "ws1/ref.hpp"

#include <array>

#include "support.hpp"

namespace ws1::ref {
namespace {

#define WS1_REF_ENTRY(name) Definition{#name, name##_forward, name##_backward},
constexpr std::array kDefinitions{WS1_OP_LIST(WS1_REF_ENTRY)};
#undef WS1_REF_ENTRY

}  // namespace

bool defines(std::string_view op) { return find_definition(kDefinitions, op) != nullptr; }

Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return run_definition(kDefinitions, op, in, ctx, false, "no FP32 reference is defined for this op");
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return run_definition(kDefinitions, op, in, ctx, true, "no FP32 reference is defined for this op");
}

}  // namespace ws1::ref

#include "ws1/naive.hpp"

#include <array>

#include "support.hpp"

namespace ws1::naive {
namespace {

#define WS1_NAIVE_ENTRY(name) ref::Definition{#name, name##_forward, name##_backward},
constexpr std::array kDefinitions{WS1_OP_LIST(WS1_NAIVE_ENTRY)};
#undef WS1_NAIVE_ENTRY

}  // namespace

bool defines(std::string_view op) { return ref::find_definition(kDefinitions, op) != nullptr; }

Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return ref::run_definition(kDefinitions, op, in, ctx, false, "no naive bf16 implementation is defined for this op");
}

Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx) {
  return ref::run_definition(kDefinitions, op, in, ctx, true, "no naive bf16 implementation is defined for this op");
}

}  // namespace ws1::naive

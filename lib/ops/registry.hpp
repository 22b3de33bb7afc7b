// Internal: one accessor per op implementation (each defined in lib/ops/<op>.cpp).
#pragma once

#include "ws1/op.hpp"
#include "ws1/op_list.hpp"

namespace ws1::ops {

// <op>_op(), defined in lib/ops/<op>.cpp, for every op of ws1/op_list.hpp.
#define WS1_DECLARE_OP(name) const Op& name##_op();
WS1_OP_LIST(WS1_DECLARE_OP)
#undef WS1_DECLARE_OP

}  // namespace ws1::ops

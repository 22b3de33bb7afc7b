// The FP32 reference of every op (spec §3.1), written in lib/ref/<op>.cpp from the op's
// mathematical definition alone: inputs upcast exactly, every reduction, normalisation and
// product evaluated in FP32, outputs FP32 (cu_seqlens int64). It shares no code with the
// candidates (lib/ops, cuda/ops) beyond the number formats and the tensor type, so that a bug
// in a candidate's helpers cannot move both sides of a judgment; CI checks it against the
// float64 oracle (test/oracle/ops_numpy_oracle.py).
#pragma once

#include <string_view>

#include "ws1/error.hpp"
#include "ws1/op.hpp"

namespace ws1::ref {

// Whether lib/ref defines op `op`.
bool defines(std::string_view op);

// The reference outputs (forward) or input gradients (backward) of op `op`; inputs that do
// not fit give an Error naming the op and the tensor (exit 2).
Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx);
Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx);

}  // namespace ws1::ref

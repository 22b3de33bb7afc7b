// The naive BF16 engine: each op computed the way PyTorch eager computes it on bf16 tensors with
// no upcast, the baseline of contract ws1-c1-v3's relative criterion (spec §3.2, §11.2 item 11;
// FlashAttention's tests call it `upcast=False`): every PyTorch op's result is a bf16 tensor (the
// op's own arithmetic in FP32, its reductions accumulated in FP32, one rounding at its end), and a
// backward is autograd through those ops, each gradient node's result rounded to bf16. Outputs
// come in the op's declared candidate dtypes (a declared float32 output holds the bf16 value
// widened). The sequence of eager ops of each op is written at the top of lib/naive/<op>.cpp.
#pragma once

#include <string_view>

#include "ws1/error.hpp"
#include "ws1/op.hpp"

namespace ws1::naive {

// Whether lib/naive defines op `op`.
bool defines(std::string_view op);

// The naive outputs (forward) or input gradients (backward) of op `op`; inputs that do not fit
// give an Error naming the op and the tensor (exit 2).
Result<Tensors> forward(std::string_view op, const Tensors& in, const OpContext& ctx);
Result<Tensors> backward(std::string_view op, const Tensors& in, const OpContext& ctx);

}  // namespace ws1::naive

// Moving tensors between the invariance fixture's logical token order and one call's slots:
// gathering a call's inputs, and restoring its outputs to the active logical tokens.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "invariance_plan.hpp"
#include "ws1/fixture.hpp"
#include "ws1/op.hpp"

namespace ws1::invariance {

// What the first dimension (rows layout) or the slot dimensions (attention grid) of a tensor
// index.
enum class Axis {
  kToken,   // one logical token per row (or grid slot)
  kActive,  // one active token per row, in slot order (pack's packed rows and their seed)
  kWhole,   // not token-indexed: a parameter, or its gradient
  kOther,   // token-shaped metadata (cu_seqlens): neither gathered nor compared
};

// How the op's tensors are laid out, from the fixture spec (roles and shapes).
struct OpLayout {
  TokenLayout layout = TokenLayout::kRows;
  std::map<std::string, Axis> inputs;  // fixture tensor -> axis
  std::int64_t pad_token_id = 0;       // pad value of ids / targets (already mod vocab)
  // The axis of an output or gradient tensor of the op (gradients follow their input).
  Axis axis_of_result(const std::string& name, const Tensor& t, std::int64_t call_rows,
                      std::int64_t call_active) const;
  bool key_side(const std::string& name) const;  // attention: k, v, dk, dv
};
OpLayout op_layout(const Op& op, const FixtureSpec& spec, const LogicalTokens& tokens,
                   std::int64_t pad_token_id);

// The inputs of `call` from the canonical fixture tensors: token tensors gathered per slot
// (pads: 0, false, position 0, pad_token_id for ids / targets), active-token tensors gathered
// for the call's active slots, whole tensors shared; attention gets [B, H, S, D] and a key
// mask. `strided`: every input is handed over as a non-contiguous view of the same values.
Tensors call_inputs(const OpLayout& layout, const Tensors& canonical, const LogicalTokens& tokens,
                    const Call& call, bool strided);

// The active slots of a call's query side, in slot order.
std::vector<std::int64_t> active_slots(const LogicalTokens& tokens, const Call& call);

// Tensors indexed by active logical token, [A, ...]: filled call by call.
class LogicalResult {
 public:
  // Copies the call's rows of `t` (axis kToken or kActive) at active tokens. Error text when a
  // token comes twice or the tensor does not fit the call.
  std::optional<std::string> add(const OpLayout& layout, const std::string& name, Axis axis,
                                 const Tensor& t, const LogicalTokens& tokens, const Call& call);
  // The tensors, once every active token has been seen (else the error text).
  std::optional<std::string> finish(std::vector<NamedTensor>& out) const;

 private:
  struct Entry {
    Tensor data;
    std::vector<int> seen;
  };
  std::map<std::string, Entry> entries_;
  std::vector<std::string> order_;
};

}  // namespace ws1::invariance

// Internal to lib/ref, and read by lib/naive too (reading and checking an op's inputs is not
// arithmetic, so both engines share it): the checked inputs of the selected-logp ops — logp and
// batch_invariant_logp (logits given) and linear_logp (logits = hidden @ weight^T). Every
// failure is the Call's "<op>: <tensor>: <problem>"; bf16 values are widened exactly to FP32.
#pragma once

#include <cstdint>
#include <vector>

#include "gemm_inputs.hpp"
#include "support.hpp"

namespace ws1::ref {

// The rows a selected log-softmax works on: "targets" [...] int64, each in [0, vocab) — or,
// where ignore_index is honoured, equal to ctx.ignore_index, which marks the row skipped
// whatever its value — and for a backward "dy.logp" [...] float32 of the same shape.
struct TargetRows {
  Shape lead;  // the targets' shape
  std::int64_t rows = 0, vocab = 0;
  std::vector<std::int64_t> targets;
  std::vector<bool> skip;  // ignored rows (all false unless ignore_index is honoured)
  std::vector<float> dy;   // [rows], backward only
};

// logp and batch_invariant_logp (`honour_ignore_index`): "logits" [..., V] bf16 (V >= 1), the
// targets [...] and with `backward` dy.logp [...].
struct LogitRows : TargetRows {
  std::vector<float> logits;  // [rows, vocab]
};
LogitRows read_logit_rows(const Call& call, bool honour_ignore_index, bool backward);

// linear_logp: "hidden" [..., H] bf16, "weight" [V, H] bf16 (V >= 1), the targets [...] (no
// ignore_index) and with `backward` dy.logp [...].
struct LinearLogpInputs : TargetRows {
  std::int64_t width = 0;
  std::vector<float> hidden, weight;  // [rows, H], [V, H]
};
LinearLogpInputs read_linear_logp_inputs(const Call& call, bool backward);

}  // namespace ws1::ref

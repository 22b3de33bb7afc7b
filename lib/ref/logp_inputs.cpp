#include "logp_inputs.hpp"

#include <string>

namespace ws1::ref {

namespace {

// Once x.lead and x.vocab are set and the targets' shape is checked against x.lead: the
// targets, each checked, and with `backward` dy.logp.
void read_targets(const Call& call, TargetRows& x, bool honour_ignore_index, bool backward) {
  x.targets = call.integers("targets");
  x.rows = static_cast<std::int64_t>(x.targets.size());
  x.skip.assign(x.targets.size(), false);
  const std::int64_t ignore = call.ctx().ignore_index;
  for (std::size_t i = 0; i < x.targets.size(); ++i) {
    const std::int64_t y = x.targets[i];
    if (honour_ignore_index && y == ignore) {
      x.skip[i] = true;
      continue;
    }
    call.expect(y >= 0 && y < x.vocab, "targets",
                "element " + std::to_string(i) + " is " + std::to_string(y) + ", not a class in [0, " +
                    std::to_string(x.vocab) + ")" +
                    (honour_ignore_index ? " nor ignore_index " + std::to_string(ignore) : std::string()));
  }
  if (backward) {
    const Tensor& dy = call.tensor("dy.logp", DType::kF32);
    call.expect(dy.shape() == x.lead, "dy.logp",
                "shape " + shape_text(dy.shape()) + " should be the targets' " + shape_text(x.lead));
    x.dy = call.floats("dy.logp", DType::kF32);
  }
}

}  // namespace

LogitRows read_logit_rows(const Call& call, bool honour_ignore_index, bool backward) {
  const Tensor& logits = call.tensor("logits", DType::kBF16);
  const Tensor& targets = call.tensor("targets", DType::kI64);
  if (backward) call.tensor("dy.logp", DType::kF32);
  call.expect(logits.dim() >= 1, "logits", "needs a last (vocabulary) dimension");
  LogitRows x;
  x.vocab = logits.shape().back();
  call.expect(x.vocab >= 1, "logits", "has an empty vocabulary dimension: " + shape_text(logits.shape()));
  x.lead.assign(logits.shape().begin(), logits.shape().end() - 1);
  call.expect(targets.shape() == x.lead, "targets",
              "shape " + shape_text(targets.shape()) + " should be the logits' " + shape_text(logits.shape()) +
                  " without the vocabulary dimension");
  read_targets(call, x, honour_ignore_index, backward);
  x.logits = call.floats("logits");
  return x;
}

LinearLogpInputs read_linear_logp_inputs(const Call& call, bool backward) {
  const Tensor& h = call.tensor("hidden", DType::kBF16);
  const Tensor& w = call.tensor("weight", DType::kBF16, 2);
  const Tensor& t = call.tensor("targets", DType::kI64);
  if (backward) call.tensor("dy.logp", DType::kF32);
  const LinearShape shape = linear_shape(call, h, w);
  LinearLogpInputs p;
  p.width = shape.width;
  p.vocab = shape.vocab;
  call.expect(p.vocab >= 1, "weight", "has an empty vocabulary dimension: " + shape_text(w.shape()));
  p.lead.assign(h.shape().begin(), h.shape().end() - 1);
  call.expect(t.shape() == p.lead, "targets",
              "shape " + shape_text(t.shape()) + " should be hidden's " + shape_text(h.shape()) +
                  " without the hidden-size dimension");
  read_targets(call, p, false, backward);
  p.hidden = call.floats("hidden");
  p.weight = call.floats("weight");
  return p;
}

}  // namespace ws1::ref

#include "logsumexp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>

#include "op_support.hpp"
#include "ws1/numeric.hpp"

namespace ws1::ops {

LseState lse_chunk(const float* x, std::int64_t n) {
  LseState s;
  for (std::int64_t i = 0; i < n; ++i) s.max = x[i] > s.max ? x[i] : s.max;
  if (s.max == -std::numeric_limits<float>::infinity()) return s;  // empty or all -inf
  for (std::int64_t i = 0; i < n; ++i) s.sum += std::exp(x[i] - s.max);
  // A NaN element is skipped by the max but makes the sum NaN, so it reaches the result.
  return s;
}

void lse_merge(LseState& acc, const LseState& chunk) {
  if (chunk.max == -std::numeric_limits<float>::infinity()) return;
  // The smaller maximum's sum is rescaled onto the larger one: one exp, one fused
  // multiply-add (the first chunk lands here with acc.sum = 0, so it is taken unchanged).
  if (chunk.max > acc.max) {
    acc.sum = std::fma(acc.sum, std::exp(acc.max - chunk.max), chunk.sum);
    acc.max = chunk.max;
  } else {
    acc.sum = std::fma(chunk.sum, std::exp(chunk.max - acc.max), acc.sum);
  }
}

float lse_value(const LseState& s) { return s.max + std::log(s.sum); }

LseState lse_candidate_state(const float* x, std::int64_t n) {
  LseState acc;
  for (std::int64_t c = 0; c < n; c += kLseChunk) lse_merge(acc, lse_chunk(x + c, std::min(kLseChunk, n - c)));
  return acc;
}

float lse_candidate(const float* x, std::int64_t n) { return lse_value(lse_candidate_state(x, n)); }


float bf16_bits_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

LogitRows check_logit_rows(std::string_view op, const Tensors& in, const OpContext& ctx,
                           bool honour_ignore_index, bool backward) {
  LogitRows r;
  r.logits = &input(in, op, "logits", DType::kBF16);
  r.targets = &input(in, op, "targets", DType::kI64);
  if (backward) r.dy = &input(in, op, "dy.logp", DType::kF32);
  const Tensor& logits = *r.logits;
  const Tensor& targets = *r.targets;
  // Checks logits [..., V] against targets [...] and every target against [0, V).
  require(logits.dim() >= 1, op, "logits", "needs at least one dimension (the vocabulary)");
  r.vocab = logits.shape().back();
  require(r.vocab >= 1, op, "logits", "the vocabulary dimension is empty");
  const Shape lead(logits.shape().begin(), logits.shape().end() - 1);
  require(targets.shape() == lead, op, "targets",
          fmt::format("shape {} does not match logits {} without its last dimension",
                      shape_string(targets.shape()), shape_string(logits.shape())));
  r.ids = to_i64(targets);
  r.rows = static_cast<std::int64_t>(r.ids.size());
  r.ignored.assign(r.ids.size(), false);
  for (std::size_t i = 0; i < r.ids.size(); ++i) {
    const std::int64_t y = r.ids[i];
    if (honour_ignore_index && y == ctx.ignore_index) {
      r.ignored[i] = true;
      continue;
    }
    require(y >= 0 && y < r.vocab, op, "targets",
            honour_ignore_index
                ? fmt::format("target {} at element {} is outside [0, {}) and is not ignore_index {}",
                              y, i, r.vocab, ctx.ignore_index)
                : fmt::format("target {} at element {} is outside [0, {})", y, i, r.vocab));
  }
  if (backward)
    require(r.dy->shape() == targets.shape(), op, "dy.logp",
            fmt::format("shape {} differs from targets {}", shape_string(r.dy->shape()),
                        shape_string(targets.shape())));
  return r;
}

namespace {

// Row r of bf16 logits as float32.
void load_row(const std::uint16_t* logits, std::int64_t r, std::int64_t vocab, float* row) {
  const std::uint16_t* p = logits + r * vocab;
  for (std::int64_t i = 0; i < vocab; ++i) row[i] = bf16_bits_to_f32(p[i]);
}


}  // namespace

Result<Tensors> selected_logp_forward(std::string_view op, const Tensors& in,
                                      const OpContext& ctx, bool honour_ignore_index) {
  return guarded(op, [&] {
    const LogitRows s = check_logit_rows(op, in, ctx, honour_ignore_index, false);
    const Tensor& logits = *s.logits;
    const Tensor lc = logits.is_contiguous() ? logits : logits.contiguous();
    const auto* px = lc.data<std::uint16_t>();
    std::vector<float> out(static_cast<std::size_t>(s.rows), 0.0f);
    parallel_for(s.rows, ctx.threads, [&](std::int64_t b, std::int64_t e) {
      std::vector<float> row(static_cast<std::size_t>(s.vocab));
      for (std::int64_t r = b; r < e; ++r) {
        const auto ri = static_cast<std::size_t>(r);
        if (s.ignored[ri]) continue;  // logp +0
        load_row(px, r, s.vocab, row.data());
        out[ri] = row[static_cast<std::size_t>(s.ids[ri])] - lse_candidate(row.data(), s.vocab);
      }
    });
    return Tensors{{"logp", f32_tensor(s.targets->shape(), std::move(out))}};
  });
}

Result<Tensors> selected_logp_backward(std::string_view op, const Tensors& in,
                                       const OpContext& ctx, bool honour_ignore_index) {
  return guarded(op, [&] {
    const LogitRows s = check_logit_rows(op, in, ctx, honour_ignore_index, true);
    const Tensor& logits = *s.logits;
    const std::vector<float> dy = to_f32(*s.dy);
    const Tensor lc = logits.is_contiguous() ? logits : logits.contiguous();
    const auto* px = lc.data<std::uint16_t>();
    // Zero-filled: ignored rows keep an all +0 gradient.
    Tensor grad(DType::kBF16, logits.shape());
    std::uint16_t* g16 = grad.data<std::uint16_t>();
    parallel_for(s.rows, ctx.threads, [&](std::int64_t b, std::int64_t e) {
      std::vector<float> row(static_cast<std::size_t>(s.vocab));
      for (std::int64_t r = b; r < e; ++r) {
        const auto ri = static_cast<std::size_t>(r);
        if (s.ignored[ri]) continue;
        load_row(px, r, s.vocab, row.data());
        const float lse = lse_candidate(row.data(), s.vocab);
        const std::int64_t y = s.ids[ri];
        const float d = dy[ri];
        for (std::int64_t i = 0; i < s.vocab; ++i) {
          const float p = std::exp(row[static_cast<std::size_t>(i)] - lse);
          g16[r * s.vocab + i] = to_bf16(d * ((i == y ? 1.0f : 0.0f) - p)).bits;
        }
      }
    });
    return Tensors{{"dlogits", std::move(grad)}};
  });
}

}  // namespace ws1::ops

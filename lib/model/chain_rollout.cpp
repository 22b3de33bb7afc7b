// The chain's protocols (ws1/model.hpp): teacher forcing (one block of the whole sequence),
// rollout decode (a prefill block, then one-token blocks against the cache), and batched rollout
// decode (each sequence prefilled alone, then decode blocks of one token per sequence still
// decoding, every sequence against its own cache).
#include <fmt/format.h>

#include <stdexcept>

#include "chain_block.hpp"

namespace ws1 {

Result<std::vector<float>> Chain::step(KvCache& cache, std::span<const std::int64_t> tokens,
                                       std::span<const std::int64_t> targets, std::int64_t score_from,
                                       Trace* trace) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  const auto m = static_cast<std::int64_t>(targets.size());
  if (score_from < 0 || score_from + m > n)
    throw std::logic_error(fmt::format("Chain::step: {} tokens, {} targets from row {}", n, m, score_from));
  const std::int64_t first = cache.length();
  auto hidden = forward(cache, tokens, trace);
  if (!hidden) return hidden.error();
  return score(hidden->slice(0, score_from, score_from + m), first + score_from, targets, trace);
}

Result<std::vector<float>> Chain::teacher_forcing(std::span<const std::int64_t> tokens, Trace* trace) {
  if (tokens.size() < 2) throw std::logic_error("Chain::teacher_forcing: needs at least 2 tokens");
  KvCache cache = new_cache();
  return step(cache, tokens, tokens.subspan(1), 0, trace);
}

namespace {

void check_prompt(std::int64_t prompt_len, std::size_t n) {
  if (prompt_len < 1 || static_cast<std::size_t>(prompt_len) >= n)
    throw std::logic_error(fmt::format("Chain::rollout_decode: prompt {} of {} tokens", prompt_len, n));
}

}  // namespace

Result<std::vector<float>> Chain::rollout_decode(std::span<const std::int64_t> tokens,
                                                 std::int64_t prompt_len, Trace* trace) {
  check_prompt(prompt_len, tokens.size());
  const auto p = static_cast<std::size_t>(prompt_len);
  KvCache cache = new_cache();
  auto first = step(cache, tokens.first(p), tokens.subspan(p, 1), prompt_len - 1, trace);
  if (!first) return first;
  std::vector<float> out = std::move(first).value();
  for (std::size_t t = p; t + 1 < tokens.size(); ++t) {
    auto next = step(cache, tokens.subspan(t, 1), tokens.subspan(t + 1, 1), 0, trace);
    if (!next) return next;
    out.push_back(next->front());
  }
  return out;
}

Result<std::vector<std::vector<float>>> Chain::rollout_decode_batched(
    std::span<const std::vector<std::int64_t>> sequences, std::span<const std::int64_t> prompt_lens,
    std::span<Trace* const> traces) {
  const std::size_t n = sequences.size();
  if (prompt_lens.size() != n || (!traces.empty() && traces.size() != n))
    throw std::logic_error("Chain::rollout_decode_batched: one prompt length (and trace) per sequence");
  const auto trace_of = [&](std::size_t i) { return traces.empty() ? nullptr : traces[i]; };
  std::vector<KvCache> caches;
  std::vector<std::vector<float>> out(n);
  for (std::size_t i = 0; i < n; ++i) {  // prefill each sequence on its own
    check_prompt(prompt_lens[i], sequences[i].size());
    const auto p = static_cast<std::size_t>(prompt_lens[i]);
    caches.push_back(new_cache());
    auto first = step(caches.back(), std::span(sequences[i]).first(p), std::span(sequences[i]).subspan(p, 1),
                      prompt_lens[i] - 1, trace_of(i));
    if (!first) return first.error();
    out[i] = std::move(first).value();
  }
  for (;;) {  // one batched decode step over the sequences that still have a token to score
    std::vector<KvCache*> batch;
    std::vector<Trace*> batch_traces;
    std::vector<std::int64_t> tokens, targets;
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < n; ++i) {
      const auto t = static_cast<std::size_t>(caches[i].length());
      if (t + 1 >= sequences[i].size()) continue;
      batch.push_back(&caches[i]);
      batch_traces.push_back(trace_of(i));
      tokens.push_back(sequences[i][t]);
      targets.push_back(sequences[i][t + 1]);
      members.push_back(i);
    }
    if (batch.empty()) return out;
    Block b = Block::batch(batch, batch_traces);  // positions before the step commits the caches
    auto hidden = forward_batch(batch, tokens, batch_traces);
    if (!hidden) return hidden.error();
    auto logp = score_block(*hidden, b, targets);
    if (!logp) return logp.error();
    for (std::size_t k = 0; k < members.size(); ++k) out[members[k]].push_back((*logp)[k]);
  }
}

}  // namespace ws1

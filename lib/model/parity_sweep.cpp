// The §8.1 recalibration sweep's tokens: per (seed, prompt/response lengths, logit scale,
// sequence), a prompt of uniform token ids from the counter-based generator (docs/fixtures.md)
// and a response the candidate chain samples itself, one decode step per token, from its lm_head
// logits: greedy at temperature 0, else softmax(logits / T) in double (index order) inverted at a
// uniform draw of the same generator. The sampled tokens are then scored like the manifest's.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "counter_rng.hpp"
#include "ws1/numeric.hpp"
#include "ws1/parity.hpp"

namespace ws1 {
namespace {

using fixture_detail::mix64;
using fixture_detail::stream_key;
using fixture_detail::uniform_below;

// Token from the [1, V] logits (bf16 or float32) at `temperature`; `u` uniform in [0, 1).
std::int64_t sample(const Tensor& logits, double temperature, double u) {
  const std::vector<float> l = [&] {
    const Tensor c = logits.is_contiguous() ? logits : logits.contiguous();
    std::vector<float> v(static_cast<std::size_t>(c.numel()));
    for (std::size_t i = 0; i < v.size(); ++i)
      v[i] = c.dtype() == DType::kBF16 ? from_bf16(bf16{c.data<std::uint16_t>()[i]}) : c.data<float>()[i];
    return v;
  }();
  std::size_t best = 0;
  for (std::size_t i = 1; i < l.size(); ++i)
    if (l[i] > l[best]) best = i;
  if (temperature == 0.0) return static_cast<std::int64_t>(best);
  std::vector<double> w(l.size());
  double total = 0;
  for (std::size_t i = 0; i < l.size(); ++i) total += w[i] = std::exp((static_cast<double>(l[i]) - l[best]) / temperature);
  double target = u * total, acc = 0;
  for (std::size_t i = 0; i < w.size(); ++i)
    if ((acc += w[i]) > target) return static_cast<std::int64_t>(i);
  return static_cast<std::int64_t>(best);  // u * total rounded up to the whole sum
}

double unit(std::uint64_t key, std::uint64_t i) { return static_cast<double>(mix64(key, i) >> 11) * 0x1p-53; }

// One sequence: the prompt drawn from stream `prompt_key`, the response sampled by `chain` with
// draw r of stream `sample_key` for response token r.
Result<std::vector<std::int64_t>> sampled_sequence(Chain& chain, std::uint64_t prompt_key, std::uint64_t sample_key,
                                                   std::int64_t prompt_len, std::int64_t response_len,
                                                   double temperature) {
  const auto vocab = static_cast<std::uint64_t>(chain.config().vocab_size);
  std::vector<std::int64_t> tokens;
  for (std::int64_t i = 0; i < prompt_len; ++i)
    tokens.push_back(static_cast<std::int64_t>(uniform_below(prompt_key, static_cast<std::uint64_t>(i), vocab)));
  KvCache cache = chain.new_cache();
  auto hidden = chain.forward(cache, tokens);
  for (std::int64_t r = 0; r < response_len; ++r) {
    if (!hidden) return hidden.error();
    const std::int64_t rows = hidden->shape()[0];
    auto logits = chain.logits(hidden->slice(0, rows - 1, rows));
    if (!logits) return logits.error();
    tokens.push_back(sample(*logits, temperature, unit(sample_key, static_cast<std::uint64_t>(r))));
    if (r + 1 < response_len) hidden = chain.forward(cache, std::span(tokens).last(1));
  }
  return tokens;
}

}  // namespace

Result<ParityFixture> sweep_parity_fixture(const ModelWeights& base, Backend& backend, const OpContext& ctx,
                                           const SweepOptions& o) {
  if (o.seeds.empty() || o.lengths.empty() || o.logit_scales.empty() || o.sequences < 1)
    return bad_input("--fixture", "sweep", "needs at least one seed, length pair, logit scale and sequence");
  if (!(std::isfinite(o.temperature) && o.temperature >= 0))
    return bad_input("--temperature", fmt::format("{}", o.temperature), "must be finite and >= 0 (0: greedy)");
  for (const auto& [p, r] : o.lengths)
    if (p < 1 || r < 1)
      return bad_input("--prompt-len/--response-len", fmt::format("{}/{}", p, r), "lengths must be >= 1");
  ParityFixture f;
  f.protocol = "sweep";
  f.seed = o.seeds.front();
  for (double scale : o.logit_scales) {
    auto weights = with_logit_scale(base, scale);
    if (!weights) return weights.error();
    const auto t0 = std::chrono::steady_clock::now();
    Chain chain(*weights, backend, ctx);
    std::int64_t sampled = 0;
    for (std::uint64_t seed : o.seeds)
      for (const auto& [p, r] : o.lengths)
        for (std::int64_t q = 0; q < o.sequences; ++q) {
          const std::string id = fmt::format("seed{}/p{}r{}/x{}/q{}", seed, p, r, scale, q);
          auto tokens = sampled_sequence(chain, stream_key(seed, "parity-sweep/prompt/" + id),
                                         stream_key(seed, "parity-sweep/sample/" + id), p, r, o.temperature);
          if (!tokens) {
            Error e = tokens.error();
            e.code = ExitCode::kRed;
            e.where = "sampling " + id + ": " + e.where;
            return e;
          }
          f.sequences.push_back({id, std::move(tokens).value(), p, scale});
          sampled += r;
        }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    spdlog::info("logit scale {}: sampled {} response tokens in {:.2f} s ({:.1f} ms per token)", scale, sampled, secs,
                 sampled > 0 ? 1e3 * secs / static_cast<double>(sampled) : 0.0);
  }
  return f;
}

}  // namespace ws1

// The tokens chain parity scores: the manifest's gate fixture, its identity hash, and the checks
// every fixture passes before a chain runs.
#include <fmt/format.h>

#include "ws1/fixture.hpp"
#include "ws1/parity.hpp"

namespace ws1 {

std::int64_t ParityFixture::active_tokens() const {
  std::int64_t n = 0;
  for (const ParitySequence& s : sequences) n += s.active();
  return n;
}

std::vector<NamedTensor> ParityFixture::tensors() const {
  std::vector<NamedTensor> out;
  for (const ParitySequence& s : sequences) {
    Tensor tokens(DType::kI64, {static_cast<std::int64_t>(s.tokens.size())});
    std::copy(s.tokens.begin(), s.tokens.end(), tokens.data<std::int64_t>());
    Tensor prompt(DType::kI64, {1});
    prompt.data<std::int64_t>()[0] = s.prompt_len;
    out.push_back({s.id + ".tokens", std::move(tokens)});
    out.push_back({s.id + ".prompt_len", std::move(prompt)});
  }
  return out;
}

std::string ParityFixture::hash() const { return fixture_hash("chain/" + protocol, seed, tensors()); }

ParityFixture manifest_parity_fixture(const Manifest& m) {
  ParityFixture f;
  f.protocol = "manifest";
  f.seed = static_cast<std::uint64_t>(m.seed);
  for (const std::string& id : m.sample_ids) {
    const Sample* s = m.sample(id);  // the loader checked every id names a sample
    f.sequences.push_back({s->sample_id, s->token_ids, s->prompt_len, 1.0});
  }
  return f;
}

Status check_fixture(const ParityFixture& f, const ModelConfig& config, const std::string& file) {
  for (const ParitySequence& s : f.sequences) {
    const auto n = static_cast<std::int64_t>(s.tokens.size());
    if (s.prompt_len < 1 || s.prompt_len >= n)
      return bad_input(file, s.id, fmt::format("prompt_len {} of {} tokens (needs 1 <= prompt_len < length)",
                                               s.prompt_len, n));
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t t = s.tokens[static_cast<std::size_t>(i)];
      if (t < 0 || t >= config.vocab_size)
        return bad_input(file, fmt::format("{}.tokens[{}]", s.id, i),
                         fmt::format("token {} outside the model's vocabulary [0, {})", t, config.vocab_size));
    }
  }
  return {};
}

}  // namespace ws1

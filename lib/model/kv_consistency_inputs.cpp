// The C6/C7 decode-vs-prefill cases (ws1/kv_consistency.hpp): the case table from the manifest's
// fixtures block, and each case's inputs from the fixture generator's counter-based streams.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "ws1/fixture.hpp"
#include "ws1/kv_consistency.hpp"

namespace ws1 {

// ---- cases --------------------------------------------------------------------------------------

Result<std::vector<KvCase>> kv_consistency_cases(const Manifest& m) {
  const auto check = [&](const std::vector<std::int64_t>& lengths, const std::string& field) -> Status {
    for (std::int64_t l : lengths)
      if (l < 2) return bad_input(m.file, field, fmt::format("{}: the probe scores the second half of at least 2 tokens", l));
    return {};
  };
  std::vector<KvCase> out;
  const std::pair<const char*, std::pair<std::int64_t, const char*>> singles[] = {
      {"decode-b1-short", {m.short_fixture.seq_len, "fixtures.short_full_model_fixture.seq_len"}},
      {"decode-b1-long", {m.long_fixture.seq_len, "fixtures.long_full_model_fixture.seq_len"}},
      {"decode-b1-primary-s3", {m.primary_seq_len, "fixtures.primary_seq_len"}}};
  for (const auto& [name, len] : singles) {
    if (Status st = check({len.first}, len.second); !st) return st.error();
    out.push_back({name, {len.first}, KvPadding::kNone, len.first});
  }
  const std::vector<std::int64_t>& varlen = m.varlen_seq_lens;
  if (varlen.empty()) return bad_input(m.file, "fixtures.varlen_seq_lens", "empty");
  if (Status st = check(varlen, "fixtures.varlen_seq_lens"); !st) return st.error();
  const std::int64_t longest = *std::max_element(varlen.begin(), varlen.end());
  out.push_back({"decode-bn-varlen", varlen, KvPadding::kRight, longest});
  if (m.padded_len < longest)
    return bad_input(m.file, "fixtures.padding.primary_padded_len",
                     fmt::format("{} is shorter than the longest varlen sequence ({})", m.padded_len, longest));
  for (const std::string& mode : m.padding_modes) {
    if (mode != "right" && mode != "left")
      return bad_input(m.file, "fixtures.padding.modes", "'" + mode + "': expected right or left");
    out.push_back({"decode-bn-padded-" + mode, varlen, mode == "left" ? KvPadding::kLeft : KvPadding::kRight,
                   m.padded_len});
  }
  return out;
}

// ---- inputs -------------------------------------------------------------------------------------

namespace {

Result<Tensor> stream(const std::string& key, DType dtype, Shape shape, std::uint64_t seed, unsigned threads,
                      double scale, std::int64_t high = 0) {
  TensorSpec spec;
  spec.name = key;
  spec.dtype = dtype;
  spec.shape = std::move(shape);
  spec.role = high > 0 ? TensorRole::kIndex : TensorRole::kActivation;
  spec.gen.kind = high > 0 ? GenKind::kUniformInt : GenKind::kNormal;
  spec.gen.seed = seed;
  spec.gen.key = key;
  spec.gen.scale = scale;
  spec.gen.high = high;
  return generate_tensor(spec, threads);
}

}  // namespace

std::int64_t KvCaseInputs::rows() const {
  std::int64_t n = 0;
  for (std::int64_t l : kv_case.lengths) n += l;
  return n;
}

std::string KvCaseInputs::shape_label() const { return fmt::format("hq{}_hkv{}_d{}", hq, hkv, d); }

std::vector<NamedTensor> KvCaseInputs::tensors() const {
  std::vector<NamedTensor> out;
  for (const KvSequence& s : sequences) {
    Tensor tokens(DType::kI64, {static_cast<std::int64_t>(s.tokens.size())});
    std::copy(s.tokens.begin(), s.tokens.end(), tokens.data<std::int64_t>());
    out.insert(out.end(), {{s.id + ".q", s.q}, {s.id + ".k", s.k}, {s.id + ".v", s.v}, {s.id + ".tokens", tokens}});
  }
  out.push_back({"probe_head", probe_head});
  return out;
}

std::string KvCaseInputs::hash() const { return fixture_hash("chain/kv_consistency/" + kv_case.name, seed, tensors()); }

Result<KvCaseInputs> kv_case_inputs(const KvCase& c, const ModelConfig& config, std::uint64_t seed, unsigned threads) {
  KvCaseInputs in;
  in.kv_case = c;
  in.hq = config.num_attention_heads;
  in.hkv = config.num_key_value_heads;
  in.d = config.head_dim;
  in.seed = seed;
  for (std::size_t i = 0; i < c.lengths.size(); ++i) {
    KvSequence s;
    s.id = fmt::format("s{}", i);
    const std::int64_t l = c.lengths[i];
    const std::string key = fmt::format("kv_consistency/{}/{}/", c.name, s.id);
    // q, k, v ~ N(0, 1) in bf16 (upstream: randn cast to bf16): scores q.k / sqrt(D) ~ N(0, 1).
    const std::tuple<Tensor*, const char*, std::int64_t> qkv[] = {{&s.q, "q", in.hq}, {&s.k, "k", in.hkv}, {&s.v, "v", in.hkv}};
    for (const auto& [slot, name, heads] : qkv) {
      auto t = stream(key + name, DType::kBF16, {l, heads, in.d}, seed, threads, 1.0);
      if (!t) return t.error();
      *slot = std::move(t).value();
    }
    auto tokens = stream(key + "tokens", DType::kI64, {l}, seed, threads, 1.0, kProbeVocab);
    if (!tokens) return tokens.error();
    s.tokens.assign(tokens->data<std::int64_t>(), tokens->data<std::int64_t>() + l);
    s.prompt_len = l / 2;
    in.sequences.push_back(std::move(s));
  }
  // A trained weight's scale, as the synthetic projections (a power of two: exact in bf16).
  const std::int64_t width = in.hq * in.d;
  const double scale =
      std::ldexp(1.0, -static_cast<int>(std::lround(std::log2(std::sqrt(static_cast<double>(width))))));
  auto head = stream("kv_consistency/probe_head", DType::kBF16, {kProbeVocab, width}, seed, threads, scale);
  if (!head) return head.error();
  in.probe_head = std::move(head).value();
  return in;
}

}  // namespace ws1

// The per-token record written beside the parity evidence (a safetensors file): every active
// token's logp on both paths and the reference, d as the contract defines it, and where the
// token sits; metadata says which fixture, which weights and which sign.
#include <fmt/format.h>

#include "parity_sides.hpp"

namespace ws1 {
namespace {

template <class T, class F>
Tensor column(const ParityRun& run, DType dtype, F get) {
  Tensor t(dtype, {static_cast<std::int64_t>(run.tokens.size())});
  T* out = t.data<T>();
  for (std::size_t i = 0; i < run.tokens.size(); ++i) out[i] = get(run.tokens[i]);
  return t;
}

}  // namespace

Result<std::vector<NamedTensor>> parity_token_tensors(const ParityCellInputs& in) {
  const ParityRun& run = *in.run;
  auto sides = model_detail::contract_sides(*in.contract, run);
  if (!sides) return sides.error();
  Tensor d(DType::kF32, {static_cast<std::int64_t>(run.tokens.size())});
  for (std::size_t i = 0; i < run.tokens.size(); ++i) d.data<float>()[i] = sides->lhs[i] - sides->rhs[i];
  return std::vector<NamedTensor>{
      {"dlogp", std::move(d)},
      {"teacher_forcing_logp", column<float>(run, DType::kF32, [](const TokenLogp& t) { return t.teacher_forcing; })},
      {"rollout_decode_logp", column<float>(run, DType::kF32, [](const TokenLogp& t) { return t.rollout_decode; })},
      {"reference_logp", column<float>(run, DType::kF32, [](const TokenLogp& t) { return t.reference; })},
      {"sequence", column<std::int64_t>(run, DType::kI64, [](const TokenLogp& t) { return t.sequence; })},
      {"position", column<std::int64_t>(run, DType::kI64, [](const TokenLogp& t) { return t.position; })},
      {"token", column<std::int64_t>(run, DType::kI64, [](const TokenLogp& t) { return t.token; })},
  };
}

std::map<std::string, std::string> parity_token_metadata(const ParityCellInputs& in) {
  const RolePair roles = in.contract->parity_roles();
  std::string ids;
  for (const ParitySequence& s : in.fixture->sequences) ids += (ids.empty() ? "" : ",") + s.id;
  return {
      {"ws1.format", "ws1-parity-tokens-v1"},
      {"ws1.protocol", in.fixture->protocol},
      {"ws1.rollout", in.run->batched_decode ? "batched decode" : "one sequence at a time"},
      {"ws1.fixture_hash", in.fixture->hash()},
      {"ws1.seed", std::to_string(in.fixture->seed)},
      {"ws1.sequences", ids},
      {"ws1.weights", in.weights->label},
      {"ws1.weights_hash", in.weights->hash},
      {"ws1.weights_synthetic", in.weights->synthetic ? "true" : "false"},
      {"ws1.weights_pinned", in.weights->pinned ? "true" : "false"},
      {"ws1.weights_snapshot", in.weights->synthetic ? "" : snapshot_record(in.weights->snapshot)},
      {"ws1.dlogp", in.contract->chain.dlogp_definition + " (dlogp = " + roles.lhs + " - " + roles.rhs + ")"},
      {"ws1.contract_version", in.contract->version},
      {"ws1.backend", in.backend.actual},
  };
}

}  // namespace ws1

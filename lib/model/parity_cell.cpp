// The chain_parity evidence cell: the contract's gated metrics with their thresholds, the other
// statistics reported, and the verdict (spec §8; contract chain_logprob_aggregates).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "parity_sides.hpp"
#include "ws1/judge.hpp"

namespace ws1 {
namespace {

constexpr std::string_view kChainBlock = "chain_logprob_aggregates";

double value_of(ChainMetric m, const DlogpStats& s) {
  switch (m) {
    case ChainMetric::kMaxAbsDlogp: return s.max_abs;
    case ChainMetric::kApproxKl0: return s.approx_kl0;
    case ChainMetric::kClipfrac0: return s.clipfrac0;
    case ChainMetric::kMeanAbsDlogp: return s.mean_abs;
  }
  return std::nan("");
}

bool passes(const MetricResult& r) { return !r.threshold || r.value <= *r.threshold; }

FixtureRef fixture_ref(const ParityCellInputs& in) {
  FixtureRef f;
  f.id = fmt::format("chain/{}/{}#{}", in.fixture->protocol, in.weights->label, in.weights->hash);
  f.hash = in.fixture->hash();
  f.seed = in.fixture->seed;
  for (const NamedTensor& t : in.fixture->tensors()) f.tensors.push_back({t.name, t.tensor.dtype(), t.tensor.shape()});
  return f;
}

Tensor f32_vector(const std::vector<float>& v) {
  Tensor t(DType::kF32, {static_cast<std::int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// "s1 position 9" for active token i.
std::string token_at(const ParityCellInputs& in, std::int64_t i) {
  const TokenLogp& t = in.run->tokens[static_cast<std::size_t>(i)];
  return fmt::format("{} position {}", in.fixture->sequences[static_cast<std::size_t>(t.sequence)].id, t.position);
}

// Each side against the FP32 reference chain: d = side - reference.
void add_reference_metrics(const ParityCellInputs& in, const model_detail::Sides& sides, Cell& cell) {
  std::vector<float> ref;
  for (const TokenLogp& t : in.run->tokens) ref.push_back(t.reference);
  if (ref.empty() || std::isnan(ref.front())) return;
  for (const auto& [role, side] : {std::pair{sides.lhs_role, &sides.lhs}, std::pair{sides.rhs_role, &sides.rhs}}) {
    const DlogpStats r = dlogp_stats(*side, ref, in.contract->clip_interval());
    cell.metrics.push_back({role + "_vs_fp32.max_abs_dlogp", r.max_abs, std::nullopt, ""});
    cell.metrics.push_back({role + "_vs_fp32.mean_abs_dlogp", r.mean_abs, std::nullopt, ""});
  }
}

std::string strict_reason(const ParityCellInputs& in, const BitwiseTensor& bits) {
  std::string s = fmt::format("strict: d is not exactly 0 at {} of {} active tokens", bits.mismatches,
                              in.run->tokens.size());
  if (in.run->drift)
    s += fmt::format("; first drift: {}, {}", *in.run->drift_sequence, in.run->drift->text());
  return s;
}

}  // namespace

namespace model_detail {

Status add_dlogp_metrics(const Contract& c, const DlogpStats& s, Cell& cell) {
  const ContractDType exec = c.policy.execution_dtype;
  for (ChainMetric m : c.chain.gated_metrics) {
    auto th = c.chain_threshold(m, exec);
    if (!th) return th.error();
    cell.metrics.push_back({std::string(contract_name(m)), value_of(m, s), *th,
                            fmt::format("{}.metrics.{}.by_execution_dtype.{}.threshold", kChainBlock,
                                        contract_name(m), contract_name(exec))});
  }
  for (ChainMetric m : all_chain_metrics())
    if (std::find(c.chain.gated_metrics.begin(), c.chain.gated_metrics.end(), m) == c.chain.gated_metrics.end())
      cell.metrics.push_back({std::string(contract_name(m)), value_of(m, s), std::nullopt, ""});
  cell.metrics.push_back({"p99_abs_dlogp", s.p99_abs, std::nullopt, ""});
  cell.metrics.push_back({"p999_abs_dlogp", s.p999_abs, std::nullopt, ""});
  cell.metrics.push_back({"active_tokens", static_cast<double>(s.count), std::nullopt, ""});
  cell.metrics.push_back({"exact_zero_dlogp_tokens", static_cast<double>(s.exact_zero), std::nullopt, ""});
  return {};
}

std::vector<std::string> dlogp_red_reasons(const Contract& c, const DlogpStats& s, const Cell& cell,
                                           const std::function<std::string(std::int64_t)>& token_at) {
  std::vector<std::string> red;
  if (s.nonfinite > 0)
    red.push_back(fmt::format("NaN/Inf in dlogp or exp(dlogp) at {} token(s), first {} ({}.nan_inf_policy: {})",
                              s.nonfinite, token_at(s.first_nonfinite), kChainBlock, c.chain.nan_inf_policy));
  std::vector<std::string> failed;
  for (const MetricResult& m : cell.metrics)
    if (m.threshold && !passes(m)) failed.push_back(fmt::format("{} {:.6g} > {:.6g}", m.name, m.value, *m.threshold));
  const std::size_t gated = c.chain.gated_metrics.size();
  if (s.nonfinite == 0 && (c.chain.require_all ? !failed.empty() : failed.size() == gated)) {
    std::string text;
    for (const auto& f : failed) text += (text.empty() ? "" : ", ") + f;
    red.push_back(text);
  }
  return red;
}

Status check_compute_dtype(const Contract& c) {
  if (c.chain.compute_dtype != ContractDType::kFloat32)
    return bad_input(c.file, std::string(kChainBlock) + ".compute_dtype",
                     std::string(contract_name(c.chain.compute_dtype)) +
                         ": ws1check computes the chain aggregates in float32 (spec §8, upstream)");
  return {};
}

}  // namespace model_detail

namespace {

Result<Cell> judged_cell(const ParityCellInputs& in) {
  const Contract& c = *in.contract;
  if (Status st = model_detail::check_compute_dtype(c); !st) return st.error();
  Cell cell;
  const std::string_view rhs = in.run->batched_decode ? "batched_rollout_decode" : "rollout_decode";
  cell.id = fmt::format("chain/chain_parity/{}{}/{}/{}", in.fixture->protocol,
                        in.run->batched_decode ? "/batched_decode" : "", in.weights->label, in.backend.expected);
  cell.op = "qwen3_dense_chain";
  cell.op_class = "chain";
  cell.judgment = Judgment::kChainParity;
  cell.tier = in.fixture->protocol;
  cell.transform = fmt::format("teacher_forcing_vs_{}", rhs);
  cell.backend = in.backend;
  cell.kernel_id = in.kernel_id;
  cell.fixture = fixture_ref(in);
  cell.dtypes = {DType::kF32, DType::kF32};
  cell.threshold = CellThreshold{ThresholdMode::kMetric, std::nullopt, std::nullopt, std::string(kChainBlock)};

  const ParityRun& run = *in.run;
  if (run.candidate_failure) {
    cell.verdict = Verdict::kRed;
    cell.reason = "the candidate chain failed: " + run.candidate_failure->message();
    return cell;
  }
  auto sides = model_detail::contract_sides(c, run);
  if (!sides) return sides.error();
  if (run.tokens.empty()) {
    cell.verdict = Verdict::kRed;
    cell.reason = "empty active token set (" + std::string(kChainBlock) + ".empty_active_token_set: " +
                  c.chain.empty_active_token_set + ")";
    return cell;
  }
  const DlogpStats s = dlogp_stats(sides->lhs, sides->rhs, c.clip_interval());
  if (Status st = model_detail::add_dlogp_metrics(c, s, cell); !st) return st.error();
  add_reference_metrics(in, *sides, cell);
  std::vector<std::string> red =
      model_detail::dlogp_red_reasons(c, s, cell, [&](std::int64_t i) { return token_at(in, i); });
  if (run.strict) {
    cell.bitwise.push_back(judge_bitwise(fmt::format("logp {} vs {}", sides->lhs_role, sides->rhs_role),
                                         f32_vector(sides->lhs), f32_vector(sides->rhs), NanPolicy::kFail));
    if (!passed(cell.bitwise.back())) red.push_back(strict_reason(in, cell.bitwise.back()));
  }
  for (const auto& r : red) cell.reason += (cell.reason.empty() ? "" : "; ") + r;
  cell.verdict = red.empty() ? Verdict::kGreen : Verdict::kRed;
  if (cell.verdict == Verdict::kGreen && run.drift)  // d == 0 everywhere, hidden states not
    cell.reason = fmt::format("strict: d is exactly 0, but hidden states differ first at {}, {}",
                              *run.drift_sequence, run.drift->text());
  return cell;
}

}  // namespace

Result<Cell> parity_cell(const ParityCellInputs& in) {
  auto cell = judged_cell(in);
  // Weights the manifest does not pin: the cell says so first, with what was read.
  const ModelWeights& w = *in.weights;
  if (cell && !w.synthetic && !w.pinned) {
    const ModelConfig& k = w.config;
    std::string note = fmt::format(
        "{} (config: {} layers, hidden {}, intermediate {}, {} q / {} kv heads of {}, vocab {}; {})", not_gate_note(w),
        k.num_hidden_layers, k.hidden_size, k.intermediate_size, k.num_attention_heads, k.num_key_value_heads,
        k.head_dim, k.vocab_size, snapshot_record(w.snapshot));
    cell->reason = cell->reason.empty() ? note : note + "; " + cell->reason;
  }
  return cell;
}

}  // namespace ws1

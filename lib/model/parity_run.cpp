// Runs the parity protocol: per sequence, the candidate's teacher forcing and rollout decode
// (one sequence at a time, or all sequences of a logit scale as one batched decode), and the FP32
// reference chain's teacher forcing; with --strict, both candidate paths traced node by node as
// row digests (Trace::digests), the sequences whose d is not exactly zero or whose digests differ
// run again with full traces, and the earliest bitwise drift kept. (Full traces of every sequence
// would hold every hidden state of every layer on the host: gigabytes per sweep at the 8B dims.)
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <chrono>
#include <limits>
#include <map>

#include "ws1/parity.hpp"

namespace ws1 {
namespace {

// Seconds since `t0` (the phase times logged at info: where a long run spends its time).
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// (layer, node) order of two drifts: the earlier one in execution order.
bool earlier(const FirstDrift& a, const FirstDrift& b) {
  if (a.layer != b.layer) return a.layer < b.layer;
  return static_cast<int>(a.node) < static_cast<int>(b.node);
}

struct SequenceResult {
  std::vector<float> teacher_forcing, rollout, reference;
  Trace lhs_trace, rhs_trace;
};

Error candidate_error(const Error& e, const std::string& path) {
  Error out = e;
  out.where = path + ": " + out.where;
  return out;
}

// The sequences of `fixture` with logit scale `scale`, in fixture order.
std::vector<std::size_t> with_scale(const ParityFixture& fixture, double scale) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < fixture.sequences.size(); ++i)
    if (fixture.sequences[i].logit_scale == scale) out.push_back(i);
  return out;
}

// Rollout decode of the group, batched or one sequence at a time: the logps of each sequence of
// `group`, in group order. traces[k] (may be null) records sequence group[k]'s nodes.
Result<std::vector<std::vector<float>>> rollout(Chain& chain, const ParityFixture& f,
                                               const std::vector<std::size_t>& group, bool batched,
                                               const std::vector<Trace*>& traces) {
  std::vector<std::vector<float>> out;
  if (!batched) {
    for (std::size_t k = 0; k < group.size(); ++k) {
      const ParitySequence& s = f.sequences[group[k]];
      auto r = chain.rollout_decode(s.tokens, s.prompt_len, traces[k]);
      if (!r) return candidate_error(r.error(), "rollout decode, " + s.id);
      out.push_back(std::move(r).value());
    }
    return out;
  }
  std::vector<std::vector<std::int64_t>> tokens;
  std::vector<std::int64_t> prompts;
  for (std::size_t i : group) {
    tokens.push_back(f.sequences[i].tokens);
    prompts.push_back(f.sequences[i].prompt_len);
  }
  auto r = chain.rollout_decode_batched(tokens, prompts, traces);
  if (!r) return candidate_error(r.error(), fmt::format("batched rollout decode of {} sequences", group.size()));
  return std::move(r).value();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::bit_cast<std::uint32_t>(x) == std::bit_cast<std::uint32_t>(y);
         });
}

// True when the digest traces differ somewhere, or some completion token's teacher-forcing and
// rollout logp differ in any bit (NaN included: a NaN is never exactly zero d).
bool drifts(const ParitySequence& s, const SequenceResult& r) {
  if (first_drift(r.lhs_trace, r.rhs_trace)) return true;
  const auto p = static_cast<std::size_t>(s.prompt_len);
  for (std::size_t k = 0; k < r.rollout.size(); ++k)
    if (!(r.teacher_forcing[p - 1 + k] - r.rollout[k] == 0.0f)) return true;
  return false;
}

// --strict: the group runs again (in the same decode mode, so a batched decode keeps its batch)
// with both paths fully traced for the sequences that drift (digests or d). The traced run must
// reproduce the untraced logps bit for bit (the chain is deterministic); a difference is an
// error, not a drift localised against the wrong data.
Status trace_drifting(Chain& lhs, Chain& rhs, const ParityFixture& f, const std::vector<std::size_t>& group,
                      bool batched, std::vector<SequenceResult>& results) {
  std::vector<Trace*> traces(group.size(), nullptr);
  std::size_t traced = 0;
  for (std::size_t k = 0; k < group.size(); ++k) {
    const std::size_t i = group[k];
    if (!drifts(f.sequences[i], results[i])) continue;
    results[i].lhs_trace = Trace{};
    results[i].rhs_trace = Trace{};
    traces[k] = &results[i].rhs_trace;
    ++traced;
    auto tf = lhs.teacher_forcing(f.sequences[i].tokens, &results[i].lhs_trace);
    if (!tf) return candidate_error(tf.error(), "traced teacher forcing, " + f.sequences[i].id);
    if (!same_bits(*tf, results[i].teacher_forcing))
      return environment_error("parity --strict, " + f.sequences[i].id,
                               "the traced teacher forcing did not reproduce the untraced logps bit for bit");
  }
  spdlog::info("strict: {} of {} sequences drift (digests or d); tracing them in full", traced, group.size());
  if (traced == 0) return {};
  auto ro = rollout(rhs, f, group, batched, traces);
  if (!ro) return ro.error();
  for (std::size_t k = 0; k < group.size(); ++k)
    if (!same_bits((*ro)[k], results[group[k]].rollout))
      return environment_error("parity --strict, " + f.sequences[group[k]].id,
                               "the traced rollout decode did not reproduce the untraced logps bit for bit");
  return {};
}

}  // namespace

Result<ParityRun> run_parity(const ModelWeights& base, Backend& backend, const OpContext& ctx,
                             const ParityFixture& fixture, const ParityOptions& options) {
  ParityRun run;
  run.strict = options.strict;
  run.batched_decode = options.batched_decode;
  std::vector<SequenceResult> results(fixture.sequences.size());
  std::vector<double> scales;
  for (const ParitySequence& s : fixture.sequences)
    if (std::find(scales.begin(), scales.end(), s.logit_scale) == scales.end()) scales.push_back(s.logit_scale);
  for (double scale : scales) {
    auto weights = with_logit_scale(base, scale);
    if (!weights) return weights.error();
    const std::vector<std::size_t> group = with_scale(fixture, scale);
    auto t0 = std::chrono::steady_clock::now();
    Chain candidate(*weights, backend, ctx);
    spdlog::info("logit scale {}: candidate chain ready in {:.2f} s", scale, since(t0));
    t0 = std::chrono::steady_clock::now();
    std::int64_t decode_steps = 0;
    for (std::size_t i : group) {
      const ParitySequence& s = fixture.sequences[i];
      if (options.strict) {
        results[i].lhs_trace = Trace::digests();
        results[i].rhs_trace = Trace::digests();
      }
      auto tf = candidate.teacher_forcing(s.tokens, options.strict ? &results[i].lhs_trace : nullptr);
      if (!tf) {
        run.candidate_failure = candidate_error(tf.error(), "teacher forcing, " + s.id);
        return run;
      }
      results[i].teacher_forcing = std::move(tf).value();
      decode_steps += static_cast<std::int64_t>(s.tokens.size()) - s.prompt_len - 1;
    }
    spdlog::info("logit scale {}: teacher forcing of {} sequences in {:.2f} s", scale, group.size(), since(t0));
    t0 = std::chrono::steady_clock::now();
    std::vector<Trace*> digests(group.size(), nullptr);
    if (options.strict)
      for (std::size_t k = 0; k < group.size(); ++k) digests[k] = &results[group[k]].rhs_trace;
    Chain rollout_chain = options.rollout_rms_norm_order ? candidate.with_rms_norm_order(*options.rollout_rms_norm_order)
                                                         : candidate;
    auto decoded = rollout(rollout_chain, fixture, group, options.batched_decode, digests);
    if (!decoded) {
      run.candidate_failure = decoded.error();
      return run;
    }
    for (std::size_t k = 0; k < group.size(); ++k) results[group[k]].rollout = std::move((*decoded)[k]);
    const double rollout_s = since(t0);
    spdlog::info("logit scale {}: rollout decode in {:.2f} s ({} decode steps, {:.1f} ms per step)", scale,
                 rollout_s, decode_steps, decode_steps > 0 ? 1e3 * rollout_s / static_cast<double>(decode_steps) : 0.0);
    if (options.strict)
      if (Status st = trace_drifting(candidate, rollout_chain, fixture, group, options.batched_decode, results); !st) {
        run.candidate_failure = st.error();
        return run;
      }
    if (options.reference) {
      t0 = std::chrono::steady_clock::now();
      Chain reference = Chain::reference(*weights, ctx);
      for (std::size_t i : group) {
        auto r = reference.teacher_forcing(fixture.sequences[i].tokens);
        if (!r) return r.error();
        results[i].reference = std::move(r).value();
      }
      spdlog::info("logit scale {}: FP32 reference chain in {:.2f} s", scale, since(t0));
    }
  }
  for (std::size_t si = 0; si < fixture.sequences.size(); ++si) {
    const ParitySequence& seq = fixture.sequences[si];
    SequenceResult& r = results[si];
    if (options.strict)
      if (auto drift = first_drift(r.lhs_trace, r.rhs_trace); drift && (!run.drift || earlier(*drift, *run.drift))) {
        run.drift = drift;
        run.drift_sequence = seq.id;
      }
    // Teacher forcing scores rows [0, L-1); the completion tokens are rows [P-1, L-1).
    const auto p = static_cast<std::size_t>(seq.prompt_len);
    for (std::size_t k = 0; k < r.rollout.size(); ++k) {
      TokenLogp t;
      t.sequence = static_cast<std::int64_t>(si);
      t.position = static_cast<std::int64_t>(p + k);
      t.token = seq.tokens[p + k];
      t.teacher_forcing = r.teacher_forcing[p - 1 + k];
      t.rollout_decode = r.rollout[k];
      t.reference = options.reference ? r.reference[p - 1 + k] : std::numeric_limits<float>::quiet_NaN();
      run.tokens.push_back(t);
    }
  }
  return run;
}

}  // namespace ws1

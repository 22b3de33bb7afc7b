// Chain-level logprob parity (spec §8, DESIGN §6a): the protocol (which tokens, which two paths),
// the metrics over d = lhs - rhs, and the verdict as an evidence cell.
//
// lhs = teacher forcing (training-style: one full forward per sequence), rhs = rollout decode
// (inference-style: prefill the prompt, then one decode step per token against the KV cache),
// as the contract's report kind train_infer_logprob_parity assigns them; d = lhs - rhs exactly as
// chain_logprob_aggregates.dlogp_definition says (upstream computes rollout - teacher forcing,
// NOTES §e; docs/parity.md). Active tokens are the completion tokens: the logp of
// tokens[prompt_len .. L) of every sequence. The FP32 reference chain scores the same tokens by
// teacher forcing, so each side's distance from FP32 is reported too.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ws1/backend.hpp"
#include "ws1/contract.hpp"
#include "ws1/evidence.hpp"
#include "ws1/manifest.hpp"
#include "ws1/model.hpp"

namespace ws1 {

// ---- protocol (parity_fixture.cpp, parity_sweep.cpp) ------------------------------------------

struct ParitySequence {
  std::string id;  // "s0", or "seed1/p16r32/x4/q0" in the sweep
  std::vector<std::int64_t> tokens;
  std::int64_t prompt_len = 0;
  double logit_scale = 1.0;  // the weights it was scored with (sweep: several scales)
  std::int64_t active() const { return static_cast<std::int64_t>(tokens.size()) - prompt_len; }
};

struct ParityFixture {
  std::string protocol;  // "manifest" | "sweep"
  std::uint64_t seed = 0;
  std::vector<ParitySequence> sequences;
  std::int64_t active_tokens() const;
  // One int64 tensor per sequence, "<id>.tokens" [L], and "<id>.prompt_len" [1].
  std::vector<NamedTensor> tensors() const;
  // XXH3-128 (ws1/fixture.hpp's fixture_hash) over the tensors, with "chain/<protocol>" and the seed.
  std::string hash() const;
};

// The gate's fixture (DESIGN §6a): the manifest's samples in primary_matrix.sample_ids order,
// their fixture tokens and prompt lengths (s0..s3, 27 active tokens in ws1-qwen3-8b-dense).
ParityFixture manifest_parity_fixture(const Manifest& manifest);

// Every token inside [0, vocab_size) and every sequence with 1 <= prompt_len < length: bad
// input naming the sequence and token otherwise.
Status check_fixture(const ParityFixture& fixture, const ModelConfig& config, const std::string& file);

// The §8.1 recalibration sweep: for every seed, (prompt, response) length pair and logit scale,
// `sequences` sequences whose prompts are seeded uniform tokens and whose responses the candidate
// chain samples itself (rollout with the seeded sampler at `temperature`; 0 = greedy).
struct SweepOptions {
  std::vector<std::uint64_t> seeds;
  std::vector<std::pair<std::int64_t, std::int64_t>> lengths;  // (prompt_len, response_len)
  std::vector<double> logit_scales;                            // powers of two
  std::int64_t sequences = 1;
  double temperature = 1.0;
};

// ---- running (parity_run.cpp) -------------------------------------------------------------------

// One active token.
struct TokenLogp {
  std::int64_t sequence = 0;   // index into fixture.sequences
  std::int64_t position = 0;   // position of the scored token in its sequence
  std::int64_t token = 0;
  float teacher_forcing = 0;   // candidate, training-style
  float rollout_decode = 0;    // candidate, inference-style
  float reference = 0;         // FP32 reference chain (teacher forcing); NaN when not run
};

struct ParityRun {
  std::vector<TokenLogp> tokens;      // in sequence order, then position
  std::optional<Error> candidate_failure;  // the candidate chain failed (a red cell)
  bool strict = false;
  bool batched_decode = false;
  std::optional<FirstDrift> drift;    // strict: where the two paths first differ bitwise
  std::optional<std::string> drift_sequence;
};

struct ParityOptions {
  bool strict = false;     // record every node and localise the first bitwise drift
  bool reference = true;   // also score with the FP32 reference chain
  // rhs = batched rollout decode: the sequences of one logit scale decode together, several
  // lengths in flight (Chain::rollout_decode_batched).
  bool batched_decode = false;
  // rhs in another RMSNorm rounding order than lhs (ctx's): the two sides are then different
  // numerical paths, as a trainer and an inference engine are (spec §8.1's distribution).
  std::optional<RmsNormOrder> rollout_rms_norm_order;
};

// Runs both paths of every sequence on `backend` (and the reference), each sequence with
// `weights` at its logit scale (with_logit_scale). A failure of the candidate is recorded in the
// run (the cell goes red); a failure of the reference or bad input is an Error.
Result<ParityRun> run_parity(const ModelWeights& weights, Backend& backend, const OpContext& ctx,
                             const ParityFixture& fixture, const ParityOptions& options);

// The sweep's fixture: prompts drawn from the seeds, responses sampled by the candidate chain.
// A candidate failure while sampling is an Error with code kRed.
Result<ParityFixture> sweep_parity_fixture(const ModelWeights& weights, Backend& backend,
                                           const OpContext& ctx, const SweepOptions& options);

// ---- metrics (parity_metrics.cpp) ---------------------------------------------------------------

// Over d_i = lhs_i - rhs_i, in float32 as chain_logprob_aggregates.compute_dtype declares
// (d, exp(d) and exp(d) - 1 - d per token in float32; sums in double; means rounded to double):
struct DlogpStats {
  std::int64_t count = 0;
  std::int64_t nonfinite = 0;   // tokens whose d or exp(d) is NaN or infinite (a hard failure)
  std::int64_t exact_zero = 0;  // tokens with d == 0
  double max_abs = 0;           // max |d|
  double mean_abs = 0;          // mean |d|
  double approx_kl0 = 0;        // mean(exp(d) - 1 - d)
  double clipfrac0 = 0;         // mean(1[exp(d) outside clip_interval])
  double p99_abs = 0, p999_abs = 0;  // nearest-rank percentiles of |d| (ws1/judge.hpp's rule)
  std::int64_t first_nonfinite = -1;  // its index, -1 when none
};
DlogpStats dlogp_stats(std::span<const float> lhs, std::span<const float> rhs,
                       std::pair<double, double> clip_interval);

// ---- logprobs measured elsewhere (parity_logprobs.cpp) --------------------------------------------

// Per-token logprobs of the two sides from outside ws1check — e.g. the trainer's teacher forcing
// and the inference engine's rollout that RL frameworks already log — lhs and rhs in the
// contract's roles (lhs training-style, rhs inference-style as the shipped contract names them),
// d = lhs - rhs.
struct LogprobPairs {
  std::string source;  // the --logprobs argument
  std::vector<float> lhs, rhs;
  std::vector<std::int64_t> sequence, position;  // each empty, or one per token
};

// The backend id of such a cell (nothing of ws1check's ran).
inline constexpr std::string_view kLogprobsBackend = "logprobs_file";

// Reads FILE.safetensors (lhs, rhs float32 [N]; optional sequence, position int64 [N]; no other
// tensor), FILE.jsonl (one object per non-blank line with numbers "lhs", "rhs" and optional
// integers "sequence", "position" — each on every line or on none — and no other key; numbers
// rounded to float32, the aggregates' dtype) or LHS.npy,RHS.npy (two .npy files, version 1-3,
// '<f4', C order, shape (N,), one length). Bad input names the file (and line) and the field.
Result<LogprobPairs> read_logprob_pairs(const std::string& spec);

// lhs, rhs (float32) and the sequence / position given, as tensors (the cell's fixture).
std::vector<NamedTensor> logprob_pair_tensors(const LogprobPairs& pairs);

// Token counts of |d| (float32): 0, decades (0,1e-08] .. (1e-01,1], (1,inf), nan/inf.
std::vector<std::pair<std::string, std::int64_t>> abs_dlogp_histogram(std::span<const float> lhs,
                                                                       std::span<const float> rhs);

// The chain_parity cell of such pairs: the contract's gated metrics and verdict as for a chain
// run (parity_cell), the same reported statistics, and the histogram as metrics
// "abs_dlogp_tokens<bin>"; `strict` also requires d == 0 at every token. Red on an empty set.
Result<Cell> logprob_pairs_cell(const Contract& contract, const LogprobPairs& pairs, bool strict);

// ---- verdict (parity_cell.cpp) ------------------------------------------------------------------

struct ParityCellInputs {
  const Contract* contract = nullptr;
  const ModelWeights* weights = nullptr;
  const ParityFixture* fixture = nullptr;
  const ParityRun* run = nullptr;
  BackendIds backend;
  std::string kernel_id;
};

// The chain_parity cell: the contract's gated metrics (thresholds for its execution dtype; all
// must pass when require_all), mean_abs_dlogp, P99, P99.9 and each side's distance from the FP32
// reference reported; red on a candidate failure, NaN/Inf, an empty active set, a metric over
// its threshold, and (strict) d not exactly zero everywhere, with the first drift in the reason.
// Error when the contract computes the aggregates in another dtype than float32 or lacks a
// threshold.
Result<Cell> parity_cell(const ParityCellInputs& in);

// The per-token record beside the evidence: teacher_forcing_logp, rollout_decode_logp,
// reference_logp, dlogp (= lhs - rhs by the contract's roles) (float32 [N]), sequence, position,
// token (int64 [N]), and metadata (fixture and weights identity, roles, sign).
Result<std::vector<NamedTensor>> parity_token_tensors(const ParityCellInputs& in);
std::map<std::string, std::string> parity_token_metadata(const ParityCellInputs& in);

}  // namespace ws1

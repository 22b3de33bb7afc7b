// C6/C7 decode-vs-prefill attention cases (upstream's kv_consistency, NOTES §d; `ws1check parity
// --fixture kv`): attention alone at the model's head shape (Hq, Hkv, D from its config), for
// each case
//   prefill       one attention call with every query row (causal, bottom-right; the sequences
//                 of a batch padded right or left, key_mask false on the pads);
//   direct decode per sequence, one call per position t with Sq = 1 against the keys [0, t],
//                 written into a KvCache one position at a time and read back from it;
// then decode rows against prefill rows (bitwise, reported; judged by the contract's attention
// forward_accuracy row), the KV cache read back bitwise against what was written (C7), and a
// logprob probe: the attention rows [Hq*D] through linear_logp with a fixed random head
// [kProbeVocab, Hq*D], scoring tokens[t + 1] from row t over the second half of each sequence,
// judged by the chain aggregates exactly as the parity cell (lhs = prefill as teacher forcing,
// rhs = direct decode as rollout decode, by the contract's roles).
// Inputs come from the fixture generator's counter-based streams (ws1/fixture.hpp), a pure
// function of (manifest seed, case, sequence, tensor): not upstream's torch generator values.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ws1/backend.hpp"
#include "ws1/evidence.hpp"
#include "ws1/manifest.hpp"
#include "ws1/parity.hpp"
#include "ws1/runner.hpp"

namespace ws1 {

// The probe head's vocabulary (upstream's: tokens mod 64).
inline constexpr std::int64_t kProbeVocab = 64;

enum class KvPadding { kNone, kRight, kLeft };

struct KvCase {
  std::string name;                   // "decode-b1-short", ...
  std::vector<std::int64_t> lengths;  // logical length of each sequence of the batch
  KvPadding padding = KvPadding::kNone;
  std::int64_t padded_len = 0;        // prefill's S (the longest length unless padded further)
};

// The cases, from the manifest's fixtures block: decode-b1-short (short_full_model_fixture's
// seq_len), decode-b1-long (long_full_model_fixture's), decode-b1-primary-s3 (primary_seq_len),
// decode-bn-varlen (varlen_seq_lens right-padded to the longest), decode-bn-padded-<mode> for
// each of padding.modes (varlen_seq_lens padded to primary_padded_len). Bad input (naming the
// manifest and field) for a length below 2, a padded length below the longest, an unknown mode.
Result<std::vector<KvCase>> kv_consistency_cases(const Manifest& manifest);

struct KvSequence {
  std::string id;                    // "s0", ...
  Tensor q, k, v;                    // [L, Hq, D], [L, Hkv, D], [L, Hkv, D] bf16, token-major
  std::vector<std::int64_t> tokens;  // [L], uniform in [0, kProbeVocab)
  std::int64_t prompt_len = 0;       // L / 2: the probe scores tokens [prompt_len, L)
};

// One case's inputs: streams "kv_consistency/<case>/<sequence>/{q,k,v,tokens}" N(0,1) (tokens
// uniform) and "kv_consistency/probe_head" N(0,1) * 2^-round(log2 sqrt(Hq*D)) of `seed`.
struct KvCaseInputs {
  KvCase kv_case;
  std::int64_t hq = 0, hkv = 0, d = 0;
  std::uint64_t seed = 0;
  std::vector<KvSequence> sequences;
  Tensor probe_head;  // [kProbeVocab, Hq*D] bf16 (linear_logp's weight)
  std::int64_t rows() const;  // sum of the lengths: the query rows compared
  std::string shape_label() const;  // "hq32_hkv8_d128"
  std::vector<NamedTensor> tensors() const;  // "<seq>.q", .k, .v, .tokens, then "probe_head"
  std::string hash() const;  // fixture_hash("chain/kv_consistency/<case>", seed, tensors())
};
Result<KvCaseInputs> kv_case_inputs(const KvCase& kv_case, const ModelConfig& config, std::uint64_t seed,
                                    unsigned threads = 0);

// What the two paths produced; rows are (sequence, position) in sequence order, then position.
struct KvCaseRun {
  Tensor prefill, decode;               // attention rows [N, Hq, D] bf16
  Tensor written_k, written_v;          // [N, Hkv, D]: what went into the caches
  Tensor read_k, read_v;                // [N, Hkv, D]: read back after the last step
  ParityFixture probe_fixture;          // protocol "kv_consistency/<case>": tokens, prompt_len
  ParityRun probe;                      // teacher_forcing = prefill, rollout_decode = decode
  std::optional<Error> candidate_failure;  // an op failed or gave the wrong dtype/shape
};

// Runs both paths of one case on `backend` (every op through Backend::forward). A candidate
// failure is recorded in the run (red cells); anything else is an Error.
Result<KvCaseRun> run_kv_case(const KvCaseInputs& in, Backend& backend, const OpContext& ctx);

struct KvCellInputs {
  const RunContext* run = nullptr;  // contract, arch (the tolerance row), expected backend
  std::string backend;              // the backend that ran
  std::string attention_kernel_id, probe_kernel_id;
  bool strict = false;              // also require decode == prefill bitwise (rows and logps)
  RuntimeReadback readback;         // the backend's precision state (Backend::readback)
};

// Two cells per case:
//   chain/kv_consistency/<case>/decode_vs_prefill/<shape>/<backend>: forward_accuracy of op
//     attention, tier kv_consistency: the decode rows judged against the prefill rows (widened
//     exactly to FP32) with the contract's attention forward_accuracy row; the cache read-back
//     as bitwise tensors; bitwise decode-vs-prefill counts as reported metrics (and, strict, a
//     bitwise tensor that must be equal).
//   chain/kv_consistency/<case>/logprob_probe/<shape>/<backend>: parity_cell()'s chain_parity
//     judgment of the probe logps.
Result<std::vector<Cell>> kv_case_cells(const KvCellInputs& cells, const KvCaseInputs& in, const KvCaseRun& run);

}  // namespace ws1

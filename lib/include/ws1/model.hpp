// The Qwen3 dense decoder of chain-level parity (spec §8, DESIGN §6a, NOTES §e), built from the
// catalogue's ops: its configuration, its weights (synthetic from a seed, or a local Hugging Face
// snapshot verified against the manifest's pinned shard hashes), the KV cache of rollout decode,
// and the chain that runs the ops either on a Backend (the candidate) or through every op's FP32
// reference.
//
// One step of the chain scores a block of tokens at positions [cache length, + n):
//   embedding -> per layer [rms_norm -> q/k/v det_gemm -> qk_norm -> rope -> append k, v to the
//   cache -> attention (the block's queries against every cached key; causal, bottom-right) ->
//   o det_gemm -> residual add -> rms_norm -> gate/up det_gemm -> swiglu -> down det_gemm ->
//   residual add] -> final rms_norm -> linear_logp.
// Precision plan (upstream's, NOTES §e): the residual stream is FP32 (each sublayer's bf16
// output is added in FP32; it is rounded to bf16 where rms_norm takes it); the scores are FP32
// and logp comes from them: the lm_head and the logp are linear_logp, the catalogue's fused op
// whose logits stay FP32 (lm_head's public logits are bf16). Everything else passes the bf16
// tensors the ops' contracts define. The reference chain runs each op's reference_forward on the
// same handoffs: its FP32 outputs are rounded to bf16 where the next op takes bf16 (every op
// input is bf16 by the catalogue's definition), kept FP32 into the residual stream and the logp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ws1/backend.hpp"
#include "ws1/error.hpp"
#include "ws1/manifest.hpp"  // ModelConfig, WeightSnapshot
#include "ws1/op.hpp"
#include "ws1/tensor.hpp"

namespace ws1 {

// ---- configuration (lib/model/config.cpp) --------------------------------------------------

// The configs `--model synthetic:<name>` knows: "tiny" (2 layers, hidden 64, 4 q / 2 kv heads,
// head_dim 16, intermediate 128, vocab 256: CI) and "qwen3-8b" (Qwen/Qwen3-8B's config.json).
std::span<const std::string_view> synthetic_config_names();
Result<ModelConfig> synthetic_config(std::string_view name);

// A config the chain can run: positive sizes, kv heads dividing the query heads, an even
// head_dim, SiLU, no attention bias, an untied lm_head, no rope scaling, finite eps and theta.
// Errors name `file` and the field.
Status check_config(const ModelConfig& config, const std::string& file);

// The first config_fingerprint field in which two configs differ ("hidden_size: 64 against
// 4096"), or nullopt when they describe the same architecture.
std::optional<std::string> config_difference(const ModelConfig& a, const ModelConfig& b);

// The op settings of the model (eps, theta, heads, head_dim) on top of `run` (the contract's
// declarations: rms_norm order, det_gemm leaf, threads).
OpContext model_op_context(const ModelConfig& config, const OpContext& run);

// ---- weights (synthetic_weights.cpp, hf_checkpoint.cpp) ---------------------------------------

// One decoder layer. Projection weights are det_gemm's right operand b [in, out] (Hugging
// Face's [out, in] transposed once at load time); norm weights are vectors.
struct LayerWeights {
  Tensor input_norm, post_norm;  // [H]
  Tensor q_norm, k_norm;         // [D]
  Tensor q, k, v;                // [H, Hq*D], [H, Hkv*D], [H, Hkv*D]
  Tensor o;                      // [Hq*D, H]
  Tensor gate, up;               // [H, I]
  Tensor down;                   // [I, H]
};

// All tensors bf16.
struct ModelWeights {
  ModelConfig config;
  Tensor embed;       // [V, H]
  std::vector<LayerWeights> layers;
  Tensor final_norm;  // [H]
  Tensor lm_head;     // [V, H] (linear_logp's weight, Hugging Face layout)
  std::string label;  // "synthetic:tiny", "hf:<snapshot directory>", or "hf-unpinned:<directory>"
  bool synthetic = true;
  // A snapshot verified against the manifest's pins. Synthetic weights and a snapshot opened
  // unpinned are not: neither is the WS1 chain gate (not_gate_note says why).
  bool pinned = false;
  // The snapshot's index and shards: as pinned, or, unpinned, as read (hashes computed).
  WeightSnapshot snapshot;
  // "xxh3-128:<hex>" over the synthetic tensors, or "sha256-of-sorted-shard-records-v1:<hex>",
  // the manifest's content hash of the verified shards.
  std::string hash;
};

// Hugging Face Qwen3 tensor names.
std::string hf_layer_tensor(std::int64_t layer, std::string_view suffix);  // "model.layers.3.mlp.up_proj.weight"
std::vector<std::string> hf_tensor_names(const ModelConfig& config);        // every tensor the chain needs

struct SyntheticOptions {
  std::uint64_t seed = 0;
  unsigned threads = 0;
};

// Weights from the counter-based generator (docs/fixtures.md): every tensor N(0, 1) from the
// stream "synthetic/<hf name>" of `seed`, projections and lm_head scaled by 2^-round(log2
// sqrt(in)) (a trained weight's scale, decisions D11), norm weights 1 + N(0,1)/8 rounded to bf16
// (not ones, so the two rms_norm orders differ), embedding unit scale. Labelled synthetic.
Result<ModelWeights> synthetic_weights(const ModelConfig& config, std::string_view name,
                                       const SyntheticOptions& options);

// The same weights with lm_head multiplied by `scale`, a power of two (exact in bf16 unless a
// value overflows, which is refused): the logits' scale, for the sweep. Every other tensor is
// shared. The label and hash say "lm_head x<scale>".
Result<ModelWeights> with_logit_scale(const ModelWeights& weights, double scale);

// config.json of a snapshot directory (Qwen3ForCausalLM / model_type qwen3).
Result<ModelConfig> read_hf_config(const std::filesystem::path& dir);

// A local Hugging Face snapshot: config.json, model.safetensors.index.json and its shards.
// Before any tensor is read, the index's SHA-256 must equal pins.index_sha256 and the index's
// shards must be exactly the pinned ones, each with its pinned size and SHA-256. Then every
// tensor the chain needs must be in the index, in its shard, bf16, with the config's shape.
// Any failure is bad input (exit 2) naming the file and the tensor or shard.
Result<ModelWeights> load_hf_checkpoint(const std::filesystem::path& dir,
                                        const WeightSnapshot& pins);
// Any Qwen3 dense snapshot (parity --model PATH --unpinned): the same checks of config.json and
// of every tensor, no pins; the index's and each shard's SHA-256 and size are computed and kept
// in `snapshot` (content hash as the manifest's algorithm). Labelled "hf-unpinned:<dir>".
Result<ModelWeights> load_hf_checkpoint_unpinned(const std::filesystem::path& dir);

// "" for pinned weights; else the sentence a run on these weights carries (table, evidence,
// JUnit, HTML): "synthetic weights: not the WS1 chain gate" or "weights not pinned by the
// manifest: not the WS1 chain gate".
std::string not_gate_note(const ModelWeights& w);
// The snapshot's record for an artifact: "index <file> sha256 <hex>; <shard> sha256 <hex> (<n>
// bytes); ...".
std::string snapshot_record(const WeightSnapshot& s);

// ---- KV cache (kv_cache.cpp) ------------------------------------------------------------------

// Per layer, the bf16 keys (after qk_norm and rope) and values of every position so far.
class KvCache {
 public:
  KvCache(std::int64_t layers, std::int64_t kv_heads, std::int64_t head_dim);
  std::int64_t length() const { return length_; }  // committed positions
  // Appends the rows of the positions [length(), length() + n) of `layer`: k and v [n, Hkv, D].
  void append(std::int64_t layer, const Tensor& k, const Tensor& v);
  // After every layer appended the same n rows: length() += n.
  void commit(std::int64_t n);
  // Keys or values of `layer` for positions [0, count) as a contiguous [1, Hkv, count, D] tensor.
  Tensor keys(std::int64_t layer, std::int64_t count) const;
  Tensor values(std::int64_t layer, std::int64_t count) const;

 private:
  Tensor gather(const std::vector<std::vector<std::uint16_t>>& heads, std::int64_t count) const;
  std::int64_t kv_heads_, head_dim_, length_ = 0;
  // [layer][kv head] -> positions x D bf16 bits, appended in position order.
  std::vector<std::vector<std::vector<std::uint16_t>>> k_, v_;
};

// ---- trace for first-drift localisation (trace.cpp) -----------------------------------------

// The chain's nodes in execution order within a layer (embedding before layer 0, final_norm
// and logp after the last).
enum class ChainNode {
  kEmbedding, kInputNorm, kQProj, kKProj, kVProj, kQNorm, kKNorm, kQRope, kKRope, kAttention,
  kOProj, kAttnResidual, kPostNorm, kGateProj, kUpProj, kSwiglu, kDownProj, kMlpResidual,
  kFinalNorm, kLogp,
};
std::string_view chain_node_name(ChainNode n);  // "embedding", "q_proj", "attention", ...

// Where two traces first differ bitwise.
struct FirstDrift {
  std::int64_t layer = -1;  // -1: embedding; num_hidden_layers: final_norm / logp
  ChainNode node = ChainNode::kEmbedding;
  std::int64_t position = 0;   // the first differing token position of that node
  std::int64_t element = 0;    // the first differing element of that row; -1: digests only
  std::int64_t differing = 0;  // differing elements (digest traces: rows) of that node, all positions
  double lhs = 0, rhs = 0;     // the values at (position, element)
  std::string text() const;    // "layer 0 attention, position 8 element 3: 0.125 against 0.1249"
};

// Every node's output rows by token position, as raw bits (what the two paths compare), or, in
// digest mode, as one XXH3-64 digest per row: at the 8B dims a full trace is ~0.5 GB per side
// and sequence, a digest trace ~0.5 MB, enough to say whether and where two paths differ (the
// element detail then comes from a full trace of the rerun).
class Trace {
 public:
  Trace() = default;
  static Trace digests() {
    Trace t;
    t.digest_ = true;
    return t;
  }
  bool digest_only() const { return digest_; }
  // Rows [first, first + rows) of node (layer, node): `t` holds one row per position in its
  // first dimension (bf16 or float32).
  void record(std::int64_t layer, ChainNode node, std::int64_t first, const Tensor& t);
  // The first node (execution order), then position, where lhs and rhs hold different bits,
  // over the positions both recorded; nullopt when they agree everywhere.
  friend std::optional<FirstDrift> first_drift(const Trace& lhs, const Trace& rhs);

 private:
  struct Rows {
    DType dtype = DType::kBF16;
    std::int64_t width = 0;
    std::map<std::int64_t, std::vector<std::byte>> by_position;
  };
  std::map<std::pair<std::int64_t, int>, Rows> nodes_;  // (layer, node) in execution order
  bool digest_ = false;
};
std::optional<FirstDrift> first_drift(const Trace& lhs, const Trace& rhs);

// ---- the chain (chain.cpp) ----------------------------------------------------------------------

class Chain {
 public:
  // The candidate: every op through `backend`. Its outputs must have the op's declared dtype
  // and the expected shape; anything else is an Error naming the layer, node and op.
  Chain(const ModelWeights& weights, Backend& backend, const OpContext& ctx);
  // The FP32 reference: every op's reference_forward (see the file comment).
  static Chain reference(const ModelWeights& weights, const OpContext& ctx);

  // Runs tokens [n] at positions [cache.length(), + n) through the embedding and every layer
  // (their k and v appended to the cache, which is then committed) and the final rms_norm:
  // returns that [n, H] hidden (bf16; float32 on the reference). With a trace, every node's rows
  // are recorded.
  Result<Tensor> forward(KvCache& cache, std::span<const std::int64_t> tokens, Trace* trace = nullptr);
  // linear_logp of targets[i] from hidden row i (hidden from forward(), row 0 at position
  // `first`): float32 logps; recorded as node logp.
  Result<std::vector<float>> score(const Tensor& hidden, std::int64_t first,
                                   std::span<const std::int64_t> targets, Trace* trace = nullptr);
  // The lm_head logits [1, V] of one hidden row (bf16 on the candidate): what a sampler reads.
  Result<Tensor> logits(const Tensor& hidden_row);

  // forward(), then score() of targets from rows [score_from, score_from + targets.size()).
  Result<std::vector<float>> step(KvCache& cache, std::span<const std::int64_t> tokens,
                                  std::span<const std::int64_t> targets, std::int64_t score_from,
                                  Trace* trace = nullptr);

  // Teacher forcing: one full forward of `tokens` (a fresh cache); logp of tokens[t + 1] from
  // row t for t in [0, n - 1).
  Result<std::vector<float>> teacher_forcing(std::span<const std::int64_t> tokens,
                                             Trace* trace = nullptr);
  // Rollout decode: prefill tokens [0, prompt_len) (scoring tokens[prompt_len] from the last
  // prompt row), then one decode step per token t in [prompt_len, n - 1) against the cache,
  // scoring tokens[t + 1]. Returns the n - prompt_len completion logps.
  Result<std::vector<float>> rollout_decode(std::span<const std::int64_t> tokens,
                                            std::int64_t prompt_len, Trace* trace = nullptr);

  // One decode step of several sequences at once: tokens[i] at position caches[i]->length() of
  // its own cache, B = tokens.size() rows through every op (attention: q [B, Hq, 1, D] against
  // the caches right-padded to the longest, key_mask false on the pads). Returns the [B, H]
  // final hidden; traces (empty, or one per row, entries may be null) get each row.
  Result<Tensor> forward_batch(std::span<KvCache* const> caches, std::span<const std::int64_t> tokens,
                               std::span<Trace* const> traces = {});
  // Batched rollout decode: every sequence prefilled on its own, then decode steps that run all
  // the sequences still decoding as one batch, so sequences of different lengths are in flight
  // together. Returns each sequence's completion logps, as rollout_decode.
  Result<std::vector<std::vector<float>>> rollout_decode_batched(
      std::span<const std::vector<std::int64_t>> sequences, std::span<const std::int64_t> prompt_lens,
      std::span<Trace* const> traces = {});

  // The same chain (same weights, kept resident once) with its RMSNorm ops in another rounding
  // order: a path that is not bit-identical to this one (parity's --rollout-rms-norm-order).
  Chain with_rms_norm_order(RmsNormOrder order) const;

  KvCache new_cache() const;
  const ModelConfig& config() const { return weights_->config; }
  bool is_reference() const { return backend_ == nullptr; }

 private:
  Chain(const ModelWeights& weights, Backend* backend, const OpContext& ctx);
  struct Block;  // chain_block.hpp: one step's working state
  Result<Tensor> call(const Block& b, std::int64_t layer, ChainNode node, std::string_view op,
                      const Tensors& in, const Shape& out_shape) const;
  Result<Tensor> attend(const Block& b, std::int64_t layer, const Tensor& q, const Tensor& k,
                        const Tensor& v) const;
  Status layer(Block& b, std::int64_t l) const;
  Result<Tensor> run_block(Block& b, std::span<const std::int64_t> tokens) const;
  Result<std::vector<float>> score_block(const Tensor& hidden, const Block& b,
                                         std::span<const std::int64_t> targets) const;

  const ModelWeights* weights_;
  Backend* backend_;  // nullptr: the reference
  OpContext ctx_;
  std::shared_ptr<void> resident_;  // the candidate's weights kept on the backend (see the ctor)
};

}  // namespace ws1

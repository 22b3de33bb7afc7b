// The Qwen3 dense chain of ws1/model.hpp: a block of rows through the embedding, every layer
// (against the KV cache) and the final norm, and the logp of a block's hidden rows. The same
// code runs the candidate (ops on the Backend) and the reference (each op's reference_forward):
// only call() differs, and the handoffs (as_bf16) round a reference's FP32 output where the next
// op takes bf16. The protocols built on it are in chain_rollout.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

#include "chain_block.hpp"
#include "ws1/numeric.hpp"

namespace ws1 {
namespace model_detail {

Tensor as_bf16(const Tensor& t) {
  if (t.dtype() == DType::kBF16) return t;
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  Tensor out(DType::kBF16, c.shape());
  const float* src = c.data<float>();
  auto* dst = out.data<std::uint16_t>();
  for (std::int64_t i = 0; i < c.numel(); ++i) dst[i] = to_bf16(src[i]).bits;
  return out;
}

Tensor i64_tensor(std::span<const std::int64_t> values) {
  Tensor t(DType::kI64, {static_cast<std::int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<std::int64_t>());
  return t;
}

}  // namespace model_detail

namespace {

using model_detail::as_bf16;
using model_detail::i64_tensor;

// residual[i] += t[i] in FP32 (t bf16 or float32, same element count).
void add_into(std::vector<float>& residual, const Tensor& t) {
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  if (c.dtype() == DType::kBF16) {
    const auto* src = c.data<std::uint16_t>();
    for (std::size_t i = 0; i < residual.size(); ++i) residual[i] += from_bf16(bf16{src[i]});
  } else {
    const float* src = c.data<float>();
    for (std::size_t i = 0; i < residual.size(); ++i) residual[i] += src[i];
  }
}

Tensor f32_copy(const std::vector<float>& v, const Shape& shape) {
  Tensor t(DType::kF32, shape);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

// [S, H, D] -> [1, H, S, D] (contiguous) and back.
Tensor head_major(const Tensor& t) {
  const Shape& s = t.shape();
  return t.transpose(0, 1).contiguous().view({1, s[1], s[0], s[2]});
}
Tensor token_major(const Tensor& t) {
  const Shape& s = t.shape();  // [1, H, S, D]
  return t.view({s[1], s[2], s[3]}).transpose(0, 1).contiguous().view({s[2], s[1] * s[3]});
}

// Caches [1, Hkv, len_r, D] of the rows, right-padded into [B, Hkv, max len, D] (zeros) with
// key_mask [B, max len] true on each row's own keys.
Tensors padded_keys(std::span<const Tensor> keys, std::span<const Tensor> values) {
  const auto b = static_cast<std::int64_t>(keys.size());
  const std::int64_t hkv = keys[0].shape()[1], d = keys[0].shape()[3];
  std::int64_t longest = 0;
  for (const Tensor& k : keys) longest = std::max(longest, k.shape()[2]);
  Tensor k(DType::kBF16, {b, hkv, longest, d}), v(DType::kBF16, {b, hkv, longest, d});
  Tensor mask(DType::kBool, {b, longest});
  for (std::int64_t r = 0; r < b; ++r) {
    const auto u = static_cast<std::size_t>(r);
    const std::int64_t len = keys[u].shape()[2];
    for (std::int64_t h = 0; h < hkv; ++h) {
      const std::int64_t src = h * len * d, dst = (r * hkv + h) * longest * d;
      std::copy_n(keys[u].data<std::uint16_t>() + src, len * d, k.data<std::uint16_t>() + dst);
      std::copy_n(values[u].data<std::uint16_t>() + src, len * d, v.data<std::uint16_t>() + dst);
    }
    std::fill_n(mask.data<std::uint8_t>() + r * longest, len, std::uint8_t{1});
  }
  return {{"k", k}, {"v", v}, {"key_mask", mask}};
}

}  // namespace

Chain::Block Chain::Block::run(std::int64_t first, std::int64_t n, KvCache* cache, Trace* trace) {
  Block b;
  b.rows = n;
  for (std::int64_t i = 0; i < n; ++i) b.pos.push_back(first + i);
  b.caches = {cache};
  b.traces = {trace};
  b.positions = i64_tensor(b.pos);
  return b;
}

Chain::Block Chain::Block::batch(std::span<KvCache* const> caches, std::span<Trace* const> traces) {
  Block b;
  b.rows = static_cast<std::int64_t>(caches.size());
  b.per_row = true;
  b.caches.assign(caches.begin(), caches.end());
  b.traces.assign(b.caches.size(), nullptr);
  std::copy(traces.begin(), traces.end(), b.traces.begin());
  for (const KvCache* c : caches) b.pos.push_back(c->length());
  b.positions = i64_tensor(b.pos);
  return b;
}

void Chain::Block::record(std::int64_t layer, ChainNode node, const Tensor& t) const {
  if (!per_row) {
    if (traces[0] != nullptr) traces[0]->record(layer, node, pos.front(), t);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r)
    if (Trace* tr = traces[static_cast<std::size_t>(r)]; tr != nullptr)
      tr->record(layer, node, pos[static_cast<std::size_t>(r)], t.slice(0, r, r + 1));
}

Tensor Chain::Block::residual_tensor(std::int64_t h) const { return f32_copy(residual, {rows, h}); }

std::string Chain::Block::where() const {
  if (!per_row) return fmt::format("positions [{}, {})", pos.front(), pos.front() + rows);
  return fmt::format("decode batch at positions [{}]", fmt::join(pos, ", "));
}

Chain::Chain(const ModelWeights& weights, Backend* backend, const OpContext& ctx)
    : weights_(&weights), backend_(backend), ctx_(model_op_context(weights.config, ctx)) {}

namespace {

std::vector<Tensor> weight_tensors(const ModelWeights& w) {
  std::vector<Tensor> out{w.embed, w.final_norm, w.lm_head};
  for (const LayerWeights& l : w.layers)
    out.insert(out.end(), {l.input_norm, l.post_norm, l.q_norm, l.k_norm, l.q, l.k, l.v, l.o, l.gate, l.up, l.down});
  return out;
}

}  // namespace

// The weights are passed to every call unchanged, so the backend may keep them on its device
// while any copy of this chain lives (the token's deleter releases them).
Chain::Chain(const ModelWeights& weights, Backend& backend, const OpContext& ctx)
    : Chain(weights, &backend, ctx) {
  auto tensors = std::make_shared<std::vector<Tensor>>(weight_tensors(weights));
  backend.keep_resident(*tensors);
  resident_ = std::shared_ptr<void>(nullptr, [&backend, tensors](void*) { backend.release_resident(*tensors); });
}

Chain Chain::reference(const ModelWeights& weights, const OpContext& ctx) {
  return Chain(weights, nullptr, ctx);
}

Chain Chain::with_rms_norm_order(RmsNormOrder order) const {
  Chain c = *this;
  c.ctx_.rms_norm_order = order;
  return c;
}

KvCache Chain::new_cache() const {
  const ModelConfig& c = weights_->config;
  return KvCache(c.num_hidden_layers, c.num_key_value_heads, c.head_dim);
}

Result<Tensor> Chain::call(const Block& b, std::int64_t layer, ChainNode node, std::string_view op_name,
                           const Tensors& in, const Shape& out_shape) const {
  const std::string where = fmt::format("layer {} {} ({}) at {}", layer, chain_node_name(node), op_name, b.where());
  const Op* op = find_op_impl(op_name);
  if (op == nullptr) return environment_error(where, "no implementation of the op in this build");
  const TensorDecl decl = op->outputs().front();
  Result<Tensors> r = backend_ != nullptr ? backend_->forward(*op, in, ctx_) : op->reference_forward(in, ctx_);
  const std::string side = backend_ != nullptr ? backend_->name() : "reference";
  if (!r) return Error{side, where, r.error().message(), r.error().code};
  const Tensor* out = find_tensor(*r, decl.name);
  if (out == nullptr) return Error{side, where, "no output '" + decl.name + "'", ExitCode::kRed};
  const DType want = backend_ != nullptr ? decl.candidate_dtype : DType::kF32;
  if (out->dtype() != want)
    return Error{side, where,
                 fmt::format("output {} is {} (declared {})", decl.name, dtype_contract_name(out->dtype()),
                             dtype_contract_name(want)),
                 ExitCode::kRed};
  if (out->shape() != out_shape)
    return Error{side, where,
                 fmt::format("output {} has shape {} (expected {})", decl.name, shape_string(out->shape()),
                             shape_string(out_shape)),
                 ExitCode::kRed};
  return *out;
}

#define WS1_TRY(var, expr)          \
  auto var##_r = (expr);            \
  if (!var##_r) return var##_r.error(); \
  const Tensor var = *var##_r

// Appends the block's k and v (after rope, [n, Hkv, D]) to its cache(s) and attends the block's
// queries to every cached key: one sequence's n queries as [1, Hq, n, D] against [1, Hkv, Skv, D]
// (causal, bottom-right), or a decode batch's B queries as [B, Hq, 1, D] against the padded
// caches. Returns the output token-major, [n, Hq * D].
Result<Tensor> Chain::attend(const Block& b, std::int64_t l, const Tensor& q, const Tensor& k,
                             const Tensor& v) const {
  const ModelConfig& c = weights_->config;
  const std::int64_t n = b.rows, hq = c.num_attention_heads, d = c.head_dim;
  Tensors in;
  Shape out_shape;
  if (!b.per_row) {
    KvCache& cache = *b.caches[0];
    cache.append(l, as_bf16(k), v);
    const std::int64_t skv = cache.length() + n;
    in = {{"q", head_major(as_bf16(q))}, {"k", cache.keys(l, skv)}, {"v", cache.values(l, skv)}};
    out_shape = {1, hq, n, d};
  } else {
    std::vector<Tensor> keys, values;
    const Tensor kb = as_bf16(k);
    for (std::int64_t r = 0; r < n; ++r) {
      KvCache& cache = *b.caches[static_cast<std::size_t>(r)];
      cache.append(l, kb.slice(0, r, r + 1), v.slice(0, r, r + 1));
      keys.push_back(cache.keys(l, cache.length() + 1));
      values.push_back(cache.values(l, cache.length() + 1));
    }
    in = padded_keys(keys, values);
    in.insert(in.begin(), {"q", as_bf16(q).contiguous().view({n, hq, 1, d})});
    out_shape = {n, hq, 1, d};
  }
  auto o = call(b, l, ChainNode::kAttention, "attention", in, out_shape);
  if (!o) return o;
  return b.per_row ? o->contiguous().view({n, hq * d}) : token_major(*o);
}

Status Chain::layer(Block& b, std::int64_t l) const {
  const ModelConfig& c = weights_->config;
  const LayerWeights& w = weights_->layers[static_cast<std::size_t>(l)];
  const std::int64_t n = b.rows, h = c.hidden_size, d = c.head_dim;
  const std::int64_t hq = c.num_attention_heads, hkv = c.num_key_value_heads;
  const auto gemm = [&](ChainNode node, const Tensor& a, const Tensor& weight) {
    return call(b, l, node, "det_gemm", {{"a", as_bf16(a)}, {"b", weight}}, {n, weight.shape()[1]});
  };
  const auto norm = [&](ChainNode node, std::string_view op, const Tensor& x, const Tensor& weight) {
    return call(b, l, node, op, {{"x", as_bf16(x)}, {"weight", weight}}, x.shape());
  };
  const auto rope = [&](ChainNode node, const Tensor& x) {
    return call(b, l, node, "rope", {{"x", as_bf16(x)}, {"positions", b.positions}}, x.shape());
  };

  // Attention block.
  WS1_TRY(x, norm(ChainNode::kInputNorm, "rms_norm", as_bf16(b.residual_tensor(h)), w.input_norm));
  b.record(l, ChainNode::kInputNorm, x);
  WS1_TRY(q, gemm(ChainNode::kQProj, x, w.q));
  WS1_TRY(k, gemm(ChainNode::kKProj, x, w.k));
  WS1_TRY(v, gemm(ChainNode::kVProj, x, w.v));
  b.record(l, ChainNode::kQProj, q);
  b.record(l, ChainNode::kKProj, k);
  b.record(l, ChainNode::kVProj, v);
  WS1_TRY(qn, norm(ChainNode::kQNorm, "qk_norm", as_bf16(q).view({n, hq, d}), w.q_norm));
  WS1_TRY(kn, norm(ChainNode::kKNorm, "qk_norm", as_bf16(k).view({n, hkv, d}), w.k_norm));
  b.record(l, ChainNode::kQNorm, qn);
  b.record(l, ChainNode::kKNorm, kn);
  WS1_TRY(qr, rope(ChainNode::kQRope, qn));
  WS1_TRY(kr, rope(ChainNode::kKRope, kn));
  b.record(l, ChainNode::kQRope, qr);
  b.record(l, ChainNode::kKRope, kr);
  WS1_TRY(attn, attend(b, l, qr, kr, as_bf16(v).view({n, hkv, d})));
  b.record(l, ChainNode::kAttention, attn);
  WS1_TRY(proj, gemm(ChainNode::kOProj, attn, w.o));
  b.record(l, ChainNode::kOProj, proj);
  add_into(b.residual, proj);
  b.record(l, ChainNode::kAttnResidual, b.residual_tensor(h));

  // MLP block.
  WS1_TRY(x2, norm(ChainNode::kPostNorm, "rms_norm", as_bf16(b.residual_tensor(h)), w.post_norm));
  b.record(l, ChainNode::kPostNorm, x2);
  WS1_TRY(gate, gemm(ChainNode::kGateProj, x2, w.gate));
  WS1_TRY(up, gemm(ChainNode::kUpProj, x2, w.up));
  b.record(l, ChainNode::kGateProj, gate);
  b.record(l, ChainNode::kUpProj, up);
  WS1_TRY(act, call(b, l, ChainNode::kSwiglu, "swiglu", {{"gate", as_bf16(gate)}, {"up", as_bf16(up)}},
                    gate.shape()));
  b.record(l, ChainNode::kSwiglu, act);
  WS1_TRY(down, gemm(ChainNode::kDownProj, act, w.down));
  b.record(l, ChainNode::kDownProj, down);
  add_into(b.residual, down);
  b.record(l, ChainNode::kMlpResidual, b.residual_tensor(h));
  return {};
}

Result<Tensor> Chain::run_block(Block& b, std::span<const std::int64_t> tokens) const {
  const ModelConfig& c = weights_->config;
  const std::int64_t n = b.rows, last = c.num_hidden_layers;
  WS1_TRY(emb, call(b, -1, ChainNode::kEmbedding, "embedding",
                    {{"ids", i64_tensor(tokens)}, {"table", weights_->embed}}, {n, c.hidden_size}));
  b.record(-1, ChainNode::kEmbedding, emb);
  b.residual.assign(static_cast<std::size_t>(n * c.hidden_size), 0.0f);
  add_into(b.residual, emb);  // exact: 0 + a bf16 or float32 value
  for (std::int64_t l = 0; l < last; ++l)
    if (Status s = layer(b, l); !s) return s.error();
  for (KvCache* cache : b.caches) cache->commit(b.per_row ? 1 : n);
  WS1_TRY(fin, call(b, last, ChainNode::kFinalNorm, "rms_norm",
                    {{"x", as_bf16(b.residual_tensor(c.hidden_size))}, {"weight", weights_->final_norm}},
                    {n, c.hidden_size}));
  b.record(last, ChainNode::kFinalNorm, fin);
  return fin;
}

Result<std::vector<float>> Chain::score_block(const Tensor& hidden, const Block& b,
                                              std::span<const std::int64_t> targets) const {
  const auto m = static_cast<std::int64_t>(targets.size());
  WS1_TRY(logp, call(b, weights_->config.num_hidden_layers, ChainNode::kLogp, "linear_logp",
                     {{"hidden", as_bf16(hidden)}, {"weight", weights_->lm_head}, {"targets", i64_tensor(targets)}},
                     {m}));
  b.record(weights_->config.num_hidden_layers, ChainNode::kLogp, logp);
  return std::vector<float>(logp.data<float>(), logp.data<float>() + m);
}

#undef WS1_TRY

Result<Tensor> Chain::forward(KvCache& cache, std::span<const std::int64_t> tokens, Trace* trace) {
  if (tokens.empty()) throw std::logic_error("Chain::forward: no tokens");
  Block b = Block::run(cache.length(), static_cast<std::int64_t>(tokens.size()), &cache, trace);
  return run_block(b, tokens);
}

Result<Tensor> Chain::forward_batch(std::span<KvCache* const> caches, std::span<const std::int64_t> tokens,
                                    std::span<Trace* const> traces) {
  if (tokens.empty() || caches.size() != tokens.size() || (!traces.empty() && traces.size() != tokens.size()))
    throw std::logic_error(fmt::format("Chain::forward_batch: {} tokens, {} caches, {} traces", tokens.size(),
                                       caches.size(), traces.size()));
  Block b = Block::batch(caches, traces);
  return run_block(b, tokens);
}

Result<std::vector<float>> Chain::score(const Tensor& hidden, std::int64_t first,
                                        std::span<const std::int64_t> targets, Trace* trace) {
  return score_block(hidden, Block::run(first, static_cast<std::int64_t>(targets.size()), nullptr, trace), targets);
}

Result<Tensor> Chain::logits(const Tensor& hidden_row) {
  const ModelConfig& c = weights_->config;
  return call(Block::run(0, 1, nullptr, nullptr), c.num_hidden_layers, ChainNode::kLogp, "lm_head",
              {{"hidden", as_bf16(hidden_row)}, {"weight", weights_->lm_head}}, {1, c.vocab_size});
}

}  // namespace ws1

// The tensors of a Qwen3 dense checkpoint (Qwen3ForCausalLM names) and their shapes.
#include "weight_layout.hpp"

#include <fmt/format.h>

namespace ws1 {

std::string hf_layer_tensor(std::int64_t layer, std::string_view suffix) {
  return fmt::format("model.layers.{}.{}", layer, suffix);
}

std::vector<std::string> hf_tensor_names(const ModelConfig& config) {
  ModelWeights w;
  w.config = config;
  std::vector<std::string> names;
  for (const auto& e : model_detail::weight_entries(w)) names.push_back(e.name);
  return names;
}

namespace model_detail {

std::vector<WeightEntry> weight_entries(ModelWeights& w) {
  const ModelConfig& c = w.config;
  const std::int64_t h = c.hidden_size, d = c.head_dim, i = c.intermediate_size;
  const std::int64_t qd = c.num_attention_heads * d, kvd = c.num_key_value_heads * d;
  w.layers.assign(static_cast<std::size_t>(c.num_hidden_layers), {});
  std::vector<WeightEntry> out;
  const auto norm = [&](std::string name, std::int64_t n, Tensor* slot) {
    out.push_back({std::move(name), WeightKind::kNorm, {n}, 0, slot});
  };
  const auto proj = [&](std::string name, std::int64_t out_w, std::int64_t in_w, Tensor* slot) {
    out.push_back({std::move(name), WeightKind::kProjection, {out_w, in_w}, in_w, slot});
  };
  out.push_back({"model.embed_tokens.weight", WeightKind::kEmbedding, {c.vocab_size, h}, 0, &w.embed});
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
    norm(hf_layer_tensor(l, "input_layernorm.weight"), h, &L.input_norm);
    proj(hf_layer_tensor(l, "self_attn.q_proj.weight"), qd, h, &L.q);
    proj(hf_layer_tensor(l, "self_attn.k_proj.weight"), kvd, h, &L.k);
    proj(hf_layer_tensor(l, "self_attn.v_proj.weight"), kvd, h, &L.v);
    norm(hf_layer_tensor(l, "self_attn.q_norm.weight"), d, &L.q_norm);
    norm(hf_layer_tensor(l, "self_attn.k_norm.weight"), d, &L.k_norm);
    proj(hf_layer_tensor(l, "self_attn.o_proj.weight"), h, qd, &L.o);
    norm(hf_layer_tensor(l, "post_attention_layernorm.weight"), h, &L.post_norm);
    proj(hf_layer_tensor(l, "mlp.gate_proj.weight"), i, h, &L.gate);
    proj(hf_layer_tensor(l, "mlp.up_proj.weight"), i, h, &L.up);
    proj(hf_layer_tensor(l, "mlp.down_proj.weight"), h, i, &L.down);
  }
  norm("model.norm.weight", h, &w.final_norm);
  out.push_back({"lm_head.weight", WeightKind::kLmHead, {c.vocab_size, h}, h, &w.lm_head});
  return out;
}

Shape chain_shape(const WeightEntry& e) {
  if (e.kind == WeightKind::kProjection) return {e.hf_shape[1], e.hf_shape[0]};
  return e.hf_shape;
}

}  // namespace model_detail
}  // namespace ws1

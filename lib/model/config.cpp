// The chain's model configurations: the named synthetic ones, the checks a config must pass
// before weights are made or read, and the model's op settings.
#include <fmt/format.h>

#include <array>
#include <cmath>
#include <tuple>

#include "ws1/model.hpp"

namespace ws1 {
namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.num_hidden_layers = 2;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 256;  // above the manifest fixture's largest token id (240)
  c.max_position_embeddings = 40960;
  c.rope_theta = 1e6;
  c.rms_norm_eps = 1e-6;
  c.hidden_act = "silu";
  c.qk_norm = true;
  return c;
}

// Qwen/Qwen3-8B config.json (the manifest's config_fingerprint; a test checks they agree).
ModelConfig qwen3_8b() {
  ModelConfig c;
  c.num_hidden_layers = 36;
  c.hidden_size = 4096;
  c.intermediate_size = 12288;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.vocab_size = 151936;
  c.max_position_embeddings = 40960;
  c.rope_theta = 1e6;
  c.rms_norm_eps = 1e-6;
  c.hidden_act = "silu";
  c.qk_norm = true;
  return c;
}

constexpr std::array<std::string_view, 2> kNames = {"tiny", "qwen3-8b"};

}  // namespace

std::span<const std::string_view> synthetic_config_names() { return kNames; }

Result<ModelConfig> synthetic_config(std::string_view name) {
  if (name == "tiny") return tiny();
  if (name == "qwen3-8b") return qwen3_8b();
  return bad_input("--model", "synthetic:" + std::string(name),
                   "unknown synthetic config (known: synthetic:tiny, synthetic:qwen3-8b)");
}

Status check_config(const ModelConfig& c, const std::string& file) {
  const auto fail = [&](std::string_view field, std::string problem) -> Status {
    return bad_input(file, std::string(field), std::move(problem));
  };
  const std::array<std::pair<std::string_view, std::int64_t>, 8> sizes = {{
      {"num_hidden_layers", c.num_hidden_layers}, {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size}, {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads}, {"head_dim", c.head_dim},
      {"vocab_size", c.vocab_size}, {"max_position_embeddings", c.max_position_embeddings}}};
  for (const auto& [field, v] : sizes)
    if (v < 1) return fail(field, fmt::format("must be positive, got {}", v));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return fail("num_key_value_heads", fmt::format("{} query heads are not a multiple of {} kv heads",
                                                   c.num_attention_heads, c.num_key_value_heads));
  if (c.head_dim % 2 != 0) return fail("head_dim", "must be even (rotate-half RoPE)");
  if (!(std::isfinite(c.rope_theta) && c.rope_theta > 1))
    return fail("rope_theta", fmt::format("must be finite and above 1, got {}", c.rope_theta));
  if (!(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0))
    return fail("rms_norm_eps", fmt::format("must be finite and positive, got {}", c.rms_norm_eps));
  if (c.hidden_act != "silu") return fail("hidden_act", "'" + c.hidden_act + "' (the chain is SwiGLU: silu)");
  if (c.attention_bias) return fail("attention_bias", "true (Qwen3 dense has none; the chain has no bias)");
  if (c.tie_word_embeddings) return fail("tie_word_embeddings", "true (the chain needs an untied lm_head)");
  if (!c.rope_scaling_null) return fail("rope_scaling", "not null (the chain has no rope scaling)");
  return {};
}

std::optional<std::string> config_difference(const ModelConfig& a, const ModelConfig& b) {
  const std::array<std::tuple<std::string_view, std::int64_t, std::int64_t>, 8> sizes = {{
      {"num_hidden_layers", a.num_hidden_layers, b.num_hidden_layers},
      {"hidden_size", a.hidden_size, b.hidden_size},
      {"intermediate_size", a.intermediate_size, b.intermediate_size},
      {"num_attention_heads", a.num_attention_heads, b.num_attention_heads},
      {"num_key_value_heads", a.num_key_value_heads, b.num_key_value_heads},
      {"head_dim", a.head_dim, b.head_dim},
      {"vocab_size", a.vocab_size, b.vocab_size},
      {"max_position_embeddings", a.max_position_embeddings, b.max_position_embeddings}}};
  for (const auto& [field, x, y] : sizes)
    if (x != y) return fmt::format("{}: {} against {}", field, x, y);
  if (a.rope_theta != b.rope_theta) return fmt::format("rope_theta: {} against {}", a.rope_theta, b.rope_theta);
  if (a.rms_norm_eps != b.rms_norm_eps)
    return fmt::format("rms_norm_eps: {} against {}", a.rms_norm_eps, b.rms_norm_eps);
  if (a.hidden_act != b.hidden_act) return fmt::format("hidden_act: {} against {}", a.hidden_act, b.hidden_act);
  const std::array<std::tuple<std::string_view, bool, bool>, 4> flags = {{
      {"rope_scaling_null", a.rope_scaling_null, b.rope_scaling_null},
      {"tie_word_embeddings", a.tie_word_embeddings, b.tie_word_embeddings},
      {"attention_bias", a.attention_bias, b.attention_bias},
      {"qk_norm", a.qk_norm, b.qk_norm}}};
  for (const auto& [field, x, y] : flags)
    if (x != y) return fmt::format("{}: {} against {}", field, x, y);
  return std::nullopt;
}

OpContext model_op_context(const ModelConfig& c, const OpContext& run) {
  OpContext ctx = run;
  ctx.rms_norm_eps = c.rms_norm_eps;
  ctx.rope_theta = c.rope_theta;
  ctx.num_attention_heads = c.num_attention_heads;
  ctx.num_key_value_heads = c.num_key_value_heads;
  ctx.head_dim = c.head_dim;
  return ctx;
}

}  // namespace ws1

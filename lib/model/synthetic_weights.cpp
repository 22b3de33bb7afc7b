// Synthetic weights from a seed (`--model synthetic:<config>`): the fixture generator's
// counter-based normal streams (docs/fixtures.md), one stream per Hugging Face tensor name,
// so every tensor is a pure function of (seed, name, shape) on any machine and thread count.
//   projections, lm_head: N(0,1) * 2^-round(log2 sqrt(in))   (a trained weight's scale, D11; a
//                         power of two, so exact in bf16)
//   norm weights:         bf16(1 + N(0,1) / 8)   (not ones: the two rms_norm orders differ)
//   embedding:            N(0,1)
#include <fmt/format.h>

#include <cmath>

#include "weight_layout.hpp"
#include "ws1/fixture.hpp"
#include "ws1/numeric.hpp"

namespace ws1 {
namespace {

using model_detail::WeightEntry;
using model_detail::WeightKind;

// 2^-round(log2 sqrt(n)), as the det_gemm fixtures' weight (decisions D11).
double inv_sqrt_pow2(std::int64_t n) {
  return std::ldexp(1.0, -static_cast<int>(std::lround(std::log2(std::sqrt(static_cast<double>(n))))));
}

Result<Tensor> normal(const WeightEntry& e, DType dtype, double scale, std::uint64_t seed,
                      unsigned threads) {
  TensorSpec spec;
  spec.name = e.name;
  spec.dtype = dtype;
  spec.shape = model_detail::chain_shape(e);
  spec.role = TensorRole::kParameter;
  spec.gen.kind = GenKind::kNormal;
  spec.gen.seed = seed;
  spec.gen.key = "synthetic/" + e.name;
  spec.gen.scale = scale;
  return generate_tensor(spec, threads);
}

// 1 + z/8 with z the stream's float32 normals, rounded once to bf16.
Result<Tensor> norm_weight(const WeightEntry& e, std::uint64_t seed, unsigned threads) {
  auto z = normal(e, DType::kF32, 0.125, seed, threads);
  if (!z) return z.error();
  Tensor out(DType::kBF16, z->shape());
  const float* src = z->data<float>();
  auto* dst = out.data<std::uint16_t>();
  for (std::int64_t i = 0; i < out.numel(); ++i) dst[i] = to_bf16(1.0f + src[i]).bits;
  return out;
}

bool power_of_two(double v) {
  int exp = 0;
  return v > 0 && std::isfinite(v) && std::frexp(v, &exp) == 0.5;
}

}  // namespace

Result<ModelWeights> synthetic_weights(const ModelConfig& config, std::string_view name,
                                       const SyntheticOptions& o) {
  const std::string label = "synthetic:" + std::string(name);
  if (Status s = check_config(config, label); !s) return s.error();
  ModelWeights w;
  w.config = config;
  w.label = label;
  w.synthetic = true;
  std::vector<NamedTensor> hashed;
  for (const WeightEntry& e : model_detail::weight_entries(w)) {
    Result<Tensor> t = Tensor{};
    switch (e.kind) {
      case WeightKind::kNorm: t = norm_weight(e, o.seed, o.threads); break;
      case WeightKind::kEmbedding: t = normal(e, DType::kBF16, 1.0, o.seed, o.threads); break;
      case WeightKind::kProjection:
      case WeightKind::kLmHead: t = normal(e, DType::kBF16, inv_sqrt_pow2(e.in), o.seed, o.threads); break;
    }
    if (!t) return t.error();
    *e.slot = *t;
    hashed.push_back({e.name, *t});
  }
  // The fixture hash over every tensor in Hugging Face order, the label and the seed: the
  // weights' identity in the evidence.
  w.hash = "xxh3-128:" + fixture_hash(label, o.seed, hashed);
  return w;
}

Result<ModelWeights> with_logit_scale(const ModelWeights& weights, double scale) {
  if (!power_of_two(scale))
    return bad_input("--logit-scales", fmt::format("{}", scale), "must be a positive power of two (exact in bf16)");
  if (scale == 1.0) return weights;
  ModelWeights w = weights;
  const Tensor& src = weights.lm_head;
  w.lm_head = Tensor(DType::kBF16, src.shape());
  const Tensor c = src.is_contiguous() ? src : src.contiguous();
  const auto* in = c.data<std::uint16_t>();
  auto* out = w.lm_head.data<std::uint16_t>();
  const auto factor = static_cast<float>(scale);
  for (std::int64_t i = 0; i < c.numel(); ++i) {
    const float v = from_bf16(bf16{in[i]}) * factor;
    if (!std::isfinite(v))
      return bad_input("--logit-scales", fmt::format("{}", scale),
                       fmt::format("lm_head element {} overflows bf16 at this scale", i));
    out[i] = to_bf16(v).bits;
  }
  w.label = fmt::format("{} (lm_head x{})", weights.label, scale);
  w.hash = fmt::format("{}*lm_head_x{}", weights.hash, scale);
  return w;
}

}  // namespace ws1

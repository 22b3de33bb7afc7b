// Planted defects in one path of the chain must turn chain parity red: a decode attention that
// rounds its softmax weights to bf16 (bitwise drift, found by --strict at the right node),
// one that drops the oldest cached key (a KV-cache off-by-one, red on the contract's metrics), one
// that ignores key_mask (red under batched decode only), a logp returned in bf16 (spec §9.5), and a
// NaN in decode.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "model_test_support.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;

namespace {

bool decode_call(const Tensors& in) { return find_tensor(in, "q")->shape()[2] == 1; }

// k and v holding only the key positions `order` lists, in that order.
Tensors with_keys(const Tensors& in, const std::vector<std::int64_t>& order) {
  Tensors out = in;
  for (auto& t : out) {
    if (t.name != "k" && t.name != "v") continue;
    const Tensor src = t.tensor.contiguous();
    const Shape& s = src.shape();  // [1, Hkv, Skv, D]
    Tensor dst(DType::kBF16, {s[0], s[1], static_cast<std::int64_t>(order.size()), s[3]});
    for (std::int64_t h = 0; h < s[1]; ++h)
      for (std::size_t j = 0; j < order.size(); ++j)
        std::copy_n(src.data<std::uint16_t>() + (h * s[2] + order[j]) * s[3], s[3],
                    dst.data<std::uint16_t>() + (h * static_cast<std::int64_t>(order.size()) + static_cast<std::int64_t>(j)) * s[3]);
    t.tensor = dst;
  }
  return out;
}

std::int64_t keys_of(const Tensors& in) { return find_tensor(in, "k")->shape()[2]; }

// A decode kernel (Sq = 1) that rounds the softmax weights P to bf16 before P.V, as a bf16 PV
// matrix product does; the prefill path keeps P in FP32. One pass over the keys in index order:
// s = q.k * scale (fma chain), m = max, p = exp(s - m), l = sum p, o = sum bf16(p) v / l.
test::OpKernel decode_with_bf16_probabilities() {
  return [](const Op& op, const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    if (!decode_call(in)) return op.cpu_forward(in, ctx);
    const Tensor q = find_tensor(in, "q")->contiguous(), k = find_tensor(in, "k")->contiguous(),
                 v = find_tensor(in, "v")->contiguous();
    const std::int64_t hq = q.shape()[1], d = q.shape()[3], hkv = k.shape()[1], skv = k.shape()[2];
    const auto f = [](const Tensor& t, std::int64_t i) { return from_bf16(bf16{t.data<std::uint16_t>()[i]}); };
    const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    Tensor o(DType::kBF16, q.shape());
    for (std::int64_t h = 0; h < hq; ++h) {
      const std::int64_t kv = h / (hq / hkv);
      std::vector<float> p(static_cast<std::size_t>(skv));
      float m = -std::numeric_limits<float>::infinity(), l = 0.0f;
      for (std::int64_t j = 0; j < skv; ++j) {
        float dot = 0.0f;
        for (std::int64_t e = 0; e < d; ++e) dot = std::fma(f(q, h * d + e), f(k, (kv * skv + j) * d + e), dot);
        p[static_cast<std::size_t>(j)] = dot * scale;
        m = std::max(m, dot * scale);
      }
      for (float& x : p) l += x = std::exp(x - m);
      for (std::int64_t e = 0; e < d; ++e) {
        float acc = 0.0f;
        for (std::int64_t j = 0; j < skv; ++j)
          acc = std::fma(round_bf16(p[static_cast<std::size_t>(j)]), f(v, (kv * skv + j) * d + e), acc);
        o.data<std::uint16_t>()[h * d + e] = to_bf16(acc / l).bits;
      }
    }
    return Tensors{{"o", o}};
  };
}

test::OpKernel decode_drops_oldest_key() {
  return [](const Op& op, const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    if (!decode_call(in)) return op.cpu_forward(in, ctx);
    std::vector<std::int64_t> order;
    for (std::int64_t j = 1; j < keys_of(in); ++j) order.push_back(j);
    return op.cpu_forward(with_keys(in, order), ctx);
  };
}

test::OpKernel logp_in_bf16() {
  return [](const Op& op, const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    auto r = op.cpu_forward(in, ctx);
    if (!r) return r;
    const Tensor& logp = r->front().tensor;
    Tensor b(DType::kBF16, logp.shape());
    for (std::int64_t i = 0; i < logp.numel(); ++i) b.data<std::uint16_t>()[i] = to_bf16(logp.data<float>()[i]).bits;
    return Tensors{{"logp", b}};
  };
}

test::OpKernel nan_when_one_row() {
  return [](const Op& op, const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    auto r = op.cpu_forward(in, ctx);
    if (r && r->front().tensor.numel() == 1) r->front().tensor.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    return r;
  };
}

}  // namespace

TEST_CASE("decode attention with bf16 probabilities: strict red at layer 0 attention", "[model][planted]") {
  test::PlantedBackend backend("attention", decode_with_bf16_probabilities());
  test::ParityOutcome o = test::manifest_parity(backend, /*strict=*/true);
  const Cell& c = o.cell;
  INFO(c.reason);
  CHECK(c.verdict == Verdict::kRed);
  REQUIRE(o.run.drift.has_value());
  CHECK(o.run.drift->layer == 0);
  CHECK(o.run.drift->node == ChainNode::kAttention);
  CHECK(o.run.drift->position == 8);  // the first decode step (prompt_len 8)
  CHECK(c.reason.find("strict: d is not exactly 0") != std::string::npos);
  CHECK(c.reason.find("layer 0 attention, position 8") != std::string::npos);
  const double max_d = test::metric(c, "max_abs_dlogp").value;
  CHECK(max_d > 0.0);
  WARN("decode attention with bf16 P: max |d| " << max_d << ", approx_kl0 " << test::metric(c, "approx_kl0").value
       << ", exact zeros " << test::metric(c, "exact_zero_dlogp_tokens").value << " of 27");
  // Without --strict only the contract's metrics judge, and this drift stays inside them.
  test::ParityOutcome loose = test::manifest_parity(backend, /*strict=*/false);
  CHECK(loose.cell.verdict == Verdict::kGreen);
  CHECK(loose.cell.bitwise.empty());
}

TEST_CASE("decode attention that drops the oldest cached key is red on the contract's metrics", "[model][planted]") {
  test::PlantedBackend backend("attention", decode_drops_oldest_key());
  test::ParityOutcome o = test::manifest_parity(backend, /*strict=*/false);
  const Cell& c = o.cell;
  INFO(c.reason);
  CHECK(c.verdict == Verdict::kRed);
  CHECK(c.reason.find("max_abs_dlogp") != std::string::npos);
  CHECK(test::metric(c, "max_abs_dlogp").value > *test::metric(c, "max_abs_dlogp").threshold);
  WARN("dropped oldest key: max |d| " << test::metric(c, "max_abs_dlogp").value << ", approx_kl0 "
       << test::metric(c, "approx_kl0").value << ", clipfrac0 " << test::metric(c, "clipfrac0").value);
}

TEST_CASE("attention that ignores key_mask: green one sequence at a time, red under batched decode", "[model][planted]") {
  const auto& s = test::model_setup();
  test::PlantedBackend backend("attention", test::attention_ignores_key_mask());
  const ParityFixture f = test::varied_prompt_fixture();
  for (bool batched : {false, true}) {
    auto run = run_parity(s.tiny, backend, s.ctx, f, {false, false, batched});
    REQUIRE(run.ok());
    auto cell = parity_cell({&s.contract, &s.tiny, &f, &*run, {"cpu_bf16", "cpu_bf16"}, "test"});
    REQUIRE(cell.ok());
    INFO("batched " << batched << ": " << cell->reason);
    CHECK(cell->verdict == (batched ? Verdict::kRed : Verdict::kGreen));
    CHECK((test::metric(*cell, "max_abs_dlogp").value == 0.0) == !batched);
    if (batched)
      WARN("key_mask ignored, batched decode: max |d| " << test::metric(*cell, "max_abs_dlogp").value
           << ", clipfrac0 " << test::metric(*cell, "clipfrac0").value);
  }
}

TEST_CASE("a logp returned in bf16 is red whatever its values (spec §9.5)", "[model][planted]") {
  test::PlantedBackend backend("linear_logp", logp_in_bf16());
  test::ParityOutcome o = test::manifest_parity(backend, false);
  CHECK(o.cell.verdict == Verdict::kRed);
  CHECK(o.cell.reason ==
        "the candidate chain failed: cpu_bf16: teacher forcing, s0: layer 2 logp (linear_logp) at "
        "positions [0, 10): output logp is bfloat16 (declared float32)");
  CHECK(o.cell.metrics.empty());
}

TEST_CASE("a NaN on the decode path is a hard failure (nan_inf_policy)", "[model][planted]") {
  test::PlantedBackend backend("linear_logp", nan_when_one_row());
  test::ParityOutcome o = test::manifest_parity(backend, false);
  CHECK(o.cell.verdict == Verdict::kRed);
  CHECK(o.cell.reason.rfind("NaN/Inf in dlogp or exp(dlogp) at 27 token(s), first s0 position 8", 0) == 0);
  CHECK(std::isnan(test::metric(o.cell, "max_abs_dlogp").value));
}

TEST_CASE("an empty active set is a hard failure", "[model][parity]") {
  const auto& s = test::model_setup();
  ParityFixture f;
  f.protocol = "manifest";
  ParityRun run;
  auto cell = parity_cell({&s.contract, &s.tiny, &f, &run, {"cpu_bf16", "cpu_bf16"}, "test"});
  REQUIRE(cell.ok());
  CHECK(cell->verdict == Verdict::kRed);
  CHECK(cell->reason == "empty active token set (chain_logprob_aggregates.empty_active_token_set: hard_fail)");
}

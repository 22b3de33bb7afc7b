// The tiny chain on cpu_bf16: it runs, it is deterministic, its two paths and the FP32 reference
// agree as measured, and the configs are the ones the manifest pins.
#include <cmath>
#include <map>

#include "model_test_support.hpp"
#include "ws1/evidence.hpp"

using namespace ws1;

TEST_CASE("synthetic:qwen3-8b is the manifest's config fingerprint; tiny is a valid config", "[model]") {
  const auto& s = test::model_setup();
  auto big = synthetic_config("qwen3-8b");
  REQUIRE(big.ok());
  CHECK_FALSE(config_difference(*big, s.manifest.model.config).has_value());
  auto tiny = synthetic_config("tiny");
  REQUIRE(tiny.ok());
  CHECK(check_config(*tiny, "tiny").ok());
  CHECK(config_difference(*tiny, *big).value() == "num_hidden_layers: 2 against 36");
  CHECK_FALSE(synthetic_config("huge").ok());
}

TEST_CASE("synthetic weights are a pure function of the seed, labelled synthetic", "[model]") {
  const auto& s = test::model_setup();
  auto again = synthetic_weights(s.tiny.config, "tiny", {static_cast<std::uint64_t>(s.manifest.seed), 1});
  auto other = synthetic_weights(s.tiny.config, "tiny", {1, 0});
  REQUIRE(again.ok());
  REQUIRE(other.ok());
  CHECK(again->hash == s.tiny.hash);  // one thread or all: the same bytes
  CHECK(other->hash != s.tiny.hash);
  CHECK(s.tiny.synthetic);
  CHECK(s.tiny.label == "synthetic:tiny");
  CHECK(s.tiny.hash.rfind("xxh3-128:", 0) == 0);
  CHECK(s.tiny.layers.size() == 2);
  CHECK(s.tiny.layers[0].q.shape() == Shape{64, 64});   // [in, out] for det_gemm
  CHECK(s.tiny.layers[0].down.shape() == Shape{128, 64});
  CHECK(s.tiny.lm_head.shape() == Shape{256, 64});
  auto scaled = with_logit_scale(s.tiny, 4.0);
  REQUIRE(scaled.ok());
  CHECK(scaled->hash != s.tiny.hash);
  CHECK(scaled->embed.raw() == s.tiny.embed.raw());  // shared, only lm_head is new
  CHECK_FALSE(with_logit_scale(s.tiny, 3.0).ok());
}

TEST_CASE("the tiny chain runs on cpu_bf16 and its logps are finite log-probabilities", "[model]") {
  const auto& s = test::model_setup();
  auto backend = make_cpu_bf16_backend();
  Chain chain(s.tiny, *backend, s.ctx);
  const Sample& s3 = *s.manifest.sample("s3");
  auto tf = chain.teacher_forcing(s3.token_ids);
  REQUIRE(tf.ok());
  REQUIRE(tf->size() == s3.token_ids.size() - 1);
  for (float v : *tf) {
    CHECK(std::isfinite(v));
    CHECK(v <= 0.0f);
  }
  auto again = chain.teacher_forcing(s3.token_ids);
  REQUIRE(again.ok());
  CHECK(*again == *tf);  // deterministic
  // The KV cache holds every position after a full forward.
  KvCache cache = chain.new_cache();
  REQUIRE(chain.forward(cache, std::span(s3.token_ids).first(5)).ok());
  CHECK(cache.length() == 5);
  CHECK(cache.keys(1, 5).shape() == Shape{1, 2, 5, 16});
}

TEST_CASE("a token outside the vocabulary is bad input naming the sequence and token", "[model]") {
  const auto& s = test::model_setup();
  ParityFixture f = manifest_parity_fixture(s.manifest);
  ModelConfig small = s.tiny.config;
  small.vocab_size = 200;
  auto st = check_fixture(f, small, "fixtures/ws1-qwen3-8b-dense.json");
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message() == "fixtures/ws1-qwen3-8b-dense.json: s0.tokens[8]: token 200 outside the model's vocabulary [0, 200)");
  CHECK(check_fixture(f, s.tiny.config, "m").ok());
}

TEST_CASE("manifest protocol on cpu_bf16 at tiny: teacher forcing vs rollout decode", "[model][parity]") {
  const auto& s = test::model_setup();
  auto backend = make_cpu_bf16_backend();
  test::ParityOutcome o = test::manifest_parity(*backend, /*strict=*/true);
  CHECK(o.fixture.sequences.size() == 4);
  CHECK(o.fixture.active_tokens() == 27);
  REQUIRE(o.run.tokens.size() == 27);
  const Cell& c = o.cell;
  INFO(c.reason);
  // What cpu_bf16 measures (docs/parity.md): every op's candidate reduces a row in an order
  // fixed by that row alone (attention: the valid keys in index order, in tiles of 64), so a
  // decode row against the cache and the same row inside the full forward give the same bits.
  CHECK(test::metric(c, "max_abs_dlogp").value == 0.0);
  CHECK(test::metric(c, "approx_kl0").value == 0.0);
  CHECK(test::metric(c, "clipfrac0").value == 0.0);
  CHECK(test::metric(c, "exact_zero_dlogp_tokens").value == 27.0);
  CHECK_FALSE(o.run.drift.has_value());  // no hidden state differs either
  CHECK(c.verdict == Verdict::kGreen);
  REQUIRE(c.bitwise.size() == 1);
  CHECK(c.bitwise[0].equal_bits);
  // Thresholds come from the contract's rows for bf16 execution.
  CHECK(test::metric(c, "max_abs_dlogp").threshold ==
        s.contract.chain_threshold(ChainMetric::kMaxAbsDlogp, ContractDType::kBFloat16).value());
  CHECK(test::metric(c, "max_abs_dlogp").source ==
        "chain_logprob_aggregates.metrics.max_abs_dlogp.by_execution_dtype.bfloat16.threshold");
  CHECK_FALSE(test::metric(c, "mean_abs_dlogp").threshold.has_value());  // not in ws1-c1-v2
  // Both paths are some distance from the FP32 reference chain, and not a large one.
  const double tf_ref = test::metric(c, "training_style_teacher_forcing_vs_fp32.max_abs_dlogp").value;
  const double rd_ref = test::metric(c, "inference_style_rollout_decode_vs_fp32.max_abs_dlogp").value;
  CHECK(tf_ref > 0.0);
  CHECK(tf_ref == rd_ref);
  CHECK(tf_ref < 0.5);
  WARN("tiny cpu_bf16 vs FP32 reference: max |d| " << tf_ref << ", mean |d| "
       << test::metric(c, "training_style_teacher_forcing_vs_fp32.mean_abs_dlogp").value);
  // The artifact validates with this cell.
  Evidence e = begin_evidence({"test"});
  e.contract = {s.contract.file, s.contract.version, s.contract.sha256};
  e.workload = {s.manifest.file, s.manifest.workload_id, s.manifest.version, s.manifest.identity_sha256};
  e.environment.gpu_absent_reason = "test";
  e.finished = e.started;
  e.cells.push_back(c);
  auto v = validate(e, "e.json");
  INFO((v.ok() ? std::string() : v.error().message()));
  CHECK(v.ok());
}

TEST_CASE("the hf rms_norm order also gives exact parity, and differs from the kernel order", "[model][parity]") {
  const auto& s = test::model_setup();
  auto backend = make_cpu_bf16_backend();
  OpContext hf = s.ctx;
  hf.rms_norm_order = s.ctx.rms_norm_order == RmsNormOrder::kHf ? RmsNormOrder::kKernel : RmsNormOrder::kHf;
  const ParityFixture f = manifest_parity_fixture(s.manifest);
  auto a = run_parity(s.tiny, *backend, s.ctx, f, {false, false});
  auto b = run_parity(s.tiny, *backend, hf, f, {false, false});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  bool differ = false;
  for (std::size_t i = 0; i < b->tokens.size(); ++i) {
    CHECK(b->tokens[i].teacher_forcing == b->tokens[i].rollout_decode);
    differ = differ || a->tokens[i].teacher_forcing != b->tokens[i].teacher_forcing;
  }
  CHECK(differ);
}

TEST_CASE("batched rollout decode (caches of different lengths in flight) equals teacher forcing", "[model][parity]") {
  const auto& s = test::model_setup();
  auto backend = make_cpu_bf16_backend();
  const ParityFixture f = test::varied_prompt_fixture();  // prompts 8, 3, 5, 12 of 11, 16, 13, 19
  auto batched = run_parity(s.tiny, *backend, s.ctx, f, {true, false, true});
  REQUIRE(batched.ok());
  REQUIRE(batched->tokens.size() == 3 + 13 + 8 + 7);
  for (const TokenLogp& t : batched->tokens) CHECK(t.teacher_forcing == t.rollout_decode);
  CHECK_FALSE(batched->drift.has_value());
  auto cell = parity_cell({&s.contract, &s.tiny, &f, &*batched, {"cpu_bf16", "cpu_bf16"}, "test"});
  REQUIRE(cell.ok());
  CHECK(cell->verdict == Verdict::kGreen);
  CHECK(cell->id == "chain/chain_parity/manifest/batched_decode/synthetic:tiny/cpu_bf16");
  CHECK(test::metric(*cell, "exact_zero_dlogp_tokens").value == 31.0);
  CHECK(cell->transform == "teacher_forcing_vs_batched_rollout_decode");
}

namespace {

// cpu_bf16, counting the weights it is asked to keep resident (what cuda_bf16 keeps on the device).
class KeepCounting final : public Backend {
 public:
  std::string name() const override { return "cpu_bf16"; }
  std::string kernel_id(const Op& op, Direction d) const override { return base_->kernel_id(op, d); }
  Result<Tensors> forward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    for (const auto& t : in) inputs_seen += kept.count(t.tensor.raw()) > 0 ? 1 : 0;
    return base_->forward(op, in, ctx);
  }
  Result<Tensors> backward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return base_->backward(op, in, ctx);
  }
  void keep_resident(std::span<const Tensor> tensors) override {
    for (const Tensor& t : tensors) ++kept[t.raw()];
    ++keeps;
  }
  void release_resident(std::span<const Tensor> tensors) override {
    for (const Tensor& t : tensors)
      if (--kept[t.raw()] == 0) kept.erase(t.raw());
    ++releases;
  }
  std::map<const void*, int> kept;
  int keeps = 0, releases = 0;
  std::int64_t inputs_seen = 0;  // op inputs that were kept weights

 private:
  std::unique_ptr<Backend> base_ = make_cpu_bf16_backend();
};

}  // namespace

TEST_CASE("the candidate chain keeps its weights resident while a copy of it lives", "[model]") {
  const auto& s = test::model_setup();
  KeepCounting backend;
  const std::size_t per_layer = 11, global = 3;  // norms, q/k/v/o, gate/up/down; embed, final norm, lm_head
  {
    Chain chain(s.tiny, backend, s.ctx);
    CHECK(backend.keeps == 1);
    CHECK(backend.kept.size() == global + per_layer * s.tiny.layers.size());
    CHECK(backend.kept.count(s.tiny.layers[1].down.raw()) == 1);
    {
      Chain copy = chain;  // shares the residency: no second keep, no release when it goes
      CHECK(backend.keeps == 1);
    }
    CHECK(backend.releases == 0);
    auto tf = chain.teacher_forcing(s.manifest.sample("s0")->token_ids);
    REQUIRE(tf.ok());
    // Every op input that is a weight is the kept view itself (so a device backend finds it):
    // per layer 2 norms + 7 projections + q/k norms, plus embedding, final norm and lm_head.
    CHECK(backend.inputs_seen == static_cast<std::int64_t>(global + per_layer * s.tiny.layers.size()));
  }
  CHECK(backend.releases == 1);
  CHECK(backend.kept.empty());
  // The reference chain asks nothing of a backend.
  Chain reference = Chain::reference(s.tiny, s.ctx);
  CHECK(backend.keeps == 1);
}

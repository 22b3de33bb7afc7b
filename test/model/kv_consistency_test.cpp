// The C6/C7 decode-vs-prefill cases (ws1/kv_consistency.hpp) on cpu_bf16: the case table from
// the manifest; every case green at tiny's head shape with decode == prefill bitwise (attention
// reduces keys in fixed tiles, whatever Sq and the padding) and the KV cache read back bitwise;
// the same at Qwen3-8B's head shape (32/8/128); and planted defects: a decode
// kernel that truncates o to bf16 (bitwise different, inside the tolerance: red only under
// --strict), one that drops the oldest cached key (red on the tolerance and the probe), one that
// ignores key_mask (the left-padded case red), and a cache read-back that lost a bit (red).
#include <cstring>
#include <string>

#include "model_test_support.hpp"
#include "ws1/kv_consistency.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;

namespace {

const RunContext& run_context() {
  static const RunContext rc = [] {
    const test::ModelSetup& s = test::model_setup();
    return make_run_context(s.contract, s.manifest, s.lock, "cpu_bf16", 0);
  }();
  return rc;
}

ModelConfig config(const char* name) {
  auto c = synthetic_config(name);
  REQUIRE(c.ok());
  return *c;
}

const KvCase& find_case(const std::vector<KvCase>& cases, const std::string& name) {
  for (const KvCase& c : cases)
    if (c.name == name) return c;
  FAIL("no case " << name);
  throw;
}

std::vector<KvCase> cases() {
  auto c = kv_consistency_cases(test::model_setup().manifest);
  REQUIRE(c.ok());
  return *c;
}

struct Outcome {
  KvCaseInputs in;
  KvCaseRun run;
  Cell rows, probe;
};

Outcome run_case(Backend& backend, const ModelConfig& cfg, const KvCase& c, bool strict,
                 void (*tamper)(KvCaseRun&) = nullptr) {
  const RunContext& rc = run_context();
  Outcome o;
  auto in = kv_case_inputs(c, cfg, static_cast<std::uint64_t>(test::model_setup().manifest.seed));
  if (!in) FAIL(in.error().message());
  o.in = std::move(in).value();
  auto run = run_kv_case(o.in, backend, model_op_context(cfg, rc.op_context));
  if (!run) FAIL(run.error().message());
  o.run = std::move(run).value();
  if (tamper != nullptr) tamper(o.run);
  auto cells = kv_case_cells({&rc, backend.name(), "test", "test", strict, {}}, o.in, o.run);
  if (!cells) FAIL(cells.error().message());
  REQUIRE(cells->size() == 2);
  o.rows = (*cells)[0];
  o.probe = (*cells)[1];
  return o;
}

bool decode_call(const Tensors& in) { return find_tensor(in, "q")->shape()[2] == 1; }

// Decode calls: the FP32 reference's o truncated to bf16 (round toward zero) instead of rounded
// to nearest: at most one bf16 ulp off, in about half of the elements.
test::OpKernel decode_truncates_o() {
  return [](const Op& op, const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    if (!decode_call(in)) return op.cpu_forward(in, ctx);
    auto r = op.reference_forward(in, ctx);
    if (!r) return r;
    const Tensor& f = r->front().tensor;
    Tensor o(DType::kBF16, f.shape());
    for (std::int64_t i = 0; i < f.numel(); ++i) {
      std::uint32_t bits = 0;
      std::memcpy(&bits, f.data<float>() + i, sizeof bits);
      o.data<std::uint16_t>()[i] = static_cast<std::uint16_t>(bits >> 16);
    }
    return Tensors{{"o", o}};
  };
}

// Decode calls: keys and values from position 1 on (a KV-cache off-by-one).
test::OpKernel decode_drops_oldest_key() {
  return [](const Op& op, const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    if (!decode_call(in) || find_tensor(in, "k")->shape()[2] < 2) return op.cpu_forward(in, ctx);
    Tensors out = in;
    for (auto& t : out)
      if (t.name == "k" || t.name == "v") t.tensor = t.tensor.slice(2, 1, t.tensor.shape()[2]).contiguous();
    return op.cpu_forward(out, ctx);
  };
}

double metric(const Cell& c, const std::string& name) { return test::metric(c, name).value; }

}  // namespace

TEST_CASE("kv cases come from the manifest's fixtures", "[model][kv]") {
  const std::vector<KvCase> all = cases();
  REQUIRE(all.size() == 6);
  CHECK(find_case(all, "decode-b1-short").lengths == std::vector<std::int64_t>{8});
  CHECK(find_case(all, "decode-b1-long").lengths == std::vector<std::int64_t>{32});
  CHECK(find_case(all, "decode-b1-primary-s3").lengths == std::vector<std::int64_t>{19});
  const KvCase& varlen = find_case(all, "decode-bn-varlen");
  CHECK(varlen.lengths == std::vector<std::int64_t>{11, 16, 13, 19});
  CHECK(varlen.padded_len == 19);
  CHECK(varlen.padding == KvPadding::kRight);
  CHECK(find_case(all, "decode-bn-padded-right").padded_len == 20);
  CHECK(find_case(all, "decode-bn-padded-left").padding == KvPadding::kLeft);
  Manifest bad = test::model_setup().manifest;
  bad.padded_len = 18;
  auto refused = kv_consistency_cases(bad);
  REQUIRE(!refused.ok());
  CHECK(refused.error().where == "fixtures.padding.primary_padded_len");
}

TEST_CASE("kv cases at tiny: all green, decode == prefill bitwise, read-back bitwise", "[model][kv]") {
  auto backend = make_cpu_bf16_backend();
  const ModelConfig tiny = config("tiny");
  for (const KvCase& c : cases()) {
    for (bool strict : {false, true}) {
      const Outcome o = run_case(*backend, tiny, c, strict);
      INFO(c.name << " strict " << strict << ": " << o.rows.reason << " | " << o.probe.reason);
      CHECK(o.rows.id == "chain/kv_consistency/" + c.name + "/decode_vs_prefill/hq4_hkv2_d16/cpu_bf16");
      CHECK(o.probe.id == "chain/kv_consistency/" + c.name + "/logprob_probe/hq4_hkv2_d16/cpu_bf16");
      CHECK(o.rows.verdict == Verdict::kGreen);
      CHECK(o.probe.verdict == Verdict::kGreen);
      CHECK(o.rows.threshold->source.find("forward_accuracy") != std::string::npos);
      REQUIRE(o.rows.accuracy.size() == 1);
      CHECK(o.rows.accuracy[0].numel == o.in.rows() * 4 * 16);
      CHECK(o.rows.accuracy[0].violations == 0);
      CHECK(metric(o.rows, "bitwise_differing_elements") == 0);
      CHECK(metric(o.rows, "bitwise_equal_elements") == static_cast<double>(o.rows.accuracy[0].numel));
      REQUIRE(o.rows.bitwise.size() == (strict ? 3u : 2u));
      for (const BitwiseTensor& b : o.rows.bitwise) CHECK(b.equal_bits);
      std::int64_t active = 0;
      for (std::int64_t l : c.lengths) active += l - l / 2;
      CHECK(metric(o.probe, "active_tokens") == static_cast<double>(active));
      CHECK(metric(o.probe, "exact_zero_dlogp_tokens") == static_cast<double>(active));
      CHECK(metric(o.probe, "max_abs_dlogp") == 0.0);
      CHECK(o.probe.bitwise.size() == (strict ? 1u : 0u));
    }
  }
}

// Attention alone at these lengths is cheap (~0.1 s for all six cases), so all of them run.
TEST_CASE("kv cases at Qwen3-8B's head shape (32/8/128): all green, bitwise", "[model][kv]") {
  auto backend = make_cpu_bf16_backend();
  const ModelConfig qwen = config("qwen3-8b");
  for (const KvCase& c : cases()) {
    const Outcome o = run_case(*backend, qwen, c, true);
    INFO(c.name << ": " << o.rows.reason << " | " << o.probe.reason);
    CHECK(o.rows.id.find("/hq32_hkv8_d128/") != std::string::npos);
    CHECK(o.in.probe_head.shape() == Shape{kProbeVocab, 32 * 128});
    CHECK(o.rows.verdict == Verdict::kGreen);
    CHECK(o.probe.verdict == Verdict::kGreen);
    CHECK(metric(o.rows, "bitwise_differing_elements") == 0);
    CHECK(metric(o.probe, "max_abs_dlogp") == 0.0);
  }
}

TEST_CASE("a decode kernel that truncates o: bitwise different, inside the tolerance, red under strict", "[model][kv][planted]") {
  test::PlantedBackend backend("attention", decode_truncates_o());
  const std::vector<KvCase> all = cases();
  const KvCase& c = find_case(all, "decode-b1-primary-s3");
  const Outcome loose = run_case(backend, config("tiny"), c, false);
  INFO(loose.rows.reason);
  CHECK(loose.rows.verdict == Verdict::kGreen);
  CHECK(metric(loose.rows, "bitwise_differing_elements") > 0);
  CHECK(loose.rows.reason.rfind("bitwise: decode differs from prefill at ", 0) == 0);
  CHECK(loose.rows.reason.find("first at s0 position ") != std::string::npos);
  const Outcome strict = run_case(backend, config("tiny"), c, true);
  CHECK(strict.rows.verdict == Verdict::kRed);
  CHECK(strict.rows.reason.find("o bits: direct decode vs prefill") != std::string::npos);
  CHECK(strict.probe.verdict == (metric(strict.probe, "exact_zero_dlogp_tokens") < metric(strict.probe, "active_tokens")
                                     ? Verdict::kRed : Verdict::kGreen));
  WARN("truncated decode o: " << metric(loose.rows, "bitwise_differing_elements") << " of "
       << loose.rows.accuracy[0].numel << " elements differ, max |err| " << loose.rows.accuracy[0].abs_error.max
       << "; probe max |d| " << metric(loose.probe, "max_abs_dlogp") << "; " << loose.rows.reason);
}

TEST_CASE("a decode kernel that drops the oldest cached key is red", "[model][kv][planted]") {
  test::PlantedBackend backend("attention", decode_drops_oldest_key());
  const Outcome o = run_case(backend, config("tiny"), find_case(cases(), "decode-b1-short"), false);
  INFO(o.rows.reason << " | " << o.probe.reason);
  CHECK(o.rows.verdict == Verdict::kRed);
  CHECK(o.rows.accuracy[0].violations > 0);
  CHECK(o.probe.verdict == Verdict::kRed);
  WARN("dropped oldest key: " << o.rows.accuracy[0].violations << " violations; probe max |d| "
       << metric(o.probe, "max_abs_dlogp") << ", clipfrac0 " << metric(o.probe, "clipfrac0"));
}

// Right pads sit after every valid query row, so causality alone hides them from those rows;
// left pads come before: only key_mask keeps them out, and only the left-padded case sees it.
TEST_CASE("attention that ignores key_mask: the left-padded case red, the others green", "[model][kv][planted]") {
  test::PlantedBackend backend("attention", test::attention_ignores_key_mask());
  for (const KvCase& c : cases()) {
    const Outcome o = run_case(backend, config("tiny"), c, false);
    INFO(c.name << ": " << o.rows.reason);
    CHECK(o.rows.verdict == (c.padding == KvPadding::kLeft ? Verdict::kRed : Verdict::kGreen));
  }
}

TEST_CASE("a KV cache read-back that lost a bit is red", "[model][kv]") {
  auto backend = make_cpu_bf16_backend();
  const Outcome o = run_case(*backend, config("tiny"), find_case(cases(), "decode-b1-short"), false,
                             [](KvCaseRun& run) { run.read_v.data<std::uint16_t>()[5] ^= 1; });
  CHECK(o.rows.verdict == Verdict::kRed);
  CHECK(o.rows.reason.find("kv_cache.v: read back vs written") != std::string::npos);
}

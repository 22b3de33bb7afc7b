// linear_logp: the FP32 reference against PyTorch float64, the cpu_bf16 candidate against a
// literal scalar implementation of its declared orders (bit for bit), batch invariance, bad
// inputs, the FP32 output-dtype check, and a timing at the real shapes (hidden: run it with
// test_ops "[linear_logp_perf]").
#include <chrono>
#include <ctime>
#include <cmath>
#include <numeric>

#include "logprob_test_util.hpp"
#include "logsumexp.hpp"

using namespace ws1;
using namespace ws1::test;
using namespace ws1::test::logprob;

namespace {

const Op& op() { return op_named("linear_logp"); }

Tensors oracle_linear_inputs(const SafetensorsFile& f) {
  Tensors in = oracle_inputs(f, {{"in.h", "hidden"}, {"in.W", "weight"}, {"in.targets", "targets"}, {"dy.logp", "dy.logp"}});
  for (auto& t : in)
    if (t.name == "dy.logp") t.tensor = widened(t.tensor);
  return in;
}

// hidden scaled so the logits are near unit scale (as the fixtures do), weight N(0, 1).
Tensors synthetic(std::int64_t t, std::int64_t h, std::int64_t v, std::uint64_t seed) {
  return {{"hidden", randn_bf16({t, h}, seed, 1.0f / 16)},
          {"weight", randn_bf16({v, h}, seed + 1)},
          {"targets", i64_tensor({t}, random_targets(t, v, seed + 2))},
          {"dy.logp", randn_f32({t}, seed + 3)}};
}

// The fp32_chunked order of gemm_cpu, written out: 32-wide fma chains from 0, folded left to
// right from 0 (32 is gemm_cpu's declared kFp32Chunk, an order, not a tolerance).
float chunked_dot(const float* a, std::int64_t sa, const float* b, std::int64_t sb, std::int64_t n) {
  float total = 0.0f;
  for (std::int64_t c = 0; c < n; c += 32) {
    float leaf = 0.0f;
    for (std::int64_t k = c; k < std::min(n, c + 32); ++k) leaf = std::fma(a[k * sa], b[k * sb], leaf);
    total = total + leaf;
  }
  return total;
}

struct Declared {
  Tensor logp, dhidden, dweight;
};

// The candidate's declared orders, scalar and literal (see lib/ops/linear_logp.cpp).
Declared declared(const Tensors& in) {
  const Tensor& ht = *find_tensor(in, "hidden");
  const Tensor& wt = *find_tensor(in, "weight");
  const std::int64_t t = ht.shape()[0], h = ht.shape()[1], v = wt.shape()[0];
  const auto hs = ops::to_f32(ht), ws = ops::to_f32(wt);
  const auto y = ops::to_i64(*find_tensor(in, "targets"));
  const float* dy = find_tensor(in, "dy.logp")->data<float>();
  std::vector<float> logits(static_cast<std::size_t>(t * v)), g(logits.size());
  Declared d{Tensor(DType::kF32, {t}), Tensor(DType::kBF16, {t, h}), Tensor(DType::kBF16, {v, h})};
  for (std::int64_t r = 0; r < t; ++r) {
    float* row = logits.data() + r * v;
    for (std::int64_t j = 0; j < v; ++j) row[j] = chunked_dot(hs.data() + r * h, 1, ws.data() + j * h, 1, h);
    ops::LseState acc;
    for (std::int64_t c = 0; c < v; c += ops::kLseChunk) {
      const std::int64_t e = std::min(v, c + ops::kLseChunk);
      float m = -std::numeric_limits<float>::infinity(), s = 0;
      for (std::int64_t j = c; j < e; ++j) m = std::max(m, row[j]);
      for (std::int64_t j = c; j < e; ++j) s += std::exp(row[j] - m);
      if (c == 0) {
        acc = {m, s};
      } else if (m > acc.max) {
        acc = {m, std::fma(acc.sum, std::exp(acc.max - m), s)};
      } else {
        acc.sum = std::fma(s, std::exp(m - acc.max), acc.sum);
      }
    }
    const float lse = acc.max + std::log(acc.sum);
    d.logp.data<float>()[r] = row[y[static_cast<std::size_t>(r)]] - lse;
    for (std::int64_t j = 0; j < v; ++j)
      g[static_cast<std::size_t>(r * v + j)] = dy[r] * ((j == y[static_cast<std::size_t>(r)] ? 1.0f : 0.0f) - std::exp(row[j] - lse));
  }
  for (std::int64_t j = 0; j < v; ++j)
    for (std::int64_t k = 0; k < h; ++k)
      d.dweight.data<std::uint16_t>()[j * h + k] = to_bf16(chunked_dot(g.data() + j, v, hs.data() + k, h, t)).bits;
  for (std::int64_t r = 0; r < t; ++r)
    for (std::int64_t k = 0; k < h; ++k) {
      float sum = 0.0f;
      for (std::int64_t c = 0; c < v; c += ops::kLseChunk)
        sum += chunked_dot(g.data() + r * v + c, 1, ws.data() + c * h + k, h, std::min(ops::kLseChunk, v - c));
      d.dhidden.data<std::uint16_t>()[r * h + k] = to_bf16(sum).bits;
    }
  return d;
}

}  // namespace

TEST_CASE("linear_logp reference agrees with PyTorch float64 within the float32 rows", "[ops][linear_logp]") {
  auto f = oracle("linear_logp");
  const Tensors in = oracle_linear_inputs(*f);
  const OpContext ctx = default_context();
  const Tensor& y = get(op().reference_forward(in, ctx), "logp");
  CHECK(y.dtype() == DType::kF32);
  const auto fa = agree(y, *f->find("ref64.logp"),
                        tolerance(Judgment::kForwardAccuracy, "linear_logp", ContractDType::kFloat32));
  CHECK(fa.violations == 0);
  CHECK(fa.max_abs < tolerance(Judgment::kForwardAccuracy, "linear_logp", ContractDType::kBFloat16).atol / 100);
  const auto bwd = op().reference_backward(in, ctx);
  const auto grad_tol = tolerance(Judgment::kGradientAccuracy, "linear_logp", ContractDType::kFloat32);
  const auto bf16_grad = tolerance(Judgment::kGradientAccuracy, "linear_logp", ContractDType::kBFloat16);
  const auto gh = agree(get(bwd, "dhidden"), *f->find("gref64.h"), grad_tol);
  const auto gw = agree(get(bwd, "dweight"), *f->find("gref64.W"), grad_tol);
  CHECK(gh.violations == 0);
  CHECK(gw.violations == 0);
  CHECK(gh.max_abs < bf16_grad.atol / 100);
  CHECK(gw.max_abs < bf16_grad.atol / 100);
  WARN("linear_logp reference vs float64: logp " << fa.max_abs << ", dhidden " << gh.max_abs << ", dweight " << gw.max_abs);
}

TEST_CASE("linear_logp candidate: FP32 logp, bf16 gradients, green against the reference", "[ops][linear_logp]") {
  const OpContext ctx = default_context();
  auto judge_all = [&](const Tensors& in) {
    const auto cand = op().cpu_forward(in, ctx);
    const auto ref = op().reference_forward(in, ctx);
    CHECK(output_dtype_violations(op().outputs(), *cand).empty());
    auto fj = judge_accuracy(contract(), "linear_logp", "logp", get(cand, "logp"), get(ref, "logp"),
                             tolerance(Judgment::kForwardAccuracy, "linear_logp", ContractDType::kBFloat16));
    REQUIRE(fj.ok());
    CHECK(passed(*fj));
    const auto cb = op().cpu_backward(in, ctx);
    const auto rb = op().reference_backward(in, ctx);
    CHECK(output_dtype_violations(op().gradients(), *cb).empty());
    const auto grad_tol = tolerance(Judgment::kGradientAccuracy, "linear_logp", ContractDType::kBFloat16);
    for (const char* g : {"dhidden", "dweight"}) {
      auto gj = judge_accuracy(contract(), "linear_logp", g, get(cb, g), get(rb, g), grad_tol);
      REQUIRE(gj.ok());
      INFO(g);
      CHECK(passed(*gj));
    }
  };
  SECTION("oracle inputs") {
    auto f = oracle("linear_logp");
    judge_all(oracle_linear_inputs(*f));
  }
  SECTION("several logits blocks and a short last chunk") { judge_all(synthetic(7, 256, 20000, 201)); }
}

TEST_CASE("linear_logp candidate follows its declared orders bit for bit", "[ops][linear_logp]") {
  // V spans three GEMM blocks of the implementation and ends on a partial chunk.
  const Tensors in = synthetic(5, 96, 17000, 211);
  const Declared d = declared(in);
  OpContext ctx = default_context();
  for (const unsigned threads : {0u, 1u, 3u}) {
    ctx.threads = threads;
    INFO("threads " << threads);
    CHECK(passed(judge_bitwise("logp", get(op().cpu_forward(in, ctx), "logp"), d.logp, nan_policy())));
    const auto b = op().cpu_backward(in, ctx);
    CHECK(passed(judge_bitwise("dhidden", get(b, "dhidden"), d.dhidden, nan_policy())));
    CHECK(passed(judge_bitwise("dweight", get(b, "dweight"), d.dweight, nan_policy())));
  }
}

TEST_CASE("linear_logp candidate equals logp's candidate on the materialised FP32 logits", "[ops][linear_logp]") {
  // The fused path and the unfused one (the FP32 logits in the candidates' chunked order, then
  // logp's chunked lse) agree bit for bit: the fusion changes memory, not arithmetic.
  const Tensors in = synthetic(4, 128, 9000, 221);
  const OpContext ctx = default_context();
  const auto hs = ops::to_f32(*find_tensor(in, "hidden")), ws = ops::to_f32(*find_tensor(in, "weight"));
  const auto y = ops::to_i64(*find_tensor(in, "targets"));
  const std::int64_t h = 128, v = 9000;
  Tensor want(DType::kF32, {4});
  std::vector<float> row(static_cast<std::size_t>(v));
  for (std::int64_t r = 0; r < 4; ++r) {
    for (std::int64_t j = 0; j < v; ++j) row[j] = chunked_dot(hs.data() + r * h, 1, ws.data() + j * h, 1, h);
    want.data<float>()[r] = row[y[static_cast<std::size_t>(r)]] - ops::lse_candidate(row.data(), v);
  }
  CHECK(passed(judge_bitwise("logp", get(op().cpu_forward(in, ctx), "logp"), want, nan_policy())));
}

TEST_CASE("linear_logp candidate rows do not depend on the other rows of the call", "[ops][linear_logp]") {
  const std::int64_t n = 11;
  const Tensors all = synthetic(n, 256, 10000, 231);
  const OpContext ctx = default_context();
  const Tensor whole_y = get(op().cpu_forward(all, ctx), "logp");
  const Tensor whole_dh = get(op().cpu_backward(all, ctx), "dhidden");
  auto pick = [&](const std::vector<std::int64_t>& idx) {
    Tensors s;
    for (const auto& t : all)
      s.push_back({t.name, t.name == "weight" ? t.tensor : gather_rows(t.tensor, idx)});
    return s;
  };
  for (const std::int64_t group : {std::int64_t{1}, std::int64_t{4}}) {
    std::vector<Tensor> ys, dhs;
    for (std::int64_t r = 0; r < n; r += group) {
      std::vector<std::int64_t> idx;
      for (std::int64_t i = r; i < std::min(n, r + group); ++i) idx.push_back(i);
      const Tensors s = pick(idx);
      ys.push_back(get(op().cpu_forward(s, ctx), "logp"));
      dhs.push_back(get(op().cpu_backward(s, ctx), "dhidden"));
    }
    INFO("calls of " << group << " rows");
    CHECK(passed(judge_bitwise("logp", concat_rows(ys), whole_y, nan_policy())));
    CHECK(passed(judge_bitwise("dhidden", concat_rows(dhs), whole_dh, nan_policy())));
  }
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  std::rotate(perm.begin(), perm.begin() + 4, perm.end());
  const Tensors permuted = pick(perm);
  CHECK(passed(judge_bitwise("logp", get(op().cpu_forward(permuted, ctx), "logp"), gather_rows(whole_y, perm), nan_policy())));
  CHECK(passed(judge_bitwise("dhidden", get(op().cpu_backward(permuted, ctx), "dhidden"), gather_rows(whole_dh, perm), nan_policy())));
}

TEST_CASE("linear_logp refuses inputs that do not fit", "[ops][linear_logp]") {
  const OpContext ctx = default_context();
  const Tensor h = randn_bf16({2, 32}, 241), w = randn_bf16({50, 32}, 242);
  const Tensor tg = i64_tensor({2}, {0, 49});
  auto message = [](const Result<Tensors>& r) {
    REQUIRE_FALSE(r.ok());
    return r.error().message();
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(message(op().cpu_forward({{"hidden", h}, {"targets", tg}}, ctx)), Contains("linear_logp: weight: missing input"));
  CHECK_THAT(message(op().cpu_forward({{"hidden", h}, {"weight", randn_bf16({50, 31}, 243)}, {"targets", tg}}, ctx)),
             Contains("linear_logp: weight: shape [50, 31] does not fit hidden [2, 32] (needs [V, 32])"));
  CHECK_THAT(message(op().reference_forward({{"hidden", h}, {"weight", widened(w)}, {"targets", tg}}, ctx)),
             Contains("linear_logp: weight: dtype F32"));
  CHECK_THAT(message(op().cpu_forward({{"hidden", h}, {"weight", w}, {"targets", i64_tensor({2}, {0, 50})}}, ctx)),
             Contains("linear_logp: targets: target 50 at element 1 is outside [0, 50)"));
  CHECK_THAT(message(op().cpu_forward({{"hidden", h}, {"weight", w}, {"targets", i64_tensor({2}, {-100, 0})}}, ctx)),
             Contains("linear_logp: targets: target -100 at element 0"));
  CHECK_THAT(message(op().cpu_forward({{"hidden", h}, {"weight", w}, {"targets", i64_tensor({3}, {0, 1, 2})}}, ctx)),
             Contains("linear_logp: targets: shape [3] does not match hidden [2, 32]"));
  CHECK_THAT(message(op().cpu_backward({{"hidden", h}, {"weight", w}, {"targets", tg}, {"dy.logp", Tensor(DType::kF32, {3})}}, ctx)),
             Contains("linear_logp: dy.logp: shape [3] differs from targets [2]"));
  CHECK_THAT(message(op().cpu_backward({{"hidden", h}, {"weight", w}, {"targets", tg}}, ctx)),
             Contains("linear_logp: dy.logp: missing input"));
  CHECK_THAT(message(op().cpu_forward({{"hidden", h}, {"weight", Tensor(DType::kBF16, {0, 32})}, {"targets", tg}}, ctx)),
             Contains("linear_logp: weight: the vocabulary dimension is empty"));
}

TEST_CASE("linear_logp: a bf16 logp output is red at the runner's dtype check", "[ops][linear_logp][planted]") {
  const Tensors in = synthetic(4, 64, 3000, 251);
  const OpContext ctx = default_context();
  Tensors out = *op().cpu_forward(in, ctx);
  CHECK(output_dtype_violations(op().outputs(), out).empty());
  for (auto& t : out) t.tensor = ops::bf16_tensor(t.tensor.shape(), ops::to_f32(t.tensor));
  const auto bad = output_dtype_violations(op().outputs(), out);
  REQUIRE(bad.size() == 1);
  CHECK(bad[0] == "logp: dtype BF16, declared F32");
}

TEST_CASE("linear_logp timing at the real shapes (T=59, H=4096, V=151936)", "[.perf][linear_logp_perf]") {
  const std::int64_t t = 59, h = 4096, v = kVocab;
  // Exact-in-bf16 pattern values (a normal generator over 622M weights would dominate).
  Tensor w(DType::kBF16, {v, h});
  auto* pw = w.data<std::uint16_t>();
  for (std::int64_t i = 0; i < v * h; ++i) pw[i] = to_bf16(static_cast<float>((i * 2654435761LL) % 257 - 128) / 4096.0f).bits;
  const Tensors in = {{"hidden", randn_bf16({t, h}, 261, 1.0f / 64)}, {"weight", w},
                      {"targets", i64_tensor({t}, random_targets(t, v, 262))}, {"dy.logp", randn_f32({t}, 263)}};
  const OpContext ctx = default_context();
  auto time = [](const char* what, const std::function<void()>& f) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    WARN(what << ": " << s << " s wall, " << cpu << " s CPU (all threads)");
  };
  time("candidate forward", [&] { CHECK(op().cpu_forward(in, ctx).ok()); });
  time("candidate backward", [&] { CHECK(op().cpu_backward(in, ctx).ok()); });
  time("reference forward", [&] { CHECK(op().reference_forward(in, ctx).ok()); });
}

// The bench's cuBLAS peers (docs/decisions.md D30): the two gradient products, as lm_head's,
// and the five the algorithm computes (logits recomputed, dhidden and dweight from G hi and G lo).
TEST_CASE("linear_logp work: the gradient products and the algorithm's five", "[ops][linear_logp]") {
  const Op& op = *find_op_impl("linear_logp");
  const Tensor hidden(DType::kBF16, {27, 64}), weight(DType::kBF16, {1000, 64});
  const OpWork fwd = op.work({{"hidden", hidden}, {"weight", weight}}, false);
  REQUIRE(fwd.gemms.size() == 1);
  CHECK(fwd.algorithm_gemms.empty());
  const OpWork bwd = op.work({{"hidden", hidden}, {"weight", weight}}, true);
  REQUIRE(bwd.gemms.size() == 2);
  REQUIRE(bwd.algorithm_gemms.size() == 5);
  const auto is = [](const GemmShape& g, std::int64_t m, std::int64_t n, std::int64_t k) {
    return g.m == m && g.n == n && g.k == k;
  };
  CHECK(is(bwd.algorithm_gemms[0], 27, 1000, 64));  // logits = hidden · Wᵀ, again
  CHECK(is(bwd.algorithm_gemms[1], 27, 64, 1000));  // dhidden, G hi
  CHECK(is(bwd.algorithm_gemms[2], 27, 64, 1000));  // dhidden, G lo
  CHECK(is(bwd.algorithm_gemms[3], 1000, 64, 27));  // dweight, G hi
  CHECK(is(bwd.algorithm_gemms[4], 1000, 64, 27));  // dweight, G lo
  CHECK(find_op_impl("lm_head")->work({{"hidden", hidden}, {"weight", weight}}, true).algorithm_gemms.empty());
}

// logp: the FP32 reference against PyTorch float64, the cpu_bf16 candidate (FP32 output, bf16
// gradient, the declared chunked order bit for bit, batch invariance), bad inputs, and the
// planted defect "logp written as bf16" that the runner's dtype check must catch.
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "logprob_test_util.hpp"
#include "logsumexp.hpp"

using namespace ws1;
using namespace ws1::test;
using namespace ws1::test::logprob;

namespace {

const Op& op() { return op_named("logp"); }

const std::map<std::string, std::string> kRename = {
    {"in.logits", "logits"}, {"in.targets", "targets"}, {"dy.logp", "dy.logp"}};

// The oracle's inputs with its bf16 dy widened to the float32 dy.logp the op declares.
Tensors oracle_logp_inputs(const SafetensorsFile& f) {
  Tensors in = oracle_inputs(f, kRename);
  for (auto& t : in)
    if (t.name == "dy.logp") t.tensor = widened(t.tensor);
  return in;
}

// Synthetic rows at the real vocabulary width: logits of scale `scale`, targets, float32 dy.
Tensors synthetic(std::int64_t n, std::uint64_t seed, float scale) {
  return {{"logits", randn_bf16({n, kVocab}, seed, scale)},
          {"targets", i64_tensor({n}, random_targets(n, kVocab, seed + 1))},
          {"dy.logp", randn_f32({n}, seed + 2)}};
}

// The declared candidate order, written out independently of lib/ops: kLseChunk-wide chunks,
// per chunk max and in-order sum of exp(x - max), merged left to right with one fma.
// Returns the final (max, sum).
std::pair<float, float> declared_state(const float* x, std::int64_t n) {
  float big_m = 0, big_s = 0;
  for (std::int64_t c = 0; c < n; c += ops::kLseChunk) {
    const std::int64_t e = std::min(n, c + ops::kLseChunk);
    float m = -std::numeric_limits<float>::infinity(), s = 0;
    for (std::int64_t i = c; i < e; ++i) m = std::max(m, x[i]);
    for (std::int64_t i = c; i < e; ++i) s += std::exp(x[i] - m);
    if (c == 0) {
      big_m = m;
      big_s = s;
    } else if (m > big_m) {
      big_s = std::fma(big_s, std::exp(big_m - m), s);
      big_m = m;
    } else {
      big_s = std::fma(s, std::exp(m - big_m), big_s);
    }
  }
  return {big_m, big_s};
}

float declared_lse(const float* x, std::int64_t n) {
  const auto [m, s] = declared_state(x, n);
  return m + std::log(s);
}

}  // namespace

TEST_CASE("logp reference agrees with PyTorch float64 within the float32 rows", "[ops][logp]") {
  auto f = oracle("logp");
  const Tensors in = oracle_logp_inputs(*f);
  const OpContext ctx = default_context();
  const Tensor& y = get(op().reference_forward(in, ctx), "logp");
  CHECK(y.dtype() == DType::kF32);  // spec §3.1 condition 4
  const auto fa = agree(y, *f->find("ref64.logp"),
                        tolerance(Judgment::kForwardAccuracy, "logp", ContractDType::kFloat32));
  CHECK(fa.violations == 0);
  // The reference's own error stays below 1% of the bf16 atol (DESIGN §4).
  CHECK(fa.max_abs < tolerance(Judgment::kForwardAccuracy, "logp", ContractDType::kBFloat16).atol / 100);

  const Tensor& dl = get(op().reference_backward(in, ctx), "dlogits");
  CHECK(dl.dtype() == DType::kF32);
  const auto ga = agree(dl, *f->find("gref64.logits"),
                        tolerance(Judgment::kGradientAccuracy, "logp", ContractDType::kFloat32));
  CHECK(ga.violations == 0);
  CHECK(ga.max_abs < tolerance(Judgment::kGradientAccuracy, "logp", ContractDType::kBFloat16).atol / 100);
  WARN("logp reference vs float64: fwd max abs " << fa.max_abs << ", bwd max abs " << ga.max_abs);
}

TEST_CASE("logp declares FP32 output and a bf16 gradient, as the contract's logprob policy says", "[ops][logp]") {
  const auto outs = op().outputs();
  REQUIRE(outs.size() == 1);
  CHECK(outs[0].name == "logp");
  CHECK(outs[0].candidate_dtype == DType::kF32);
  const auto& declared = contract().declarations.output_dtypes;
  REQUIRE(declared.has_value());
  REQUIRE(declared->count(OpClass::kLogprob) == 1);
  CHECK(to_dtype(declared->at(OpClass::kLogprob)) == outs[0].candidate_dtype);
  const auto grads = op().gradients();
  REQUIRE(grads.size() == 1);
  CHECK(grads[0].name == "dlogits");
  CHECK(grads[0].candidate_dtype == DType::kBF16);
}

TEST_CASE("logp candidate: FP32 logp, bf16 dlogits, green against the reference in the bf16 rows", "[ops][logp]") {
  const OpContext ctx = default_context();
  const auto fwd_tol = tolerance(Judgment::kForwardAccuracy, "logp", ContractDType::kBFloat16);
  const auto grad_tol = tolerance(Judgment::kGradientAccuracy, "logp", ContractDType::kBFloat16);
  auto judge_all = [&](const Tensors& in) {
    const auto cand = op().cpu_forward(in, ctx);
    const auto ref = op().reference_forward(in, ctx);
    CHECK(output_dtype_violations(op().outputs(), *cand).empty());
    auto fj = judge_accuracy(contract(), "logp", "logp", get(cand, "logp"), get(ref, "logp"), fwd_tol);
    REQUIRE(fj.ok());
    CHECK(passed(*fj));
    const auto cb = op().cpu_backward(in, ctx);
    const auto rb = op().reference_backward(in, ctx);
    CHECK(output_dtype_violations(op().gradients(), *cb).empty());
    auto gj = judge_accuracy(contract(), "logp", "dlogits", get(cb, "dlogits"), get(rb, "dlogits"), grad_tol);
    REQUIRE(gj.ok());
    CHECK(passed(*gj));
    // The candidate's logp is FP32 too: it stays within the float32 row of the reference.
    auto f32 = judge_accuracy(contract(), "logp", "logp", get(cand, "logp"), get(ref, "logp"),
                              tolerance(Judgment::kForwardAccuracy, "logp", ContractDType::kFloat32));
    REQUIRE(f32.ok());
    CHECK(passed(*f32));
  };
  SECTION("oracle inputs") {
    auto f = oracle("logp");
    judge_all(oracle_logp_inputs(*f));
  }
  SECTION("sharp logits (scale 16), 27 rows") { judge_all(synthetic(27, 11, 16.0f)); }
  SECTION("unit logits, 5 rows") { judge_all(synthetic(5, 21, 1.0f)); }
}

TEST_CASE("logp candidate follows the declared chunked order bit for bit", "[ops][logp]") {
  const OpContext ctx = default_context();
  for (const std::int64_t vocab : {ops::kLseChunk * 3 + 17, kVocab, std::int64_t{5}}) {
    const std::int64_t n = 3;
    const Tensors in = {{"logits", randn_bf16({n, vocab}, 31 + static_cast<std::uint64_t>(vocab), 4.0f)},
                        {"targets", i64_tensor({n}, random_targets(n, vocab, 32))},
                        {"dy.logp", randn_f32({n}, 33)}};
    const Tensor& y = get(op().cpu_forward(in, ctx), "logp");
    const Tensor& dl = get(op().cpu_backward(in, ctx), "dlogits");
    const std::vector<float> x = ops::to_f32(*find_tensor(in, "logits"));
    const auto t = ops::to_i64(*find_tensor(in, "targets"));
    const float* dy = find_tensor(in, "dy.logp")->data<float>();
    Tensor want_y(DType::kF32, {n});
    Tensor want_dl(DType::kBF16, {n, vocab});
    for (std::int64_t r = 0; r < n; ++r) {
      const float* row = x.data() + r * vocab;
      const float lse = declared_lse(row, vocab);
      want_y.data<float>()[r] = row[t[static_cast<std::size_t>(r)]] - lse;
      for (std::int64_t i = 0; i < vocab; ++i) {
        const float onehot = i == t[static_cast<std::size_t>(r)] ? 1.0f : 0.0f;
        want_dl.data<std::uint16_t>()[r * vocab + i] = to_bf16(dy[r] * (onehot - std::exp(row[i] - lse))).bits;
      }
    }
    INFO("vocab " << vocab);
    CHECK(passed(judge_bitwise("logp", y, want_y, nan_policy())));
    CHECK(passed(judge_bitwise("dlogits", dl, want_dl, nan_policy())));
  }
}

TEST_CASE("logsumexp: the candidate's running (max, sum) follows the declared merges bit for bit", "[ops][logp]") {
  // The final lse (about 10) hides an ulp of the sum (about 1e5), so the state is checked too:
  // it is what a twin on another device must reproduce.
  const std::int64_t n = 16;
  const std::vector<float> x = ops::to_f32(randn_bf16({n, kVocab}, 71, 2.0f));
  std::int64_t sums_equal = 0;
  for (std::int64_t r = 0; r < n; ++r) {
    const float* row = x.data() + r * kVocab;
    const ops::LseState got = ops::lse_candidate_state(row, kVocab);
    const auto [m, s] = declared_state(row, kVocab);
    CHECK(float_bits(got.max) == float_bits(m));
    if (float_bits(got.sum) == float_bits(s)) ++sums_equal;
    CHECK(float_bits(ops::lse_candidate(row, kVocab)) == float_bits(declared_lse(row, kVocab)));
  }
  CHECK(sums_equal == n);
}

TEST_CASE("logp candidate is batch invariant: row groups, single rows, permutation, threads", "[ops][logp]") {
  const std::int64_t n = 27;
  const Tensors all = synthetic(n, 41, 1.0f);
  OpContext ctx = default_context();
  const Tensor whole_y = get(op().cpu_forward(all, ctx), "logp");
  const Tensor whole_dl = get(op().cpu_backward(all, ctx), "dlogits");
  auto subset = [&](std::int64_t r0, std::int64_t r1) {
    Tensors s;
    for (const auto& t : all) s.push_back({t.name, rows(t.tensor, r0, r1)});
    return s;
  };
  // Two runs of the same call are identical.
  CHECK(passed(judge_bitwise("logp", get(op().cpu_forward(all, ctx), "logp"), whole_y, nan_policy())));
  CHECK(passed(judge_bitwise("dlogits", get(op().cpu_backward(all, ctx), "dlogits"), whole_dl, nan_policy())));
  for (const std::int64_t group : {std::int64_t{1}, std::int64_t{4}, std::int64_t{7}}) {
    std::vector<Tensor> ys, dls;
    for (std::int64_t r = 0; r < n; r += group) {
      const Tensors s = subset(r, std::min(n, r + group));
      ys.push_back(get(op().cpu_forward(s, ctx), "logp"));
      dls.push_back(get(op().cpu_backward(s, ctx), "dlogits"));
    }
    INFO("calls of " << group << " rows");
    CHECK(passed(judge_bitwise("logp", concat_rows(ys), whole_y, nan_policy())));
    CHECK(passed(judge_bitwise("dlogits", concat_rows(dls), whole_dl, nan_policy())));
  }
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.end());
  std::rotate(perm.begin(), perm.begin() + 5, perm.end());
  Tensors permuted;
  for (const auto& t : all) permuted.push_back({t.name, gather_rows(t.tensor, perm)});
  CHECK(passed(judge_bitwise("logp", get(op().cpu_forward(permuted, ctx), "logp"), gather_rows(whole_y, perm), nan_policy())));
  CHECK(passed(judge_bitwise("dlogits", get(op().cpu_backward(permuted, ctx), "dlogits"),
                             gather_rows(whole_dl, perm), nan_policy())));
  for (const unsigned threads : {1u, 3u}) {
    ctx.threads = threads;
    INFO("threads " << threads);
    CHECK(passed(judge_bitwise("logp", get(op().cpu_forward(all, ctx), "logp"), whole_y, nan_policy())));
    CHECK(passed(judge_bitwise("dlogits", get(op().cpu_backward(all, ctx), "dlogits"), whole_dl, nan_policy())));
  }
  // The [B, T, V] layout of the accuracy fixtures gives the same rows as the flat [B*T, V] one.
  Tensors batched;
  for (const auto& t : all) {
    Shape s = t.tensor.shape();
    s[0] = 3;
    s.insert(s.begin() + 1, 9);
    batched.push_back({t.name, t.tensor.view(s)});
  }
  const Tensor by = get(op().cpu_forward(batched, ctx), "logp");
  CHECK(by.shape() == Shape{3, 9});
  CHECK(passed(judge_bitwise("logp", by.view({n}), whole_y, nan_policy())));
}

TEST_CASE("logp refuses inputs that do not fit", "[ops][logp]") {
  const OpContext ctx = default_context();
  const Tensor logits = randn_bf16({2, 16}, 51);
  const Tensor targets = i64_tensor({2}, {3, 15});
  const Tensor dy(DType::kF32, {2});
  auto message = [](const Result<Tensors>& r) {
    REQUIRE_FALSE(r.ok());
    return r.error().message();
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(message(op().cpu_forward({{"targets", targets}}, ctx)), Contains("logp: logits: missing input"));
  CHECK_THAT(message(op().reference_forward({{"logits", logits}}, ctx)), Contains("logp: targets: missing input"));
  CHECK_THAT(message(op().cpu_forward({{"logits", widened(logits)}, {"targets", targets}}, ctx)),
             Contains("logp: logits: dtype F32"));
  CHECK_THAT(message(op().cpu_forward({{"logits", logits}, {"targets", i64_tensor({3}, {0, 1, 2})}}, ctx)),
             Contains("logp: targets: shape [3] does not match logits [2, 16]"));
  CHECK_THAT(message(op().cpu_forward({{"logits", logits}, {"targets", i64_tensor({2}, {3, 16})}}, ctx)),
             Contains("logp: targets: target 16 at element 1 is outside [0, 16)"));
  CHECK_THAT(message(op().reference_forward({{"logits", logits}, {"targets", i64_tensor({2}, {-1, 0})}}, ctx)),
             Contains("logp: targets: element 0 is -1, not a class in [0, 16)"));
  // ignore_index is batch_invariant_logp's convention, not logp's: -100 is out of range here.
  CHECK_THAT(message(op().cpu_forward({{"logits", logits}, {"targets", i64_tensor({2}, {-100, 0})}}, ctx)),
             Contains("logp: targets: target -100"));
  CHECK_THAT(message(op().cpu_backward({{"logits", logits}, {"targets", targets}}, ctx)),
             Contains("logp: dy.logp: missing input"));
  CHECK_THAT(message(op().cpu_backward({{"logits", logits}, {"targets", targets}, {"dy.logp", Tensor(DType::kBF16, {2})}}, ctx)),
             Contains("logp: dy.logp: dtype BF16"));
  CHECK_THAT(message(op().reference_backward({{"logits", logits}, {"targets", targets}, {"dy.logp", Tensor(DType::kF32, {1})}}, ctx)),
             Contains("logp: dy.logp: shape [1] should be the targets' [2]"));
  CHECK_THAT(message(op().cpu_forward({{"logits", Tensor(DType::kBF16, {2, 0})}, {"targets", targets}}, ctx)),
             Contains("logp: logits: the vocabulary dimension is empty"));
  CHECK(op().cpu_forward({{"logits", logits}, {"targets", targets}, {"dy.logp", dy}}, ctx).ok());
}

TEST_CASE("logp planted defect: logp written as bf16 is red at the dtype check", "[ops][logp][planted]") {
  const OpContext ctx = default_context();
  // The defect: the CUDA generic op of spec §9.5, which allocates its output like the logits.
  auto bf16_logp = [&](const Tensors& in) {
    Tensors out = *op().cpu_forward(in, ctx);
    for (auto& t : out) t.tensor = ops::bf16_tensor(t.tensor.shape(), ops::to_f32(t.tensor));
    return out;
  };
  const auto fwd_tol = tolerance(Judgment::kForwardAccuracy, "logp", ContractDType::kBFloat16);
  auto value_judgment = [&](const Tensors& in, const Tensors& produced) {
    const Tensor& ref = get(op().reference_forward(in, ctx), "logp");
    auto j = judge_accuracy(contract(), "logp", "logp", *find_tensor(produced, "logp"), ref, fwd_tol);
    REQUIRE(j.ok());
    return *j;
  };

  // Sharp logits (the fixtures' logit stress): |logp| reaches the bf16 steps of 0.25..0.5.
  const Tensors in = synthetic(27, 61, 16.0f);
  const Tensors good = *op().cpu_forward(in, ctx);
  const Tensors bad = bf16_logp(in);
  // 1. The runner's output-dtype check: green for the candidate, red for the defect.
  CHECK(output_dtype_violations(op().outputs(), good).empty());
  const auto violations = output_dtype_violations(op().outputs(), bad);
  REQUIRE(violations.size() == 1);
  CHECK(violations[0] == "logp: dtype BF16, declared F32");
  // 2. Its values, judged in the bf16 row: red as well on sharp logits; the candidate is green.
  const AccuracyTensor bad_values = value_judgment(in, bad);
  CHECK(passed(value_judgment(in, good)));
  CHECK_FALSE(passed(bad_values));
  CHECK(bad_values.violations > 0);
  WARN("logp as bf16, sharp logits: " << bad_values.violations << " of 27 values outside the bf16 row");
  // On the oracle's milder logits the value judgment alone may pass: only the dtype check is
  // reliable, which is why the runner checks declared dtypes before values.
  if (auto f = oracle("logp")) {
    const Tensors oin = oracle_logp_inputs(*f);
    CHECK_FALSE(output_dtype_violations(op().outputs(), bf16_logp(oin)).empty());
    const AccuracyTensor mild = value_judgment(oin, bf16_logp(oin));
    WARN("logp as bf16, oracle logits: " << mild.violations << " violations, max abs error "
                                          << mild.abs_error.max);
  }
}

// The naive (eager bf16) attention: a hand-worked case bit for bit, the smoke fixtures against
// the FP32 reference, the GQA group sum, and bad input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "naive_test_support.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;
using namespace ws1::test;

namespace {


// ---- the hand-worked case: 1 batch, 1 head, Sq = 2 queries, Skv = 3 keys, D = 2 ----
// D = 2 makes scale = float(1/sqrt(2)) inexact, so q * scale rounds; with Sq < Skv the causal
// mask is bottom-right: query 0 sees keys 0-1, query 1 sees keys 0-2. Inputs found by a numpy
// search for a case where dropping any one of the roundings (qs, s, p; dp and ds) changes the
// bf16 output.
constexpr std::int64_t kSq = 2, kSkv = 3, kD = 2;
const std::vector<float> kQv = {-1.546875f, 1.390625f, 0.609375f, -0.578125f};
const std::vector<float> kKv = {-0.671875f, 0.65625f, -1.21875f, 0.25f, -1.71875f, 1.140625f};
const std::vector<float> kVv = {1.53125f, 1.03125f, 1.65625f, -1.765625f, -1.96875f, 0.625f};
const std::vector<float> kDo = {-1.328125f, -1.078125f, 1.28125f, 0.609375f};

struct Rounding {
  bool qs = true, s = true, p = true, grad = true;  // grad: dp, ds and dqs
};
struct Eager {
  std::vector<float> o, dq, dk, dv;
};

float maybe(bool round, float x) { return round ? round_bf16(x) : x; }

// c[m, n] = a[m, k] @ b[k, n], FP32 products added in increasing k from +0 (what matmul_bf16
// does for k <= 32), then rounded unless `round` is off.
std::vector<float> mm(const std::vector<float>& a, const std::vector<float>& b, std::int64_t m, std::int64_t k,
                      std::int64_t n, bool round) {
  std::vector<float> c(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::int64_t t = 0; t < k; ++t) acc = acc + a[i * k + t] * b[t * n + j];
      c[i * n + j] = maybe(round, acc);
    }
  return c;
}

// The eager sequence of lib/naive/attention.cpp written out for the tiny case; every output
// (o, dv, dq, dk) is rounded, the intermediates as `r` says.
Eager eager(const Rounding& r) {
  const float scale = static_cast<float>(1.0 / std::sqrt(2.0));
  std::vector<float> qs(kQv.size());
  for (std::size_t e = 0; e < qs.size(); ++e) qs[e] = maybe(r.qs, kQv[e] * scale);
  std::vector<float> s = mm(qs, transposed(kKv, kSkv, kD), kSq, kD, kSkv, r.s);
  std::vector<float> p(s.size());
  for (std::int64_t i = 0; i < kSq; ++i) {
    const std::int64_t seen = i + (kSkv - kSq) + 1;  // keys [0, seen) visible
    float m = -std::numeric_limits<float>::infinity(), sum = 0.0f;
    for (std::int64_t j = 0; j < seen; ++j) m = std::max(m, s[i * kSkv + j]);
    for (std::int64_t j = 0; j < kSkv; ++j) sum = sum + (j < seen ? std::exp(s[i * kSkv + j] - m) : 0.0f);
    for (std::int64_t j = 0; j < kSkv; ++j) p[i * kSkv + j] = j < seen ? maybe(r.p, std::exp(s[i * kSkv + j] - m) / sum) : 0.0f;
  }
  Eager out;
  out.o = mm(p, kVv, kSq, kSkv, kD, true);
  out.dv = mm(transposed(p, kSq, kSkv), kDo, kSkv, kSq, kD, true);
  const std::vector<float> dp = mm(kDo, transposed(kVv, kSkv, kD), kSq, kD, kSkv, r.grad);
  std::vector<float> ds(dp.size());
  for (std::int64_t i = 0; i < kSq; ++i) {
    float dsum = 0.0f;
    for (std::int64_t j = 0; j < kSkv; ++j) dsum = dsum + dp[i * kSkv + j] * p[i * kSkv + j];
    for (std::int64_t j = 0; j < kSkv; ++j) ds[i * kSkv + j] = maybe(r.grad, p[i * kSkv + j] * (dp[i * kSkv + j] - dsum));
  }
  out.dq = mm(ds, kKv, kSq, kSkv, kD, r.grad);
  for (float& x : out.dq) x = round_bf16(x * scale);
  out.dk = mm(transposed(ds, kSq, kSkv), qs, kSkv, kSq, kD, true);
  return out;
}

Tensors tiny_inputs() {
  return {{"q", bf16_of({1, 1, kSq, kD}, kQv)},
          {"k", bf16_of({1, 1, kSkv, kD}, kKv)},
          {"v", bf16_of({1, 1, kSkv, kD}, kVv)},
          {"dy.o", bf16_of({1, 1, kSq, kD}, kDo)}};
}

void check_bits(const Tensor& got, const std::vector<float>& want) {
  const std::vector<float> g = values_of(got);
  REQUIRE(g.size() == want.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": " << g[i] << " against " << want[i]);
    CHECK(bits_of(g[i]) == bits_of(want[i]));
  }
}

}  // namespace

TEST_CASE("naive attention: a hand-worked case, bit for bit", "[naive][attention]") {
  const Eager want = eager({});
  // The case is sensitive: each rounding the eager graph stores changes a bf16 output, so a
  // naive engine that skipped one would not match.
  CHECK(eager({.qs = false}).o != want.o);
  CHECK(eager({.s = false}).o != want.o);
  CHECK(eager({.p = false}).o != want.o);
  CHECK(eager({.p = false}).dv != want.dv);
  CHECK(eager({.grad = false}).dq != want.dq);
  // The in-test sequence agrees with the same sequence run in numpy (float32 ops, bf16 by bit
  // rounding), so neither carries a shared slip: these are its values.
  CHECK(want.o == std::vector<float>{1.59375f, -0.5f, 0.83984375f, -0.119140625f});
  CHECK(want.dv == std::vector<float>{-0.076171875f, -0.2373046875f, -0.23828125f, -0.357421875f, 0.271484375f,
                                      0.12890625f});
  CHECK(want.dq == std::vector<float>{-0.271484375f, -0.201171875f, 0.48828125f, -0.234375f});
  CHECK(want.dk ==
        std::vector<float>{1.046875f, -0.95703125f, -0.76171875f, 0.68359375f, -0.2890625f, 0.2734375f});

  const OpContext ctx = smoke_ctx();
  auto fwd = naive::forward("attention", tiny_inputs(), ctx);
  REQUIRE(fwd.ok());
  check_bits(test::tensor_named(*fwd, "o"), want.o);
  auto bwd = naive::backward("attention", tiny_inputs(), ctx);
  REQUIRE(bwd.ok());
  check_bits(test::tensor_named(*bwd, "dq"), want.dq);
  check_bits(test::tensor_named(*bwd, "dk"), want.dk);
  check_bits(test::tensor_named(*bwd, "dv"), want.dv);
}

TEST_CASE("naive attention: smoke fixtures against the FP32 reference", "[naive][attention]") {
  const OpContext ctx = smoke_ctx();
  const Op* op = find_op_impl("attention");
  REQUIRE(op != nullptr);
  for (const std::string id : {"attention/primary/normal", "attention/primary/key_mask"}) {
    INFO(id);
    const Tensors in = test::fixture_inputs(id);
    if (id.ends_with("key_mask")) REQUIRE(find_tensor(in, "key_mask") != nullptr);
    for (const bool backward : {false, true}) {
      INFO((backward ? "backward" : "forward"));
      auto got = backward ? naive::backward("attention", in, ctx) : naive::forward("attention", in, ctx);
      INFO((got.ok() ? std::string() : got.error().message()));
      REQUIRE(got.ok());
      auto ref = backward ? ref::backward("attention", in, ctx) : ref::forward("attention", in, ctx);
      REQUIRE(ref.ok());
      // The reference's tensors, in its order; the dtypes the op declares for a candidate.
      REQUIRE(got->size() == ref->size());
      const std::vector<TensorDecl> decls = backward ? op->gradients() : op->outputs();
      for (std::size_t t = 0; t < ref->size(); ++t) {
        const NamedTensor& r = (*ref)[t];
        INFO(r.name);
        CHECK((*got)[t].name == r.name);
        const Tensor& g = test::tensor_named(*got, r.name);
        CHECK(g.shape() == r.tensor.shape());
        for (const TensorDecl& d : decls)
          if (d.name == r.name) CHECK(g.dtype() == d.candidate_dtype);
        // FlashAttention's naive baseline is within a few bf16 steps of the peak: 2^-4 relative
        // to the peak is loose enough for any row, tight enough to catch a wrong formula.
        const std::vector<float> gv = values_of(g), rv = values_of(r.tensor);
        double err = 0.0, peak = 0.0;
        bool differs_from_rounded_ref = false;
        for (std::size_t i = 0; i < rv.size(); ++i) {
          REQUIRE(std::isfinite(rv[i]));  // the fixtures have a visible key in every row
          err = std::max(err, std::fabs(static_cast<double>(gv[i]) - rv[i]));
          peak = std::max(peak, std::fabs(static_cast<double>(rv[i])));
          differs_from_rounded_ref = differs_from_rounded_ref || gv[i] != round_bf16(rv[i]);
        }
        INFO("max|naive - ref| " << err << ", max|ref| " << peak);
        CHECK(peak > 0.0);
        CHECK(err <= peak / 16.0);
        // Evidence that the intermediates are rounded: not just the reference rounded once.
        if (r.name == "o") CHECK(differs_from_rounded_ref);
      }
    }
  }
}

TEST_CASE("naive attention: GQA dk, dv are the group's heads run separately, summed", "[naive][attention]") {
  // B = 2, Hq = 4 over Hkv = 2 (query heads 0-1 read kv head 0, 2-3 kv head 1), Sq < Skv
  // (bottom-right), a key_mask with pads (key 0 valid: no empty row), D = 8.
  const std::int64_t b = 2, hq = 4, hkv = 2, sq = 5, skv = 7, d = 8, group = hq / hkv;
  std::mt19937 gen(20240611);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto random = [&](std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = round_bf16(normal(gen));
    return v;
  };
  Tensor mask(DType::kBool, {b, skv});
  for (std::int64_t i = 0; i < b * skv; ++i) mask.data<std::uint8_t>()[i] = (i % skv) < (i < skv ? 6 : 4) ? 1 : 0;
  const Tensor q = bf16_of({b, hq, sq, d}, random(b * hq * sq * d));
  const Tensor k = bf16_of({b, hkv, skv, d}, random(b * hkv * skv * d));
  const Tensor v = bf16_of({b, hkv, skv, d}, random(b * hkv * skv * d));
  const Tensor dy = bf16_of({b, hq, sq, d}, random(b * hq * sq * d));
  const OpContext ctx = smoke_ctx();
  auto all = naive::backward("attention", {{"q", q}, {"k", k}, {"v", v}, {"dy.o", dy}, {"key_mask", mask}}, ctx);
  REQUIRE(all.ok());
  auto o_all = naive::forward("attention", {{"q", q}, {"k", k}, {"v", v}, {"key_mask", mask}}, ctx);
  REQUIRE(o_all.ok());

  // Each query head alone (Hq = Hkv = 1: no repeat_interleave, so its dk, dv are that head's
  // bf16 gradients of the expanded k, v).
  std::vector<Tensors> heads;
  for (std::int64_t h = 0; h < hq; ++h) {
    const std::int64_t kvh = h / group;
    const Tensors one = {{"q", q.slice(1, h, h + 1).contiguous()},
                         {"k", k.slice(1, kvh, kvh + 1).contiguous()},
                         {"v", v.slice(1, kvh, kvh + 1).contiguous()},
                         {"dy.o", dy.slice(1, h, h + 1).contiguous()},
                         {"key_mask", mask}};
    auto g = naive::backward("attention", one, ctx);
    REQUIRE(g.ok());
    heads.push_back(*g);
    // o and dq are per query head: the separate run gives the same bits.
    auto o = naive::forward("attention", {one[0], one[1], one[2], one[4]}, ctx);
    REQUIRE(o.ok());
    CHECK(values_of(test::tensor_named(*o, "o")) ==
          values_of(test::tensor_named(*o_all, "o").slice(1, h, h + 1)));
    CHECK(values_of(test::tensor_named(*g, "dq")) ==
          values_of(test::tensor_named(*all, "dq").slice(1, h, h + 1)));
  }
  // repeat_interleave's backward: the group's bf16 head gradients summed in FP32 (head order),
  // rounded once.
  for (const std::string name : {"dk", "dv"}) {
    INFO(name);
    for (std::int64_t kvh = 0; kvh < hkv; ++kvh) {
      const std::vector<float> got = values_of(test::tensor_named(*all, name).slice(1, kvh, kvh + 1));
      std::vector<float> want(got.size(), 0.0f);
      for (std::int64_t g = 0; g < group; ++g) {
        const std::vector<float> part = values_of(test::tensor_named(heads[kvh * group + g], name));
        for (std::size_t i = 0; i < want.size(); ++i) want[i] = g == 0 ? part[i] : want[i] + part[i];
      }
      for (float& x : want) x = round_bf16(x);
      for (std::size_t i = 0; i < want.size(); ++i) {
        INFO("kv head " << kvh << " element " << i);
        CHECK(bits_of(got[i]) == bits_of(want[i]));
      }
      // The sum is a real one: the group's heads do not agree with each other.
      CHECK(values_of(test::tensor_named(heads[kvh * group], name)) !=
            values_of(test::tensor_named(heads[kvh * group + 1], name)));
    }
  }
}

TEST_CASE("naive attention: a missing tensor is bad input naming the op and the tensor", "[naive][attention]") {
  const OpContext ctx = smoke_ctx();
  Tensors in = tiny_inputs();
  const auto without = [&](const std::string& name) {
    Tensors out;
    for (const NamedTensor& t : in)
      if (t.name != name) out.push_back(t);
    return out;
  };
  auto fwd = naive::forward("attention", without("k"), ctx);
  REQUIRE_FALSE(fwd.ok());
  CHECK(fwd.error().code == ExitCode::kBadInput);
  CHECK(fwd.error().file == "attention");
  CHECK(fwd.error().where == "k");
  CHECK_THAT(fwd.error().message(), Catch::Contains("attention") && Catch::Contains("missing input"));
  // The backward's upstream gradient is checked too.
  auto bwd = naive::backward("attention", without("dy.o"), ctx);
  REQUIRE_FALSE(bwd.ok());
  CHECK(bwd.error().file == "attention");
  CHECK(bwd.error().where == "dy.o");
  // The forward does not need it.
  CHECK(naive::forward("attention", without("dy.o"), ctx).ok());
}

// The naive (eager bf16) GEMM and logprob ops: det_gemm, lm_head, logp, batch_invariant_logp and
// linear_logp. For each: a hand-worked case bit for bit, with the expected values computed here
// from the eager definition (round_bf16 wherever an eager op stores a bf16 tensor); the smoke
// primary/normal fixture against the FP32 reference; and bad input naming op and tensor.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "naive_test_support.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;
using namespace ws1::test;

namespace {


// ---- tensors in and out ----

// Tensor `name` of `got` has `dtype`, `shape` and exactly the values `want` (bit for bit).
void check_exact(const Tensors& got, const std::string& name, DType dtype, const Shape& shape,
                 const std::vector<float>& want) {
  INFO(name);
  const Tensor& t = test::tensor_named(got, name);
  CHECK(t.dtype() == dtype);
  REQUIRE(t.shape() == shape);
  const std::vector<float> v = values_of(t);
  REQUIRE(v.size() == want.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    INFO("element " << i << ": got " << v[i] << ", want " << want[i]);
    CHECK(bits_of(v[i]) == bits_of(want[i]));
  }
}

// ---- the eager definitions, written out for tiny sizes ----
// Sums run left to right in FP32 from +0: for fewer than 32 terms that is the order of both
// matmul_bf16 and sum_fp32.

// One bf16 matmul: c[m, n] = round_bf16(sum_k a[m, k] * b[k, n]); `unrounded` gets the FP32 sums.
std::vector<float> mm_bf16(const std::vector<float>& a, const std::vector<float>& b, std::int64_t m,
                           std::int64_t k, std::int64_t n, std::vector<float>* unrounded = nullptr) {
  std::vector<float> c(static_cast<std::size_t>(m * n));
  if (unrounded != nullptr) unrounded->assign(c.size(), 0.0f);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      float s = 0.0f;
      for (std::int64_t p = 0; p < k; ++p) {
        const float prod = a[i * k + p] * b[p * n + j];
        s += prod;
      }
      if (unrounded != nullptr) (*unrounded)[i * n + j] = s;
      c[i * n + j] = round_bf16(s);
    }
  return c;
}

// F.log_softmax of one row: (x - max) - log(sum exp(x - max)) in FP32, then (round) one bf16
// rounding per element; round = false gives the FP32 values (what rounding changes).
std::vector<float> log_softmax_row(const std::vector<float>& x, bool round = true) {
  const float m = *std::max_element(x.begin(), x.end());
  float s = 0.0f;
  for (const float v : x) s += std::exp(v - m);
  const float log_s = std::log(s);
  std::vector<float> out;
  for (const float v : x) out.push_back(round ? round_bf16((v - m) - log_s) : (v - m) - log_s);
  return out;
}

// log_softmax's backward node for the row `out` when the gathered element y gets the float32
// upstream dy: g = scatter(y, bf(dy)); dx = bf(g - exp(out) * sum(g)).
std::vector<float> log_softmax_row_backward(const std::vector<float>& out, std::int64_t y, float dy) {
  std::vector<float> g(out.size(), 0.0f);
  g[static_cast<std::size_t>(y)] = round_bf16(dy);
  float s = 0.0f;
  for (const float v : g) s += v;
  std::vector<float> dx;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const float p = std::exp(out[i]) * s;
    dx.push_back(round_bf16(g[i] - p));
  }
  return dx;
}

std::vector<float> row(const std::vector<float>& x, std::int64_t r, std::int64_t width) {
  return {x.begin() + r * width, x.begin() + (r + 1) * width};
}

// ---- the smoke fixture against the FP32 reference ----

float max_abs(const std::vector<float>& v) {
  float m = 0.0f;
  for (const float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// On `op`'s primary/normal smoke fixture, forward and backward: the naive tensors are the
// reference's (names, shapes) in the op's declared dtypes and close to it (logp outputs:
// max|naive - ref| <= 2^-4 * max(1, max|ref|), they cross zero; the rest relative to max|ref|).
// Returns, per direction, whether some element differs from round_bf16(ref): the trace of a
// rounded intermediate (a lone output rounding gives round_bf16(ref) up to summation order).
struct Differs {
  bool forward = false, backward = false;
};
Differs check_fixture(const std::string& op) {
  INFO(op);
  const Op* impl = find_op_impl(op);
  REQUIRE(impl != nullptr);
  const Tensors in = test::fixture_inputs(op + "/primary/normal");
  const OpContext ctx = smoke_ctx();
  Differs differs;
  for (const bool backward : {false, true}) {
    INFO((backward ? "backward" : "forward"));
    const Tensors got = naive_run(op, in, backward);
    auto ref = backward ? ref::backward(op, in, ctx) : ref::forward(op, in, ctx);
    REQUIRE(ref.ok());
    const std::vector<TensorDecl> decls = backward ? impl->gradients() : impl->outputs();
    REQUIRE_FALSE(decls.empty());
    CHECK(got.size() == decls.size());
    CHECK(ref->size() == decls.size());
    for (const TensorDecl& d : decls) {
      INFO(d.name);
      const Tensor& t = test::tensor_named(got, d.name);
      const Tensor& r = test::tensor_named(*ref, d.name);
      CHECK(t.dtype() == d.candidate_dtype);
      REQUIRE(t.shape() == r.shape());
      const std::vector<float> v = values_of(t), rv = values_of(r);
      float err = 0.0f;
      for (std::size_t i = 0; i < v.size(); ++i) {
        err = std::max(err, std::fabs(v[i] - rv[i]));
        if (bits_of(v[i]) != bits_of(round_bf16(rv[i]))) (backward ? differs.backward : differs.forward) = true;
      }
      const float scale = d.name == "logp" ? std::max(1.0f, max_abs(rv)) : max_abs(rv);
      INFO("max |naive - ref| " << err << ", scale " << scale);
      CHECK(std::isfinite(err));
      CHECK(err <= 0.0625f * scale);
    }
  }
  return differs;
}

// ---- bad input ----

}  // namespace

// ==== det_gemm ====

// a [2, 3] @ b [3, 2]: c[0, 0] = 1 + 2^-8 + 2^-8 is 1 + 2^-7 only when the products are summed
// in FP32 (bf16 steps would drop each 2^-8); c[0, 1] = 1 + 2^-9 + 2^-16 rounds to 1.
TEST_CASE("naive det_gemm: hand-worked, forward and backward bit for bit", "[naive][gemm_logprob]") {
  const float e8 = std::ldexp(1.0f, -8), e9 = std::ldexp(1.0f, -9), e6 = std::ldexp(1.0f, -6);
  const std::vector<float> a = {1, e8, e8, 1, 3, e6};
  const std::vector<float> b = {1, 1, 1, 0.5f, 1, e8};
  const std::vector<float> dy = {1, e8, e9, 3};
  const Tensors in = {{"a", bf16_of({2, 3}, a)}, {"b", bf16_of({3, 2}, b)}, {"dy.c", bf16_of({2, 2}, dy)}};

  std::vector<float> c_fp32;
  const std::vector<float> c = mm_bf16(a, b, 2, 3, 2, &c_fp32);
  CHECK(c[0] == 1.0f + std::ldexp(1.0f, -7));
  CHECK(c[1] == 1.0f);
  CHECK(c_fp32[1] != c[1]);  // the output rounding matters
  check_exact(naive_run("det_gemm", in, false), "c", DType::kBF16, {2, 2}, c);

  // da = bf(dy @ b^T), db = bf(a^T @ dy).
  std::vector<float> da_fp32, db_fp32;
  const std::vector<float> da = mm_bf16(dy, transposed(b, 3, 2), 2, 2, 3, &da_fp32);
  const std::vector<float> db = mm_bf16(transposed(a, 2, 3), dy, 3, 2, 2, &db_fp32);
  CHECK(da_fp32 != da);
  CHECK(db_fp32 != db);
  const Tensors grads = naive_run("det_gemm", in, true);
  CHECK(grads.size() == 2);
  check_exact(grads, "da", DType::kBF16, {2, 3}, da);
  check_exact(grads, "db", DType::kBF16, {3, 2}, db);
}

TEST_CASE("naive det_gemm: smoke fixture close to the FP32 reference", "[naive][gemm_logprob]") {
  check_fixture("det_gemm");
}

TEST_CASE("naive det_gemm: bad input names op and tensor", "[naive][gemm_logprob]") {
  check_missing("det_gemm", "b", false);
  check_missing("det_gemm", "dy.c", true);
}

// ==== lm_head ====

// hidden [1, 2, 2] (leading dimensions are rows) @ weight [3, 2]^T: each logit one FP32 dot
// rounded once; the backward's two products likewise.
TEST_CASE("naive lm_head: hand-worked, forward and backward bit for bit", "[naive][gemm_logprob]") {
  const std::vector<float> h = {1.5f, 0.3125f, -2.0f, 0.0078125f};
  const std::vector<float> w = {0.75f, 1.25f, -0.5f, 0.3359375f, 3.0f, -0.01171875f};
  const std::vector<float> dy = {0.5f, 0.0390625f, -1.0f, 2.0f, 0.0048828125f, 0.1171875f};
  const Tensors in = {
      {"hidden", bf16_of({1, 2, 2}, h)}, {"weight", bf16_of({3, 2}, w)}, {"dy.logits", bf16_of({1, 2, 3}, dy)}};

  std::vector<float> z_fp32;
  const std::vector<float> z = mm_bf16(h, transposed(w, 3, 2), 2, 2, 3, &z_fp32);
  CHECK(z_fp32 != z);
  check_exact(naive_run("lm_head", in, false), "logits", DType::kBF16, {1, 2, 3}, z);

  // dhidden = bf(dy @ weight), dweight = bf(dy^T @ hidden).
  const Tensors grads = naive_run("lm_head", in, true);
  check_exact(grads, "dhidden", DType::kBF16, {1, 2, 2}, mm_bf16(dy, w, 2, 3, 2));
  check_exact(grads, "dweight", DType::kBF16, {3, 2}, mm_bf16(transposed(dy, 2, 3), h, 3, 2, 2));
}

TEST_CASE("naive lm_head: smoke fixture close to the FP32 reference", "[naive][gemm_logprob]") {
  check_fixture("lm_head");
}

TEST_CASE("naive lm_head: bad input names op and tensor", "[naive][gemm_logprob]") {
  check_missing("lm_head", "weight", false);
  check_missing("lm_head", "dy.logits", true);
}

// ==== logp ====

// Two rows of 3 logits. The log-softmax is stored in bf16 before the gather, so logp is
// round_bf16 of the FP32 value; the backward's exp(out) reads that rounded out (row 0's
// out[0] = -10.70 rounds by 0.014, which moves its dlogit), and dy (0.3, not a bf16 value) is
// rounded to bf16 first.
TEST_CASE("naive logp: hand-worked, forward and backward bit for bit", "[naive][gemm_logprob]") {
  const std::vector<float> x = {-8.0f, 1.0f, 2.5f, -1.0f, 0.5f, 3.0f};
  const std::vector<std::int64_t> y = {2, 2};
  const std::vector<float> dy = {0.3f, -1.7f};
  const Tensors in = {{"logits", bf16_of({2, 3}, x)}, {"targets", i64_of({2}, y)}, {"dy.logp", f32_of({2}, dy)}};

  std::vector<float> logp, dlogits;
  for (std::int64_t r = 0; r < 2; ++r) {
    const std::vector<float> out = log_softmax_row(row(x, r, 3));
    logp.push_back(out[static_cast<std::size_t>(y[r])]);
    const std::vector<float> dx = log_softmax_row_backward(out, y[r], dy[r]);
    dlogits.insert(dlogits.end(), dx.begin(), dx.end());
  }
  // The bf16 rounding of out matters, forward (the gathered value) and backward (exp(out)).
  const std::vector<float> exact_out = log_softmax_row(row(x, 0, 3), false);
  CHECK(exact_out[2] != logp[0]);
  CHECK(log_softmax_row_backward(exact_out, y[0], dy[0]) != row(dlogits, 0, 3));

  check_exact(naive_run("logp", in, false), "logp", DType::kF32, {2}, logp);
  const Tensors grads = naive_run("logp", in, true);
  CHECK(grads.size() == 1);
  check_exact(grads, "dlogits", DType::kBF16, {2, 3}, dlogits);
}

TEST_CASE("naive logp: smoke fixture close to the FP32 reference", "[naive][gemm_logprob]") {
  const Differs d = check_fixture("logp");
  // The forward is one rounding of an FP32 value (equal to round_bf16(ref) where the FP32 sums
  // agree); the backward's exp(bf16 out) is where the intermediate rounding shows.
  CHECK(d.backward);
}

TEST_CASE("naive logp: bad input names op and tensor", "[naive][gemm_logprob]") {
  check_missing("logp", "targets", false);
  check_missing("logp", "dy.logp", true);
}

// ==== batch_invariant_logp ====

// logp's rows with an ignored one between them: the ignored row is +0 forward and backward
// (outside the graph, even with infinite logits), the others are logp's values.
TEST_CASE("naive batch_invariant_logp: hand-worked, ignored rows +0, bit for bit", "[naive][gemm_logprob]") {
  const std::int64_t ignore = smoke_ctx().ignore_index;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0.0f, 1.0f, 2.0f, inf, -inf, 5.0f, -1.0f, 0.5f, 3.0f};
  const std::vector<std::int64_t> y = {1, ignore, 2};
  const std::vector<float> dy = {0.3f, 7.0f, -1.7f};
  const Tensors in = {{"logits", bf16_of({3, 3}, x)}, {"targets", i64_of({3}, y)}, {"dy.logp", f32_of({3}, dy)}};

  std::vector<float> logp, dlogits;
  for (const std::int64_t r : {0, 2}) {
    const std::vector<float> out = log_softmax_row(row(x, r, 3));
    logp.push_back(out[static_cast<std::size_t>(y[r])]);
    const std::vector<float> dx = log_softmax_row_backward(out, y[r], dy[r]);
    dlogits.insert(dlogits.end(), dx.begin(), dx.end());
    if (r == 0) {
      CHECK(out[1] != log_softmax_row(row(x, 0, 3), false)[1]);  // the bf16 rounding matters
      logp.push_back(0.0f);
      dlogits.insert(dlogits.end(), 3, 0.0f);
    }
  }
  check_exact(naive_run("batch_invariant_logp", in, false), "logp", DType::kF32, {3}, logp);
  check_exact(naive_run("batch_invariant_logp", in, true), "dlogits", DType::kBF16, {3, 3}, dlogits);
}

TEST_CASE("naive batch_invariant_logp: smoke fixture close to the FP32 reference", "[naive][gemm_logprob]") {
  CHECK(check_fixture("batch_invariant_logp").backward);
}

TEST_CASE("naive batch_invariant_logp: bad input names op and tensor", "[naive][gemm_logprob]") {
  check_missing("batch_invariant_logp", "logits", false);
  check_missing("batch_invariant_logp", "dy.logp", true);
}

// ==== linear_logp ====

// hidden [2, 2] @ weight [3, 2]^T, then logp. The logits are stored in bf16 before the
// log-softmax: row 0's z = (200.75, 200, 67.18) is stored as (201, 200, 67), which moves its
// logp from -0.387 to -0.3125.
TEST_CASE("naive linear_logp: hand-worked, forward and backward bit for bit", "[naive][gemm_logprob]") {
  const std::vector<float> h = {200.0f, 0.75f, -2.0f, 0.0078125f};
  const std::vector<float> w = {1.0f, 1.0f, 1.0f, 0.0f, 0.3359375f, -0.01171875f};
  const std::vector<std::int64_t> y = {0, 2};
  const std::vector<float> dy = {0.3f, -1.7f};
  const Tensors in = {{"hidden", bf16_of({2, 2}, h)},
                      {"weight", bf16_of({3, 2}, w)},
                      {"targets", i64_of({2}, y)},
                      {"dy.logp", f32_of({2}, dy)}};

  std::vector<float> z_fp32;
  const std::vector<float> z = mm_bf16(h, transposed(w, 3, 2), 2, 2, 3, &z_fp32);
  std::vector<float> logp, g;
  bool logits_rounding_matters = false;
  for (std::int64_t r = 0; r < 2; ++r) {
    const auto yr = static_cast<std::size_t>(y[r]);
    const std::vector<float> out = log_softmax_row(row(z, r, 3));
    logp.push_back(out[yr]);
    logits_rounding_matters |= log_softmax_row(row(z_fp32, r, 3))[yr] != out[yr];
    const std::vector<float> dz = log_softmax_row_backward(out, y[r], dy[r]);
    g.insert(g.end(), dz.begin(), dz.end());
  }
  CHECK(logits_rounding_matters);
  check_exact(naive_run("linear_logp", in, false), "logp", DType::kF32, {2}, logp);

  // G (bf16) through F.linear's backward: dhidden = bf(G @ weight), dweight = bf(G^T @ hidden).
  const Tensors grads = naive_run("linear_logp", in, true);
  CHECK(grads.size() == 2);
  check_exact(grads, "dhidden", DType::kBF16, {2, 2}, mm_bf16(g, w, 2, 3, 2));
  check_exact(grads, "dweight", DType::kBF16, {3, 2}, mm_bf16(transposed(g, 2, 3), h, 3, 2, 2));
}

TEST_CASE("naive linear_logp: smoke fixture close to the FP32 reference", "[naive][gemm_logprob]") {
  // The logits' bf16 rounding moves each FP32 logp by up to ~4e-3 here, but none of the 27
  // crosses a rounding boundary of the bf16 logp (ulp 2^-5 around -6), so the forward equals
  // round_bf16(ref); the trace shows in G's exp(bf16 out) and the bf16 G through the two mms.
  CHECK(check_fixture("linear_logp").backward);
}

TEST_CASE("naive linear_logp: bad input names op and tensor", "[naive][gemm_logprob]") {
  check_missing("linear_logp", "weight", false);
  check_missing("linear_logp", "targets", true);
  check_missing("linear_logp", "dy.logp", true);
}

// The naive (eager bf16) elementwise ops: embedding, rms_norm, qk_norm, rope, silu, swiglu and
// pack. For each: a hand-worked case bit for bit, the expected values computed here from the eager
// definition (round_bf16 wherever an eager op stores a bf16 tensor), chosen so that rounding an
// intermediate changes the result; the smoke primary/normal fixture against the FP32 reference;
// and bad input naming op and tensor.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "naive_test_support.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;
using namespace ws1::test;

namespace {


// ---- tensors in and out ----

// Tensor `name` of `out` is bf16 of `shape` holding exactly the bf16 bits of `expected`.
void check_bits(const Tensors& out, const std::string& name, const Shape& shape, const std::vector<float>& expected) {
  INFO(name);
  const Tensor& t = test::tensor_named(out, name);
  REQUIRE(t.dtype() == DType::kBF16);
  REQUIRE(t.shape() == shape);
  const Tensor c = t.contiguous();
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i << ": expected " << expected[i] << ", got " << from_bf16(bf16{c.data<std::uint16_t>()[i]}));
    CHECK(c.data<std::uint16_t>()[i] == to_bf16(expected[i]).bits);
  }
}

// ---- the smoke fixture against the FP32 reference ----

// What a naive output claims beyond the sanity bound max|naive - ref| <= 2^-4 max|ref|.
enum class Claim {
  kNone,           // one rounding of an FP32 formula close to the reference's
  kIntermediates,  // rounded intermediates: some element differs from bf(ref)
  kRoundedRef,     // every element is bf(ref): the same FP32 sum, rounded once
  kExact,          // a copy: every element is the reference's
};

void check_fixture(const std::string& op, bool backward, Claim claim) {
  INFO(op << (backward ? " backward" : " forward"));
  const OpContext ctx = smoke_ctx();
  const Tensors in = test::fixture_inputs(op + "/primary/normal");
  const Op* spec = find_op_impl(op);
  REQUIRE(spec != nullptr);
  const std::vector<TensorDecl> decls = backward ? spec->gradients() : spec->outputs();
  const Tensors got = naive_run(op, in, backward, ctx);
  auto ref = backward ? ref::backward(op, in, ctx) : ref::forward(op, in, ctx);
  REQUIRE(ref.ok());
  CHECK(got.size() == decls.size());
  CHECK(ref->size() == decls.size());
  for (const TensorDecl& d : decls) {
    INFO(d.name);
    const Tensor& n = test::tensor_named(got, d.name);
    const Tensor& r = test::tensor_named(*ref, d.name);
    CHECK(n.dtype() == d.candidate_dtype);
    REQUIRE(n.shape() == r.shape());
    if (d.candidate_dtype == DType::kI64) {  // pack's cu_seqlens: exact integers
      REQUIRE(r.dtype() == DType::kI64);
      CHECK(std::equal(n.data<std::int64_t>(), n.data<std::int64_t>() + n.numel(), r.data<std::int64_t>()));
      continue;
    }
    const std::vector<float> nv = values_of(n), rv = values_of(r);
    double max_err = 0.0, max_ref = 0.0;
    std::size_t not_bf_ref = 0, not_ref = 0;
    for (std::size_t i = 0; i < nv.size(); ++i) {
      max_err = std::max(max_err, std::fabs(static_cast<double>(nv[i]) - rv[i]));
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(rv[i])));
      not_bf_ref += nv[i] != round_bf16(rv[i]) ? 1 : 0;
      not_ref += nv[i] != rv[i] ? 1 : 0;
    }
    INFO("max|naive - ref| = " << max_err << ", max|ref| = " << max_ref << "; " << not_bf_ref << " of " << nv.size()
                               << " elements differ from bf(ref)");
    REQUIRE(max_ref > 0.0);
    CHECK(max_err / max_ref <= 0.0625);
    if (claim == Claim::kIntermediates) CHECK(not_bf_ref > 0);
    if (claim == Claim::kRoundedRef) CHECK(not_bf_ref == 0);
    if (claim == Claim::kExact) CHECK(not_ref == 0);
  }
}

// ---- RMSNorm by hand ----

struct RmsByHand {
  std::vector<float> r, y, dx, dweight;
};

// The eager chain of lib/naive/norm.hpp written out for rows of `width`, eps 1e-6: every
// stored tensor rounded with round_bf16, FP32 sums.
RmsByHand rms_by_hand(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& dy,
                      std::size_t width) {
  const float eps = 1e-6f, n = static_cast<float>(width);
  RmsByHand e;
  e.y.resize(x.size());
  e.dx.resize(x.size());
  e.dweight.assign(width, 0.0f);  // FP32 sums over rows, rounded at the end
  for (std::size_t row = 0; row * width < x.size(); ++row) {
    const float* xr = x.data() + row * width;
    const float* dyr = dy.data() + row * width;
    float sum_sq = 0.0f, sum_ghx = 0.0f;
    for (std::size_t i = 0; i < width; ++i) sum_sq += round_bf16(xr[i] * xr[i]);       // x.pow(2), mean's sum
    const float var = round_bf16(sum_sq / n);                                            // mean
    const float r = round_bf16(1.0f / std::sqrt(round_bf16(var + eps)));                // rsqrt(var + eps)
    e.r.push_back(r);
    for (std::size_t i = 0; i < width; ++i) {
      const float h = round_bf16(xr[i] * r);                                             // x * r
      e.y[row * width + i] = round_bf16(h * w[i]);                                       // h * w
      e.dweight[i] += round_bf16(dyr[i] * h);                                            // dw terms
      sum_ghx += round_bf16(round_bf16(dyr[i] * w[i]) * xr[i]);                          // r's grad terms
    }
    const float gr = round_bf16(sum_ghx);
    const float gv = round_bf16(round_bf16(-0.5f * gr) * round_bf16(round_bf16(r * r) * r));  // rsqrt'
    const float gsq = round_bf16(gv / n);                                                 // mean'
    for (std::size_t i = 0; i < width; ++i) {
      const float gx1 = round_bf16(round_bf16(dyr[i] * w[i]) * r);
      const float gx2 = round_bf16(gsq * round_bf16(2.0f * xr[i]));                      // pow'
      e.dx[row * width + i] = round_bf16(gx1 + gx2);
    }
  }
  for (float& v : e.dweight) v = round_bf16(v);
  return e;
}

// ---- SiLU's FP32 kernels (one rounding each, by the caller) ----

float silu_fp32(float x) { return x / (1.0f + std::exp(-x)); }
float sigmoid_fp32(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float silu_grad_fp32(float dy, float x) {
  const float s = sigmoid_fp32(x);
  return dy * s * (1.0f + x * (1.0f - s));
}

}  // namespace

// ---- rms_norm ----

TEST_CASE("naive rms_norm: hand-worked, forward and backward bit for bit", "[naive][elementwise]") {
  // Three rows of width 2. Row 0: sq = (1, 0.5625), var = 0.78125, r = bf(1/sqrt(0.78125) =
  // 1.13137) = 1.1328125, y0 = bf(1.1328125 * 1.5 = 1.69921875) = 1.703125, where the FP32
  // reference keeps r unrounded and bf(ref) is bf(1.69706) = 1.6953125.
  const std::vector<float> x = {1, 0.75f, 2, -1, 1, 1.25f}, w = {1.5f, -0.75f}, dy = {1, 1, 0.5f, 2, 1, -1};
  const Tensors in = {{"x", bf16_of({3, 2}, x)}, {"weight", bf16_of({2}, w)}, {"dy.y", bf16_of({3, 2}, dy)}};
  const RmsByHand e = rms_by_hand(x, w, dy, 2);
  CHECK(e.r[0] == 1.1328125f);
  CHECK(e.y[0] == 1.703125f);
  CHECK(round_bf16(1.0f / std::sqrt(0.78125f) * 1.5f) == 1.6953125f);
  // dx0 = bf(bf(1.5 * r) + bf(gsq * 2)) = 1.0234375 (bf(ref) 1.015625).
  CHECK(e.dx[0] == 1.0234375f);
  // Row 2: r = 0.8828125; rsqrt's backward takes r.pow(3), which eager computes as r * r * r in
  // bf16 arithmetic: bf(bf(r*r = 0.7793) * r) = bf(0.78125 * r) = 0.69140625, not bf(r^3 =
  // 0.68803) = 0.6875; that moves dx to (0.484375, -0.390625) from (0.4921875, -0.3828125).
  CHECK(e.r[2] == 0.8828125f);
  CHECK(round_bf16(round_bf16(e.r[2] * e.r[2]) * e.r[2]) == 0.69140625f);
  CHECK(round_bf16(e.r[2] * e.r[2] * e.r[2]) == 0.6875f);
  CHECK(e.dx[4] == 0.484375f);
  CHECK(e.dx[5] == -0.390625f);
  // dweight[0] sums bf(dy * h) over the rows in FP32: 1.1328125 + 0.6328125 + 0.8828125 =
  // 2.6484375 -> 2.65625 (bf(ref) 2.640625).
  CHECK(e.dweight[0] == 2.65625f);

  check_bits(naive_run("rms_norm", in, false, OpContext{}), "y", {3, 2}, e.y);
  const Tensors grads = naive_run("rms_norm", in, true, OpContext{});
  check_bits(grads, "dx", {3, 2}, e.dx);
  check_bits(grads, "dweight", {2}, e.dweight);
}

TEST_CASE("naive rms_norm: smoke fixture close to the FP32 reference", "[naive][elementwise]") {
  check_fixture("rms_norm", false, Claim::kIntermediates);
  check_fixture("rms_norm", true, Claim::kIntermediates);
}

TEST_CASE("naive rms_norm: bad input names op and tensor", "[naive][elementwise]") {
  check_missing("rms_norm", "weight");
  // A weight that does not match x's last dimension.
  const Tensors in = {{"x", bf16_of({2, 2}, {1, 2, 3, 4})}, {"weight", bf16_of({3}, {1, 1, 1})}};
  auto r = naive::forward("rms_norm", in, OpContext{});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("rms_norm") && Catch::Contains("weight"));
}

// ---- qk_norm ----

TEST_CASE("naive qk_norm: hand-worked, every head its own row, bit for bit", "[naive][elementwise]") {
  // x [T=1, H=3, D=2] holds rms_norm's hand-worked rows as its three heads: the same y and dx,
  // and dweight summed over the heads.
  const std::vector<float> x = {1, 0.75f, 2, -1, 1, 1.25f}, w = {1.5f, -0.75f}, dy = {1, 1, 0.5f, 2, 1, -1};
  const Tensors in = {{"x", bf16_of({1, 3, 2}, x)}, {"weight", bf16_of({2}, w)}, {"dy.y", bf16_of({1, 3, 2}, dy)}};
  const RmsByHand e = rms_by_hand(x, w, dy, 2);
  OpContext ctx;
  ctx.head_dim = 2;
  check_bits(naive_run("qk_norm", in, false, ctx), "y", {1, 3, 2}, e.y);
  const Tensors grads = naive_run("qk_norm", in, true, ctx);
  check_bits(grads, "dx", {1, 3, 2}, e.dx);
  check_bits(grads, "dweight", {2}, e.dweight);
}

TEST_CASE("naive qk_norm: smoke fixture close to the FP32 reference", "[naive][elementwise]") {
  check_fixture("qk_norm", false, Claim::kIntermediates);
  check_fixture("qk_norm", true, Claim::kIntermediates);
}

TEST_CASE("naive qk_norm: bad input names op and tensor", "[naive][elementwise]") {
  check_missing("qk_norm", "x");
  // A flattened [T, H*D] x is refused when the run knows head_dim.
  OpContext ctx;
  ctx.head_dim = 2;
  const Tensors in = {{"x", bf16_of({1, 4}, {1, 2, 3, 4})}, {"weight", bf16_of({4}, {1, 1, 1, 1})}};
  auto r = naive::forward("qk_norm", in, ctx);
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("qk_norm") && Catch::Contains("x") && Catch::Contains("head_dim"));
}

// ---- rope ----

TEST_CASE("naive rope: hand-worked, forward and backward bit for bit", "[naive][elementwise]") {
  // x [T=2, H=1, D=2], positions (0, 1), theta 1e6: inv_freq = (1), so angles 0 and 1 rad.
  // Position 0 is the identity (c = 1, s = 0). Position 1: c = bf(cos 1 = 0.54030) = 0.5390625,
  // s = bf(sin 1 = 0.84147) = 0.83984375; for x = (1, 3):
  //   y0 = bf(bf(1 * c) - bf(3 * s = 2.51953125)) = bf(0.5390625 - 2.515625) = -1.9765625
  //   y1 = bf(bf(3 * c) + bf(1 * s)) = bf(1.6171875 + 0.83984375 = 2.45703125) = 2.453125
  // where bf(ref) is (-1.984375, 2.46875).
  const float c = round_bf16(static_cast<float>(std::cos(1.0)));
  const float s = round_bf16(static_cast<float>(std::sin(1.0)));
  REQUIRE(c == 0.5390625f);
  REQUIRE(s == 0.83984375f);
  const std::vector<float> x = {0.5f, -2, 1, 3}, dy = {-1.5f, 0.25f, 1, 3};
  const Tensors in = {{"x", bf16_of({2, 1, 2}, x)}, {"positions", i64_of({2}, {0, 1})},
                      {"dy.y", bf16_of({2, 1, 2}, dy)}};
  const std::vector<float> y = {0.5f, -2, round_bf16(round_bf16(1 * c) - round_bf16(3 * s)),
                                round_bf16(round_bf16(3 * c) + round_bf16(1 * s))};
  CHECK(y[2] == -1.9765625f);
  CHECK(y[3] == 2.453125f);
  CHECK(round_bf16(static_cast<float>(std::cos(1.0) - 3 * std::sin(1.0))) == -1.984375f);
  check_bits(naive_run("rope", in, false, OpContext{}), "y", {2, 1, 2}, y);
  // Backward, the transposed rotation: dx0 = bf(bf(1 * c) + bf(3 * s)) = bf(3.0546875) = 3.0625.
  const std::vector<float> dx = {-1.5f, 0.25f, round_bf16(round_bf16(1 * c) + round_bf16(3 * s)),
                                 round_bf16(round_bf16(3 * c) - round_bf16(1 * s))};
  CHECK(dx[2] == 3.0625f);
  check_bits(naive_run("rope", in, true, OpContext{}), "dx", {2, 1, 2}, dx);
}

TEST_CASE("naive rope: smoke fixture close to the FP32 reference", "[naive][elementwise]") {
  check_fixture("rope", false, Claim::kIntermediates);
  check_fixture("rope", true, Claim::kIntermediates);
}

TEST_CASE("naive rope: bad input names op and tensor", "[naive][elementwise]") {
  check_missing("rope", "positions");
  const Tensors in = {{"x", bf16_of({1, 1, 2}, {1, 3})}, {"positions", i64_of({1}, {-1})}};
  auto r = naive::forward("rope", in, OpContext{});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("rope") && Catch::Contains("positions"));
}

// ---- silu ----

TEST_CASE("naive silu: hand-worked, one rounding per op, bit for bit", "[naive][elementwise]") {
  // F.silu is one kernel: y = bf(silu(x)) in FP32. x0 = 1.0234375: silu = 0.752883 -> 0.75390625;
  // rounding sigmoid to bf16 first (two eager ops) would give bf(x0 * 0.734375) = 0.75.
  // SiluBackward is one kernel too: x1 = 2, dy1 = 1.5: dx1 = bf(1.63618) = 1.6328125; with the
  // sigmoid rounded first it would be 1.640625.
  const std::vector<float> x = {1.0234375f, 2}, dy = {1, 1.5f};
  const Tensors in = {{"x", bf16_of({2}, x)}, {"dy.y", bf16_of({2}, dy)}};
  const std::vector<float> y = {round_bf16(silu_fp32(x[0])), round_bf16(silu_fp32(x[1]))};
  CHECK(y[0] == 0.75390625f);
  CHECK(round_bf16(x[0] * round_bf16(sigmoid_fp32(x[0]))) == 0.75f);
  check_bits(naive_run("silu", in, false, OpContext{}), "y", {2}, y);
  const std::vector<float> dx = {round_bf16(silu_grad_fp32(dy[0], x[0])), round_bf16(silu_grad_fp32(dy[1], x[1]))};
  CHECK(dx[1] == 1.6328125f);
  const float s = round_bf16(sigmoid_fp32(2));
  CHECK(round_bf16(1.5f * s * (1 + 2 * (1 - s))) == 1.640625f);
  check_bits(naive_run("silu", in, true, OpContext{}), "dx", {2}, dx);
}

TEST_CASE("naive silu: smoke fixture close to the FP32 reference", "[naive][elementwise]") {
  check_fixture("silu", false, Claim::kNone);
  check_fixture("silu", true, Claim::kNone);
}

TEST_CASE("naive silu: bad input names op and tensor", "[naive][elementwise]") {
  check_missing("silu", "x");
}

// ---- swiglu ----

TEST_CASE("naive swiglu: hand-worked, forward and backward bit for bit", "[naive][elementwise]") {
  // gate 0.5, up 1.046875, dy 1.234375: a = bf(silu(0.5) = 0.311230) = 0.310546875, then
  //   y     = bf(a * up = 0.325104)   = 0.32421875  (bf(ref) 0.326171875)
  //   dup   = bf(dy * a = 0.383331)   = 0.3828125   (bf(ref) 0.384765625)
  //   ga    = bf(dy * up = 1.292236)  = 1.2890625
  //   dgate = bf(silu'(0.5) * ga)     = 0.953125    (bf(ref) 0.95703125)
  // The second element is the gate -2 (silu'(-2) < 0).
  const std::vector<float> gate = {0.5f, -2}, up = {1.046875f, 3}, dy = {1.234375f, -0.75f};
  const Tensors in = {{"gate", bf16_of({1, 2}, gate)}, {"up", bf16_of({1, 2}, up)}, {"dy.y", bf16_of({1, 2}, dy)}};
  std::vector<float> y, dgate, dup;
  for (std::size_t i = 0; i < 2; ++i) {
    const float a = round_bf16(silu_fp32(gate[i]));
    y.push_back(round_bf16(a * up[i]));
    dup.push_back(round_bf16(dy[i] * a));
    dgate.push_back(round_bf16(silu_grad_fp32(round_bf16(dy[i] * up[i]), gate[i])));
  }
  CHECK(y[0] == 0.32421875f);
  CHECK(dup[0] == 0.3828125f);
  CHECK(dgate[0] == 0.953125f);
  check_bits(naive_run("swiglu", in, false, OpContext{}), "y", {1, 2}, y);
  const Tensors grads = naive_run("swiglu", in, true, OpContext{});
  check_bits(grads, "dgate", {1, 2}, dgate);
  check_bits(grads, "dup", {1, 2}, dup);
}

TEST_CASE("naive swiglu: smoke fixture close to the FP32 reference", "[naive][elementwise]") {
  check_fixture("swiglu", false, Claim::kIntermediates);
  check_fixture("swiglu", true, Claim::kIntermediates);
}

TEST_CASE("naive swiglu: bad input names op and tensor", "[naive][elementwise]") {
  check_missing("swiglu", "up");
  const Tensors in = {{"gate", bf16_of({2}, {1, 2})}, {"up", bf16_of({1, 2}, {1, 2})}};
  auto r = naive::forward("swiglu", in, OpContext{});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("swiglu") && Catch::Contains("up"));
}

// ---- embedding ----

TEST_CASE("naive embedding: hand-worked gather and FP32 accumulated dtable, bit for bit", "[naive][elementwise]") {
  // table [3, 2], ids (2, 0, 2, 2). The forward copies rows. Backward, id 2's column 0 sums
  // 1 + 2^-8 + 2^-8 in FP32 = 1.0078125 (one rounding, exact); a bf16 running sum would lose each
  // 2^-8 (bf(1 + 2^-8) = 1, ties to even) and give 1. Row 1 (no id) is +0.
  const std::vector<float> table = {0.5f, -1, 2, 3, 1.25f, -0.75f};
  const float tiny = 0.00390625f;  // 2^-8
  const std::vector<float> dy = {1, 3, 0.5f, 0.25f, tiny, -1, tiny, 0.5f};
  const Tensors in = {{"ids", i64_of({4}, {2, 0, 2, 2})}, {"table", bf16_of({3, 2}, table)},
                      {"dy.y", bf16_of({4, 2}, dy)}};
  check_bits(naive_run("embedding", in, false, OpContext{}), "y", {4, 2}, {1.25f, -0.75f, 0.5f, -1, 1.25f, -0.75f, 1.25f, -0.75f});
  const float col0 = round_bf16(1.0f + tiny + tiny);
  CHECK(col0 == 1.0078125f);
  CHECK(round_bf16(round_bf16(1.0f + tiny) + tiny) == 1.0f);
  const Tensors grads = naive_run("embedding", in, true, OpContext{});
  check_bits(grads, "dtable", {3, 2}, {0.5f, 0.25f, 0, 0, col0, round_bf16(3.0f - 1.0f + 0.5f)});
}

TEST_CASE("naive embedding: smoke fixture, the gather exact", "[naive][elementwise]") {
  check_fixture("embedding", false, Claim::kExact);
  check_fixture("embedding", true, Claim::kRoundedRef);
}

TEST_CASE("naive embedding: bad input names op and tensor", "[naive][elementwise]") {
  check_missing("embedding", "table");
  const Tensors in = {{"ids", i64_of({1}, {3})}, {"table", bf16_of({3, 1}, {1, 2, 3})}};
  auto r = naive::forward("embedding", in, OpContext{});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("embedding") && Catch::Contains("ids"));
}

// ---- pack ----

TEST_CASE("naive pack: hand-worked packing and its backward, exact", "[naive][elementwise]") {
  // No arithmetic: the eager result is the exact one. x [2, 3, 2], mask ((1, 0, 1), (0, 1, 1)):
  // the active rows (b, s) = (0, 0), (0, 2), (1, 1), (1, 2); cu_seqlens (0, 2, 4).
  std::vector<float> x(12);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  const std::vector<float> dy = {0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, 3.5f, -3.5f};
  const Tensors in = {{"x", bf16_of({2, 3, 2}, x)}, {"mask", bool_of({2, 3}, {1, 0, 1, 0, 1, 1})},
                      {"dy.packed", bf16_of({4, 2}, dy)}};
  const Tensors out = naive_run("pack", in, false, OpContext{});
  check_bits(out, "packed", {4, 2}, {1, 2, 5, 6, 9, 10, 11, 12});
  const Tensor& cu = test::tensor_named(out, "cu_seqlens");
  REQUIRE(cu.dtype() == DType::kI64);
  REQUIRE(cu.shape() == Shape{3});
  CHECK(std::vector<std::int64_t>(cu.data<std::int64_t>(), cu.data<std::int64_t>() + 3) ==
        std::vector<std::int64_t>{0, 2, 4});
  // Backward: each packed row back to its (b, s); the inactive rows are +0.
  check_bits(naive_run("pack", in, true, OpContext{}), "dx", {2, 3, 2}, {0.5f, -0.5f, 0, 0, 1.5f, -1.5f, 0, 0, 2.5f, -2.5f, 3.5f, -3.5f});
}

TEST_CASE("naive pack: smoke fixture, exact", "[naive][elementwise]") {
  check_fixture("pack", false, Claim::kExact);
  check_fixture("pack", true, Claim::kExact);
}

TEST_CASE("naive pack: bad input names op and tensor", "[naive][elementwise]") {
  check_missing("pack", "mask");
  const Tensors in = {{"x", bf16_of({1, 2, 1}, {1, 2})}, {"mask", bool_of({1, 2}, {1, 2})}};
  auto r = naive::forward("pack", in, OpContext{});
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.error().message(), Catch::Contains("pack") && Catch::Contains("mask"));
}

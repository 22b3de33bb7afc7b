// linear_logp on cuda_bf16 (cuda/ops/linear_logp.cu): the logits on det_gemm's wgmma kernel
// with fused epilogues (the row logsumexp forward, G hi + lo backward). The accuracy and
// invariance cells of the workloads judge it against the reference; here what they cannot see:
//   1. a hidden width that is not a multiple of 8 (TMA takes 16-byte row strides only) goes
//      through zero-padded copies: the results equal, bit for bit, those of the same inputs
//      padded with zero columns by the caller (a faithful identity: zeros add nothing), at ragged
//      T and V (not multiples of the 128 x 256 tiles) and at H = 0;
//   2. the backward's softmax is normalised by an lse over every column tile of the row once:
//      a row's G sums to ~0 over the vocabulary.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bf16_patterns.hpp"
#include "gpu_test_support.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;

namespace {

const Op& linear_logp() { return *find_op_impl("linear_logp"); }

// Values in [-scale, scale) rounded to bf16, [rows, cols] of which the columns >= used are 0.
Tensor uniform_bf16(std::int64_t rows, std::int64_t cols, std::int64_t used, float scale, std::uint32_t seed) {
  Tensor t(DType::kBF16, {rows, cols});
  auto* p = t.data<std::uint16_t>();
  ws1_test::Xorshift32 g(seed);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < used; ++c) {
      const float u = static_cast<float>(g.next() >> 8) / 16777216.0f;
      p[r * cols + c] = to_bf16((2.0f * u - 1.0f) * scale).bits;
    }
  return t;
}

Tensor targets_for(std::int64_t rows, std::int64_t vocab, std::uint32_t seed) {
  Tensor t(DType::kI64, {rows});
  ws1_test::Xorshift32 g(seed);
  for (std::int64_t r = 0; r < rows; ++r) t.data<std::int64_t>()[r] = static_cast<std::int64_t>(g.next() % vocab);
  if (rows > 0) t.data<std::int64_t>()[0] = vocab - 1;  // the last column (the ragged tile's)
  return t;
}

Tensor first_cols(const Tensor& t, std::int64_t n) { return t.slice(1, 0, n).contiguous(); }

}  // namespace

TEST_CASE("linear_logp: a hidden width off the 8-element grid equals the caller's zero padding", "[gpu][linear_logp]") {
  struct Shape3 {
    std::int64_t t, h, v;
  };
  for (const Shape3 s : {Shape3{37, 60, 300}, Shape3{130, 3, 513}, Shape3{5, 0, 257}}) {
    const std::int64_t padded = (s.h + 7) / 8 * 8 + 8;  // the caller's width: more zero columns than the op adds
    INFO("T " << s.t << ", H " << s.h << ", V " << s.v);
    const float scale = s.h > 0 ? 2.0f / std::sqrt(static_cast<float>(s.h)) : 1.0f;
    const Tensor hidden_p = uniform_bf16(s.t, padded, s.h, scale, 11), weight_p = uniform_bf16(s.v, padded, s.h, 4.0f, 12);
    const Tensor hidden = first_cols(hidden_p, s.h), weight = first_cols(weight_p, s.h);
    const Tensor targets = targets_for(s.t, s.v, 13);
    Tensor dy(DType::kF32, {s.t});
    for (std::int64_t r = 0; r < s.t; ++r) dy.data<float>()[r] = r % 3 == 0 ? 1.0f : -0.5f - 0.01f * static_cast<float>(r);
    Backend& cuda = test::cuda_backend();
    const OpContext ctx;
    auto fwd = cuda.forward(linear_logp(), Tensors{{"hidden", hidden}, {"weight", weight}, {"targets", targets}}, ctx);
    auto fwd_p = cuda.forward(linear_logp(), Tensors{{"hidden", hidden_p}, {"weight", weight_p}, {"targets", targets}}, ctx);
    REQUIRE(fwd.ok());
    REQUIRE(fwd_p.ok());
    const Tensor& logp = *find_tensor(*fwd, "logp");
    CHECK(test::same_bits(logp, *find_tensor(*fwd_p, "logp")));
    for (std::int64_t r = 0; r < s.t; ++r) REQUIRE(std::isfinite(logp.data<float>()[r]));
    if (s.h == 0) {  // every logit 0: logp = -log V
      for (std::int64_t r = 0; r < s.t; ++r)
        CHECK(std::fabs(logp.data<float>()[r] + std::log(static_cast<float>(s.v))) < 1e-5f);
    }
    auto bwd = cuda.backward(linear_logp(),
                             Tensors{{"hidden", hidden}, {"weight", weight}, {"targets", targets}, {"dy.logp", dy}}, ctx);
    auto bwd_p = cuda.backward(
        linear_logp(), Tensors{{"hidden", hidden_p}, {"weight", weight_p}, {"targets", targets}, {"dy.logp", dy}}, ctx);
    REQUIRE(bwd.ok());
    REQUIRE(bwd_p.ok());
    CHECK(test::same_bits(*find_tensor(*bwd, "dhidden"), first_cols(*find_tensor(*bwd_p, "dhidden"), s.h)));
    CHECK(test::same_bits(*find_tensor(*bwd, "dweight"), first_cols(*find_tensor(*bwd_p, "dweight"), s.h)));
    // The padding columns' gradients: zero hidden columns get G @ W's zero columns, and so on.
    const Tensor& dh_p = *find_tensor(*bwd_p, "dhidden");
    for (std::int64_t r = 0; r < s.t; ++r)
      for (std::int64_t c = s.h; c < padded; ++c) REQUIRE(from_bf16(dh_p.data<bf16>()[r * padded + c]) == 0.0f);
  }
}

TEST_CASE("linear_logp: the backward's G rows sum to zero with the forward's lse", "[gpu][linear_logp]") {
  // dhidden = G @ W with a column of ones in W: dhidden[:, 0] = sum over v of G[t, v] =
  // dy (1 - sum of softmax) ~ 0 when the lse the backward divides by covers every 256-column
  // tile of the row once (a tile state lost, doubled or taken from another row leaves ~ 1/16
  // at V = 4099: 17 tiles, the last one ragged).
  const std::int64_t t = 64, h = 128, v = 4099;
  Tensor hidden = uniform_bf16(t, h, h, 0.5f, 21), weight = uniform_bf16(v, h, h, 0.5f, 22);
  for (std::int64_t r = 0; r < v; ++r) weight.data<std::uint16_t>()[r * h] = to_bf16(1.0f).bits;
  const Tensor targets = targets_for(t, v, 23);
  Tensor dy(DType::kF32, {t});
  for (std::int64_t r = 0; r < t; ++r) dy.data<float>()[r] = 1.0f;
  auto bwd = test::cuda_backend().backward(
      linear_logp(), Tensors{{"hidden", hidden}, {"weight", weight}, {"targets", targets}, {"dy.logp", dy}}, OpContext{});
  REQUIRE(bwd.ok());
  const Tensor& dh = *find_tensor(*bwd, "dhidden");
  double worst = 0.0;
  for (std::int64_t r = 0; r < t; ++r) worst = std::max(worst, std::fabs(static_cast<double>(from_bf16(dh.data<bf16>()[r * h]))));
  INFO("largest |sum over v of G[t, v]|: " << worst);
  CHECK(worst < 1e-3);
}

TEST_CASE("linear_logp: dhidden's fold does not depend on the backward's slab width", "[gpu][linear_logp]") {
  // The slab width follows the row count (the G scratch stays near 2^26 elements): 3000 rows
  // take 4 slabs of V = 70000, 7 rows one. The rows they share get the same bits (the shards'
  // FP32 fold carried from slab to slab is the one-slab fold).
  const std::int64_t h = 64, v = 70000, big = 3000, small = 7;
  const Tensor hidden = uniform_bf16(big, h, h, 0.25f, 31), weight = uniform_bf16(v, h, h, 1.0f, 32);
  const Tensor targets = targets_for(big, v, 33);
  Tensor dy(DType::kF32, {big});
  for (std::int64_t r = 0; r < big; ++r) dy.data<float>()[r] = 1.0f - 0.001f * static_cast<float>(r % 100);
  const auto rows_of = [&](const Tensor& t, std::int64_t n) { return t.slice(0, 0, n).contiguous(); };
  auto all = test::cuda_backend().backward(
      linear_logp(), Tensors{{"hidden", hidden}, {"weight", weight}, {"targets", targets}, {"dy.logp", dy}}, OpContext{});
  auto few = test::cuda_backend().backward(linear_logp(),
                                           Tensors{{"hidden", rows_of(hidden, small)}, {"weight", weight},
                                                   {"targets", rows_of(targets, small)}, {"dy.logp", rows_of(dy, small)}},
                                           OpContext{});
  REQUIRE(all.ok());
  REQUIRE(few.ok());
  CHECK(test::same_bits(rows_of(*find_tensor(*all, "dhidden"), small), *find_tensor(*few, "dhidden")));
}

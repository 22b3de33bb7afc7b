// qk_norm: per-head RMSNorm over head_dim (all 32 heads). The FP32 reference against PyTorch
// float64, the cpu_bf16 candidate (one rounding, equal to rms_norm on the [T*H, D] rows, row-
// and thread-independent), bad inputs, and a planted defect (normalising over the whole
// hidden width instead of per head) that the accuracy judge must catch.
#include <algorithm>
#include <cmath>

#include "elementwise_test_util.hpp"
#include "norm_dweight_restated.hpp"
#include "rms_norm.hpp"

using namespace ws1;
using namespace ws1::test;

namespace {

const Op& op() {
  const Op* o = find_op_impl("qk_norm");
  REQUIRE(o != nullptr);
  return *o;
}

const std::map<std::string, std::string> kRename = {
    {"in.x", "x"}, {"in.w", "weight"}, {"dy.y", "dy.y"}};

Tensors local_inputs(std::int64_t t) {
  return {{"x", random_bf16({t, 32, 128}, 61, 2.0f)},
          {"weight", random_bf16({128}, 62)},
          {"dy.y", random_bf16({t, 32, 128}, 63)}};
}

}  // namespace

TEST_CASE("qk_norm dweight: the candidate's declared blocked order", "[ops][qk_norm][norm_dweight]") {
  const OpContext ctx = default_context();
  const float eps = static_cast<float>(ctx.rms_norm_eps);
  // 32 heads per token: 1 token (32 rows, under a block), 8 (256 rows, one block), 9 (288: a
  // ragged second block), 40 (1280 rows: 5 blocks), 41 (1312: 5 blocks and a ragged sixth).
  for (std::int64_t t : {1, 8, 9, 40, 41}) {
    INFO(t << " tokens");
    const Tensors in = local_inputs(t);
    const Tensor cand = output(op().cpu_backward(in, ctx), "dweight");
    REQUIRE(cand.dtype() == DType::kBF16);
    const std::vector<float> blocked = ws1_test::restated_dweight(in[0].tensor, in[2].tensor, eps);
    Tensor want(DType::kBF16, {128});
    for (std::int64_t i = 0; i < 128; ++i) want.data<std::uint16_t>()[i] = to_bf16(blocked[static_cast<std::size_t>(i)]).bits;
    CHECK(same_bits(cand, want));
  }
}

TEST_CASE("qk_norm reference agrees with PyTorch float64 within the float32 rows", "[ops][qk_norm]") {
  auto f = oracle("qk_norm");
  const Tensors in = oracle_inputs(*f, kRename);
  const OpContext ctx = default_context();
  const Tensor& y = output(op().reference_forward(in, ctx), "y");
  CHECK(y.dtype() == DType::kF32);
  const auto fa = agree(y, *f->find("ref64.y"),
                        tolerance(Judgment::kForwardAccuracy, "qk_norm", ContractDType::kFloat32));
  CHECK(fa.violations == 0);
  CHECK(fa.max_abs < tolerance(Judgment::kForwardAccuracy, "qk_norm", ContractDType::kBFloat16).atol / 100);

  const auto bwd = op().reference_backward(in, ctx);
  const auto grad32 = tolerance(Judgment::kGradientAccuracy, "qk_norm", ContractDType::kFloat32);
  const double grad_atol = tolerance(Judgment::kGradientAccuracy, "qk_norm", ContractDType::kBFloat16).atol;
  for (const auto& [mine, theirs] : {std::pair{"dx", "gref64.x"}, std::pair{"dweight", "gref64.w"}}) {
    INFO(mine);
    const Tensor& g = output(bwd, mine);
    CHECK(g.dtype() == DType::kF32);
    const auto ga = agree(g, *f->find(theirs), grad32);
    CHECK(ga.violations == 0);
    CHECK(ga.max_abs < grad_atol / 100);
  }
}

TEST_CASE("qk_norm candidate: the reference rounded once, rms_norm on every head's row", "[ops][qk_norm]") {
  const Tensors in = local_inputs(5);
  const OpContext ctx = default_context();
  const Tensor y = output(op().cpu_forward(in, ctx), "y");
  REQUIRE(y.dtype() == DType::kBF16);
  CHECK(same_bits(y, rounded_bf16(output(op().reference_forward(in, ctx), "y"))));
  // The same as rms_norm over [T*H, D] rows: each head is normalised on its own.
  const Op* rms = find_op_impl("rms_norm");
  REQUIRE(rms != nullptr);
  const Tensors flat = {{"x", in[0].tensor.view({5 * 32, 128})}, in[1],
                        {"dy.y", in[2].tensor.view({5 * 32, 128})}};
  CHECK(same_bits(y.view({5 * 32, 128}), output(rms->cpu_forward(flat, ctx), "y")));
  const auto bwd = op().cpu_backward(in, ctx);
  const auto rms_bwd = rms->cpu_backward(flat, ctx);
  CHECK(same_bits(output(bwd, "dx").view({5 * 32, 128}), output(rms_bwd, "dx")));
  CHECK(same_bits(output(bwd, "dweight"), output(rms_bwd, "dweight")));
  CHECK(output(bwd, "dweight").dtype() == DType::kBF16);
}

TEST_CASE("qk_norm candidate is deterministic and independent of rows and threads", "[ops][qk_norm]") {
  const Tensors in = local_inputs(7);
  OpContext one = default_context(), two = default_context();
  one.threads = 1;
  two.threads = 2;
  const Tensor y = output(op().cpu_forward(in, two), "y");
  CHECK(same_bits(y, output(op().cpu_forward(in, two), "y")));
  CHECK(same_bits(y, output(op().cpu_forward(in, one), "y")));
  const auto bwd = op().cpu_backward(in, two);
  const auto bwd1 = op().cpu_backward(in, one);
  CHECK(same_bits(output(bwd, "dx"), output(bwd1, "dx")));
  CHECK(same_bits(output(bwd, "dweight"), output(bwd1, "dweight")));
  // Tokens [0, 7) in one call equal [0, 4) and [4, 7) (y and dx are per row; dweight sums
  // over all rows, so it is not split).
  auto part = [&](std::int64_t b, std::int64_t e) {
    return Tensors{{"x", rows(in[0].tensor, b, e)}, in[1], {"dy.y", rows(in[2].tensor, b, e)}};
  };
  CHECK(same_bits(y, concat_rows(output(op().cpu_forward(part(0, 4), two), "y"),
                                 output(op().cpu_forward(part(4, 7), two), "y"))));
  CHECK(same_bits(output(bwd, "dx"), concat_rows(output(op().cpu_backward(part(0, 4), two), "dx"),
                                                 output(op().cpu_backward(part(4, 7), two), "dx"))));
}

TEST_CASE("qk_norm refuses inputs that do not fit", "[ops][qk_norm]") {
  const OpContext ctx = default_context();
  auto expect = [&](Result<Tensors> r, const std::string& text) {
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message());
    CHECK(r.error().message().find(text) != std::string::npos);
  };
  // A flattened [T, H*D] input would otherwise be normalised over the hidden width.
  expect(op().cpu_forward({{"x", Tensor(DType::kBF16, {2, 4096})}, {"weight", Tensor(DType::kBF16, {4096})}}, ctx),
         "qk_norm: x: shape [2, 4096]: last dimension is not head_dim 128");
  expect(op().cpu_forward({{"x", Tensor(DType::kBF16, {2, 32, 128})}, {"weight", Tensor(DType::kBF16, {64})}}, ctx),
         "qk_norm: weight: shape [64] does not match");
  expect(op().reference_forward({{"x", Tensor(DType::kF32, {2, 32, 128})}, {"weight", Tensor(DType::kBF16, {128})}}, ctx),
         "qk_norm: x: dtype F32");
  expect(op().cpu_backward({{"x", Tensor(DType::kBF16, {2, 32, 128})}, {"weight", Tensor(DType::kBF16, {128})}}, ctx),
         "qk_norm: dy.y: missing input");
}

TEST_CASE("qk_norm planted defect: one statistic over all heads goes red", "[ops][qk_norm][defect]") {
  // With heads of different scales the per-head statistic matters: head h scaled by 2^(h%5-2).
  Tensors in = local_inputs(4);
  Tensor& x = in[0].tensor;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const std::int64_t head = (i / 128) % 32;
    const float v = from_bf16(bf16{x.data<std::uint16_t>()[i]}) * std::ldexp(1.0f, static_cast<int>(head % 5) - 2);
    x.data<std::uint16_t>()[i] = to_bf16(v).bits;
  }
  const OpContext ctx = default_context();
  const Tensor& ref = output(op().reference_forward(in, ctx), "y");
  // The defect: rms_norm over the token's whole [H*D] row, weight tiled over the heads.
  Tensor tiled(DType::kBF16, {32 * 128});
  for (std::int64_t i = 0; i < 32 * 128; ++i)
    tiled.data<std::uint16_t>()[i] = in[1].tensor.data<std::uint16_t>()[i % 128];
  const Op* rms = find_op_impl("rms_norm");
  REQUIRE(rms != nullptr);
  const Tensor wrong = output(rms->cpu_forward({{"x", x.view({4, 32 * 128})}, {"weight", tiled}}, ctx), "y");
  const auto good = judge_bf16(Judgment::kForwardAccuracy, "qk_norm", "y",
                               output(op().cpu_forward(in, ctx), "y"), ref);
  const auto bad = judge_bf16(Judgment::kForwardAccuracy, "qk_norm", "y", wrong.view({4, 32, 128}), ref);
  CHECK(passed(good));
  CHECK(bad.violations > 0);
}

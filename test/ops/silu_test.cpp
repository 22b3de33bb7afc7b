// silu: the FP32 reference against PyTorch float64, the cpu_bf16 candidate (one rounding,
// deterministic, row- and thread-independent), bad inputs, and the planted bf16-intermediate
// defect (what the accuracy judge does and does not see).
#include "elementwise_test_util.hpp"

using namespace ws1;
using namespace ws1::test;

namespace {

const Op& op() {
  const Op* o = find_op_impl("silu");
  REQUIRE(o != nullptr);
  return *o;
}

const std::map<std::string, std::string> kRename = {{"in.x", "x"}, {"dy.y", "dy.y"}};

Tensors inputs(std::int64_t t, std::int64_t width, std::uint32_t seed) {
  return {{"x", random_bf16({t, width}, seed, 3.0f)}, {"dy.y", random_bf16({t, width}, seed + 1)}};
}

// Planted defect: sigmoid rounded to bf16 before the multiply (a bf16 intermediate), then the
// product rounded to bf16: two roundings instead of one.
Tensor silu_bf16_intermediate(const Tensor& x) {
  const std::vector<float> xf = floats(x);
  Tensor y(DType::kBF16, x.shape());
  for (std::size_t i = 0; i < xf.size(); ++i) {
    const float s = round_bf16(1.0f / (1.0f + std::exp(-xf[i])));
    y.data<std::uint16_t>()[i] = to_bf16(xf[i] * s).bits;
  }
  return y;
}

}  // namespace

TEST_CASE("silu reference agrees with PyTorch float64 within the float32 rows", "[ops][silu]") {
  auto f = oracle("silu");
  const Tensors in = oracle_inputs(*f, kRename);
  const OpContext ctx = default_context();
  const Tensor& y = output(op().reference_forward(in, ctx), "y");
  CHECK(y.dtype() == DType::kF32);
  const auto fa = agree(y, *f->find("ref64.y"),
                        tolerance(Judgment::kForwardAccuracy, "silu", ContractDType::kFloat32));
  CHECK(fa.violations == 0);
  CHECK(fa.max_abs < tolerance(Judgment::kForwardAccuracy, "silu", ContractDType::kBFloat16).atol / 100);

  const Tensor& dx = output(op().reference_backward(in, ctx), "dx");
  CHECK(dx.dtype() == DType::kF32);
  const auto ga = agree(dx, *f->find("gref64.x"),
                        tolerance(Judgment::kGradientAccuracy, "silu", ContractDType::kFloat32));
  CHECK(ga.violations == 0);
  CHECK(ga.max_abs < tolerance(Judgment::kGradientAccuracy, "silu", ContractDType::kBFloat16).atol / 100);
}

TEST_CASE("silu candidate is the reference rounded once and matches PyTorch eager", "[ops][silu]") {
  auto f = oracle("silu");
  const Tensors in = oracle_inputs(*f, kRename);
  const OpContext ctx = default_context();
  const Tensor& y = output(op().cpu_forward(in, ctx), "y");
  REQUIRE(y.dtype() == DType::kBF16);
  CHECK(same_bits(y, rounded_bf16(output(op().reference_forward(in, ctx), "y"))));
  const Tensor& dx = output(op().cpu_backward(in, ctx), "dx");
  REQUIRE(dx.dtype() == DType::kBF16);
  CHECK(same_bits(dx, rounded_bf16(output(op().reference_backward(in, ctx), "dx"))));
  // PyTorch's bf16 F.silu also computes in FP32 and rounds once; only an expf that differs by
  // an ulp near a rounding tie can flip a bit.
  const Tensor& eager = *f->find("eager.y");
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i)
    if (y.data<std::uint16_t>()[i] != eager.data<std::uint16_t>()[i]) ++differ;
  CHECK(differ * 1000 < y.numel());
}

TEST_CASE("silu candidate is deterministic and independent of rows and threads", "[ops][silu]") {
  const Tensors in = inputs(6, 12288, 11);
  OpContext one = default_context(), two = default_context();
  one.threads = 1;
  two.threads = 2;
  const Tensor y1 = output(op().cpu_forward(in, one), "y");
  CHECK(same_bits(y1, output(op().cpu_forward(in, two), "y")));
  CHECK(same_bits(y1, output(op().cpu_forward(in, two), "y")));
  const Tensor dx = output(op().cpu_backward(in, two), "dx");
  CHECK(same_bits(dx, output(op().cpu_backward(in, one), "dx")));
  // Rows [0, 6) in one call equal rows [0, 2) and [2, 6) in two calls.
  const Tensor& x = in[0].tensor;
  const Tensor& dy = in[1].tensor;
  const Tensors a = {{"x", rows(x, 0, 2)}, {"dy.y", rows(dy, 0, 2)}};
  const Tensors b = {{"x", rows(x, 2, 6)}, {"dy.y", rows(dy, 2, 6)}};
  CHECK(same_bits(y1, concat_rows(output(op().cpu_forward(a, two), "y"),
                                  output(op().cpu_forward(b, two), "y"))));
  CHECK(same_bits(dx, concat_rows(output(op().cpu_backward(a, two), "dx"),
                                  output(op().cpu_backward(b, two), "dx"))));
}

TEST_CASE("silu refuses inputs that do not fit", "[ops][silu]") {
  const OpContext ctx = default_context();
  auto missing = op().cpu_forward({}, ctx);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message().find("silu: x: missing input") != std::string::npos);
  auto dtype = op().reference_forward({{"x", Tensor(DType::kF32, {2, 8})}}, ctx);
  REQUIRE_FALSE(dtype.ok());
  CHECK(dtype.error().message().find("silu: x: dtype F32") != std::string::npos);
  auto shape = op().cpu_backward(
      {{"x", Tensor(DType::kBF16, {2, 8})}, {"dy.y", Tensor(DType::kBF16, {2, 4})}}, ctx);
  REQUIRE_FALSE(shape.ok());
  CHECK(shape.error().message().find("silu: dy.y: shape [2, 4] (expected [2, 8])") != std::string::npos);
}

// Planted defect, reported as measured: a bf16 intermediate (sigmoid rounded before the
// multiply) adds one more relative error of at most 2^-9, so the elementwise bf16 row
// (rtol 0.016) cannot see it and the accuracy judge stays green. What exposes it is the ulp
// statistic: the real candidate is the correctly rounded answer everywhere (0 ulp), the
// defect is not.
TEST_CASE("silu planted defect: bf16 intermediate stays within the bf16 row; the ulp statistic shows it", "[ops][silu][defect]") {
  const OpContext ctx = default_context();
  for (const float scale : {1.0f, 3.0f, 8.0f}) {
    const Tensors in = {{"x", random_bf16({8, 12288}, 23, scale)}};
    const Tensor& ref = output(op().reference_forward(in, ctx), "y");
    const AccuracyTensor good = judge_bf16(Judgment::kForwardAccuracy, "silu", "y",
                                           output(op().cpu_forward(in, ctx), "y"), ref);
    const AccuracyTensor bad = judge_bf16(Judgment::kForwardAccuracy, "silu", "y",
                                          silu_bf16_intermediate(in[0].tensor), ref);
    CHECK(passed(good));
    CHECK(good.ulp_distance.max == 0);
    CHECK(bad.violations == 0);  // not caught by the contract's tolerance
    CHECK(bad.ulp_distance.max >= 1);  // but no longer the correctly rounded answer
    CHECK(bad.abs_error.max > good.abs_error.max);
    INFO("scale " << scale << ": defect max abs " << bad.abs_error.max << ", max ulp "
                  << bad.ulp_distance.max << ", worst margin "
                  << (bad.worst ? bad.worst->margin : 0.0));
  }
}

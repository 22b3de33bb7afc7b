// rms_norm: the FP32 reference against PyTorch float64, the cpu_bf16 candidate in both
// rounding orders, and planted defects that the accuracy judge must catch.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "elementwise_test_util.hpp"
#include "norm_dweight_restated.hpp"
#include "rms_norm.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;
using namespace ws1::test;

namespace {

const Op& op() {
  const Op* o = find_op_impl("rms_norm");
  REQUIRE(o != nullptr);
  return *o;
}

const std::map<std::string, std::string> kRename = {
    {"in.x", "x"}, {"in.w", "weight"}, {"dy.y", "dy.y"}};

bool same_f32_bits(const Tensor& t, const std::vector<float>& want) {
  if (t.dtype() != DType::kF32 || t.numel() != static_cast<std::int64_t>(want.size())) return false;
  return std::memcmp(t.contiguous().raw(), want.data(), want.size() * sizeof(float)) == 0;
}

Tensor bf16_of(const Shape& shape, const std::vector<float>& v) {
  Tensor t(DType::kBF16, shape);
  for (std::size_t i = 0; i < v.size(); ++i) t.data<std::uint16_t>()[i] = to_bf16(v[i]).bits;
  return t;
}

}  // namespace

TEST_CASE("rms_norm dweight: the candidate's declared blocked order", "[ops][rms_norm][norm_dweight]") {
  OpContext ctx = default_context();
  const float eps = static_cast<float>(ctx.rms_norm_eps);
  const std::int64_t block = ws1::ops::kDwRowBlock;
  struct Case {
    std::int64_t rows, width;
  };
  // No rows; fewer rows than a block; exactly one block; a ragged last block; many blocks with
  // a last block of one row; a width that is not a multiple of 8 or of 32.
  for (const Case c : {Case{0, 16}, Case{5, 64}, Case{block, 64}, Case{3 * block + 17, 48},
                       Case{9 * block + 1, 24}, Case{2 * block + 100, 37}}) {
    INFO("rows " << c.rows << ", width " << c.width);
    const Tensors in = {{"x", random_bf16({c.rows, c.width}, 71, 2.0f)},
                        {"weight", random_bf16({c.width}, 72)},
                        {"dy.y", random_bf16({c.rows, c.width}, 73)}};
    for (unsigned threads : {1u, 2u}) {
      ctx.threads = threads;
      const Tensor cand = output(op().cpu_backward(in, ctx), "dweight");
      REQUIRE(cand.dtype() == DType::kBF16);
      CHECK(same_bits(cand, bf16_of({c.width}, ws1_test::restated_dweight(in[0].tensor, in[2].tensor, eps))));
    }
    if (c.rows == 0) {  // no rows: +0 in both
      const Tensor cand = output(op().cpu_backward(in, ctx), "dweight");
      for (std::int64_t i = 0; i < c.width; ++i) CHECK(cand.data<std::uint16_t>()[i] == 0);
    }
  }
}

TEST_CASE("rms_norm dweight: the blocked order shown where an addend is absorbed, the reference keeping the sum", "[ops][rms_norm][norm_dweight]") {
  // ws1_test::absorbing_dweight_inputs: exact sum about 2 * (kDwRowBlock - 1), blocks +0.
  const std::int64_t block = ws1::ops::kDwRowBlock, width = 8;
  const Tensors in = ws1_test::absorbing_dweight_inputs(width, random_bf16({width}, 74));
  const OpContext ctx = default_context();
  const Tensor cand = output(op().cpu_backward(in, ctx), "dweight");
  const Tensor ref = output(op().reference_backward(in, ctx), "dweight");
  for (std::int64_t i = 0; i < width; ++i) {
    CHECK(cand.data<std::uint16_t>()[i] == 0);  // +0
    // The reference (lib/ref, pairwise over rows) keeps most of what the blocks lose.
    CHECK(ref.data<float>()[i] > static_cast<float>(block - 1));
  }
}

TEST_CASE("rms_norm reference agrees with PyTorch float64 within the float32 rows", "[ops][rms_norm]") {
  auto f = oracle("rms_norm");
  const Tensors in = oracle_inputs(*f, kRename);
  const OpContext ctx = default_context();
  auto fwd = op().reference_forward(in, ctx);
  REQUIRE(fwd.ok());
  const Tensor* y = find_tensor(*fwd, "y");
  REQUIRE(y != nullptr);
  CHECK(y->dtype() == DType::kF32);  // spec §3.1 condition 4
  const auto fa = agree(*y, *f->find("ref64.y"),
                        tolerance(Judgment::kForwardAccuracy, "rms_norm", ContractDType::kFloat32));
  CHECK(fa.violations == 0);
  // The reference's own error stays below 1% of the bf16 atol (DESIGN §4).
  const auto bf16_fwd = tolerance(Judgment::kForwardAccuracy, "rms_norm", ContractDType::kBFloat16);
  CHECK(fa.max_abs < bf16_fwd.atol / 100);

  auto bwd = op().reference_backward(in, ctx);
  REQUIRE(bwd.ok());
  const auto grad_tol = tolerance(Judgment::kGradientAccuracy, "rms_norm", ContractDType::kFloat32);
  const auto ga_x = agree(*find_tensor(*bwd, "dx"), *f->find("gref64.x"), grad_tol);
  const auto ga_w = agree(*find_tensor(*bwd, "dweight"), *f->find("gref64.w"), grad_tol);
  CHECK(ga_x.violations == 0);
  CHECK(ga_w.violations == 0);
  const auto bf16_grad = tolerance(Judgment::kGradientAccuracy, "rms_norm", ContractDType::kBFloat16);
  CHECK(ga_x.max_abs < bf16_grad.atol / 100);
  CHECK(ga_w.max_abs < bf16_grad.atol / 100);
}

TEST_CASE("rms_norm candidate: kernel order is the reference rounded once; hf order differs", "[ops][rms_norm]") {
  auto f = oracle("rms_norm");
  const Tensors in = oracle_inputs(*f, kRename);
  OpContext ctx = default_context();
  auto ref = op().reference_forward(in, ctx);
  ctx.rms_norm_order = RmsNormOrder::kKernel;
  auto kernel = op().cpu_forward(in, ctx);
  ctx.rms_norm_order = RmsNormOrder::kHf;
  auto hf = op().cpu_forward(in, ctx);
  REQUIRE(ref.ok());
  REQUIRE(kernel.ok());
  REQUIRE(hf.ok());
  const Tensor& r = *find_tensor(*ref, "y");
  const Tensor& k = *find_tensor(*kernel, "y");
  const Tensor& h = *find_tensor(*hf, "y");
  REQUIRE(k.dtype() == DType::kBF16);
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < r.numel(); ++i) {
    CHECK(k.data<std::uint16_t>()[i] == to_bf16(r.data<float>()[i]).bits);
    if (k.data<std::uint16_t>()[i] != h.data<std::uint16_t>()[i]) ++differ;
  }
  CHECK(differ > 0);  // the two orders are distinguishable on real data (spec §9.6)
  // HF order equals PyTorch's eager bf16 Qwen3RMSNorm in the oracle.
  const Tensor& eager = *f->find("eager.y");
  std::int64_t eager_differ = 0;
  for (std::int64_t i = 0; i < h.numel(); ++i)
    if (h.data<std::uint16_t>()[i] != eager.data<std::uint16_t>()[i]) ++eager_differ;
  CHECK(eager_differ * 1000 < h.numel());  // rstd computed in a different order may flip a tie
}

TEST_CASE("rms_norm refuses inputs that do not fit", "[ops][rms_norm]") {
  Tensors in = {{"x", Tensor(DType::kBF16, {4, 64})}, {"weight", Tensor(DType::kBF16, {32})}};
  auto r = op().cpu_forward(in, default_context());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("rms_norm: weight") != std::string::npos);
  Tensors wrong_dtype = {{"x", Tensor(DType::kF32, {4, 64})}, {"weight", Tensor(DType::kBF16, {64})}};
  auto r2 = op().reference_forward(wrong_dtype, default_context());
  REQUIRE_FALSE(r2.ok());
  CHECK(r2.error().message().find("rms_norm: x: dtype F32") != std::string::npos);
  Tensors missing = {{"x", Tensor(DType::kBF16, {4, 64})}};
  CHECK_FALSE(op().cpu_backward(missing, default_context()).ok());
}

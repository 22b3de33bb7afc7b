// pack: no oracle file; packed rows, cu_seqlens and the backward scatter are checked against a
// direct construction (x.reshape(-1, *tail)[mask.reshape(-1)]), on both paths, with a
// multi-dimensional tail, the token-major one-sequence layout, and bad masks.
#include "elementwise_test_util.hpp"

using namespace ws1;
using namespace ws1::test;

namespace {

const Op& op() {
  const Op* o = find_op_impl("pack");
  REQUIRE(o != nullptr);
  return *o;
}

Tensor bool_tensor(const Shape& shape, const std::vector<std::uint8_t>& v) {
  Tensor t(DType::kBool, shape);
  REQUIRE(static_cast<std::int64_t>(v.size()) == t.numel());
  std::copy(v.begin(), v.end(), t.data<std::uint8_t>());
  return t;
}

// Primary-fixture-like mask: 4 sequences right-padded to 20, active = completion tokens.
struct Case {
  std::int64_t b = 4, s = 20;
  std::vector<std::uint8_t> mask;
  std::vector<std::int64_t> cu = {0};
};
Case primary_like() {
  Case c;
  const std::int64_t prompt[4] = {5, 3, 8, 2}, len[4] = {14, 20, 15, 12};
  for (std::int64_t b = 0; b < c.b; ++b) {
    std::int64_t n = 0;
    for (std::int64_t p = 0; p < c.s; ++p) {
      const bool on = p >= prompt[b] && p < len[b];
      c.mask.push_back(on ? 1 : 0);
      n += on ? 1 : 0;
    }
    c.cu.push_back(c.cu.back() + n);
  }
  return c;
}

}  // namespace

TEST_CASE("pack forward: active rows in row-major order and cu_seqlens, both paths", "[ops][pack]") {
  const Case c = primary_like();
  const std::int64_t h = 64;
  const Tensor x = random_bf16({c.b, c.s, h}, 51);
  const Tensors in = {{"x", x}, {"mask", bool_tensor({c.b, c.s}, c.mask)}};
  const OpContext ctx = default_context();
  const auto cand = op().cpu_forward(in, ctx);
  const auto ref = op().reference_forward(in, ctx);
  const std::int64_t active = c.cu.back();

  // Direct construction: the masked rows of x.reshape(-1, h), in order.
  const Tensor flat = x.view({c.b * c.s, h});
  Tensor want(DType::kBF16, {active, h});
  std::int64_t k = 0;
  for (std::int64_t r = 0; r < c.b * c.s; ++r)
    if (c.mask[static_cast<std::size_t>(r)])
      std::copy_n(flat.select(0, r).data<std::uint16_t>(), h, want.data<std::uint16_t>() + (k++) * h);
  REQUIRE(k == active);

  const Tensor& packed = output(cand, "packed");
  CHECK(packed.dtype() == DType::kBF16);
  CHECK(same_bits(packed, want));
  const Tensor& packed_ref = output(ref, "packed");
  CHECK(packed_ref.dtype() == DType::kF32);
  CHECK(floats(packed_ref) == floats(want));
  for (const auto* r : {&cand, &ref}) {
    const Tensor& cu = output(*r, "cu_seqlens");
    REQUIRE(cu.dtype() == DType::kI64);
    REQUIRE(cu.shape() == Shape{c.b + 1});
    CHECK(std::vector<std::int64_t>(cu.data<std::int64_t>(), cu.data<std::int64_t>() + c.b + 1) == c.cu);
  }
  OpContext one = default_context();
  one.threads = 1;
  CHECK(same_bits(packed, output(op().cpu_forward(in, one), "packed")));
}

TEST_CASE("pack backward: dy rows back to the active rows, zeros elsewhere", "[ops][pack]") {
  const Case c = primary_like();
  const Shape tail = {2, 3};  // x [B, S, 2, 3]: any trailing shape
  const Tensor x = random_bf16({c.b, c.s, 2, 3}, 52);
  const std::int64_t active = c.cu.back();
  const Tensor dy = random_bf16({active, 2, 3}, 53);
  const Tensors in = {{"x", x}, {"mask", bool_tensor({c.b, c.s}, c.mask)}, {"dy.packed", dy}};
  const OpContext ctx = default_context();
  const Tensor dx = output(op().cpu_backward(in, ctx), "dx");
  const Tensor dx_ref = output(op().reference_backward(in, ctx), "dx");
  REQUIRE(dx.dtype() == DType::kBF16);
  REQUIRE(dx.shape() == x.shape());
  REQUIRE(dx_ref.dtype() == DType::kF32);
  CHECK(floats(dx_ref) == floats(dx));

  Tensor want(DType::kBF16, x.shape());  // +0 everywhere
  std::int64_t k = 0;
  for (std::int64_t r = 0; r < c.b * c.s; ++r)
    if (c.mask[static_cast<std::size_t>(r)]) {
      std::copy_n(dy.data<std::uint16_t>() + k * 6, 6, want.data<std::uint16_t>() + r * 6);
      ++k;
    }
  CHECK(same_bits(dx, want));
  // Packing the scattered gradient gives dy back.
  const Tensors again = {{"x", dx}, {"mask", in[1].tensor}};
  CHECK(same_bits(output(op().cpu_forward(again, ctx), "packed"), dy));
}

TEST_CASE("pack token-major layout: x [T, H] with mask [T] is one sequence", "[ops][pack]") {
  const std::vector<std::uint8_t> mask = {0, 1, 1, 0, 1, 0, 0};
  const Tensor x = random_bf16({7, 16}, 54);
  const auto r = op().cpu_forward({{"x", x}, {"mask", bool_tensor({7}, mask)}}, default_context());
  const Tensor& packed = output(r, "packed");
  REQUIRE(packed.shape() == Shape{3, 16});
  CHECK(same_bits(packed.select(0, 0), x.select(0, 1)));
  CHECK(same_bits(packed.select(0, 1), x.select(0, 2)));
  CHECK(same_bits(packed.select(0, 2), x.select(0, 4)));
  const Tensor& cu = output(r, "cu_seqlens");
  REQUIRE(cu.shape() == Shape{2});
  CHECK(cu.data<std::int64_t>()[0] == 0);
  CHECK(cu.data<std::int64_t>()[1] == 3);
  // No active row: an empty packed tensor, not an error.
  const auto none = op().cpu_forward({{"x", x}, {"mask", Tensor(DType::kBool, {7})}}, default_context());
  CHECK(output(none, "packed").shape() == Shape{0, 16});
}

TEST_CASE("pack refuses masks and gradients that do not fit", "[ops][pack]") {
  const OpContext ctx = default_context();
  const Tensor x(DType::kBF16, {2, 3, 4});
  auto expect = [&](Result<Tensors> r, const std::string& text) {
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message());
    CHECK(r.error().message().find(text) != std::string::npos);
  };
  expect(op().cpu_forward({{"x", x}}, ctx), "pack: mask: missing input");
  expect(op().cpu_forward({{"x", x}, {"mask", Tensor(DType::kI64, {2, 3})}}, ctx), "pack: mask: dtype I64");
  expect(op().cpu_forward({{"x", x}, {"mask", Tensor(DType::kBool, {3, 2})}}, ctx),
         "pack: mask: shape [3, 2] is not the leading dimensions of x [2, 3, 4]");
  expect(op().cpu_forward({{"x", x}, {"mask", Tensor(DType::kBool, {2, 3, 4})}}, ctx),
         "pack: mask: shape [2, 3, 4] (expected [B, S] or [T])");
  expect(op().reference_forward({{"x", x}, {"mask", bool_tensor({2, 3}, {0, 1, 2, 0, 0, 1})}}, ctx),
         "pack: mask: element 2 is the byte 2, not a bool (0 or 1)");
  expect(op().cpu_backward({{"x", x}, {"mask", bool_tensor({2, 3}, {0, 1, 1, 0, 0, 1})},
                            {"dy.packed", Tensor(DType::kBF16, {2, 4})}}, ctx),
         "pack: dy.packed: shape [2, 4] (expected [3, 4]: the active rows of x)");
}

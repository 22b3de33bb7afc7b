// attention's head_dim-128 forward on cuda_bf16 (cuda/ops/attention_wgmma.cuh), what the
// workloads' cells cannot show:
//   1. a row's bits depend only on its query, the keys it sees and the 128-key tile ranks: the
//      rows of a prefill equal the same rows computed as decode (Sq = 1) and as chunked prefill
//      against a cache of the first n keys, at n on both sides of the tile boundaries, with the
//      group of 4 query heads packed into one CTA and a key mask (the packed-key path);
//   2. a key whose V row holds magnitudes past fp16's range (the kernel scales that row by 2^-e
//      and its p by 2^e) stays inside the contract's forward row against the FP32 reference;
//   3. the backward is exact under dy -> dy * 2^k: dq, dk and dv scale by 2^k bit for bit, for
//      gradients of 2^-20 as of 2^13 and an outlier column (dv's fp16 copy of dO is scaled per
//      column, cuda/ops/attention_wgmma_bwd.cuh; without that scaling dO's small values would
//      fall into fp16's subnormals and the bits would change).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "bf16_patterns.hpp"
#include "gpu_test_support.hpp"
#include "ws1/runner.hpp"

using namespace ws1;

namespace {

constexpr std::int64_t kB = 2, kHq = 8, kHkv = 2, kS = 300, kD = 128;

Tensor key_mask(std::int64_t b, std::int64_t s) {  // row 0 all valid; row 1: 20 pad keys, then every 7th hidden
  Tensor m(DType::kBool, {b, s});
  for (std::int64_t r = 0; r < b; ++r)
    for (std::int64_t j = 0; j < s; ++j)
      m.data<std::uint8_t>()[r * s + j] = r == 0 || (j >= 20 && j % 7 != 3) ? 1 : 0;
  return m;
}

Tensor forward(const Tensors& in) {
  static const Op& attention = *find_op_impl("attention");
  const OpContext ctx = test::cuda_run_context(test::workload(test::gpu_workload_name())).op_context;
  auto r = test::cuda_backend().forward(attention, in, ctx);
  if (!r.ok()) FAIL(r.error().message());
  REQUIRE(r->size() == 1);
  return (*r)[0].tensor.contiguous();
}

Tensors backward(const Tensors& in) {
  static const Op& attention = *find_op_impl("attention");
  const OpContext ctx = test::cuda_run_context(test::workload(test::gpu_workload_name())).op_context;
  auto r = test::cuda_backend().backward(attention, in, ctx);
  if (!r.ok()) FAIL(r.error().message());
  return *r;
}

// x * 2^k, element by element (exact: no result leaves bf16's normal range in the test below).
Tensor times_pow2(const Tensor& x, int k) {
  Tensor y(DType::kBF16, x.shape());
  const Tensor xc = x.contiguous();
  for (std::int64_t i = 0; i < x.numel(); ++i)
    y.data<std::uint16_t>()[i] = to_bf16(std::ldexp(from_bf16(bf16{xc.data<std::uint16_t>()[i]}), k)).bits;
  return y;
}

}  // namespace

TEST_CASE("attention head_dim 128: decode and chunked-prefill rows equal the prefill rows bit for bit",
          "[gpu][attention]") {
  const Tensor q = ws1_test::grid_bf16({kB, kHq, kS, kD}, 900, 2.0f);
  const Tensor k = ws1_test::grid_bf16({kB, kHkv, kS, kD}, 901, 2.0f);
  const Tensor v = ws1_test::grid_bf16({kB, kHkv, kS, kD}, 902, 3.0f);
  const Tensor mask = key_mask(kB, kS);
  for (bool masked : {false, true}) {
    INFO((masked ? "with a key mask" : "no key mask"));
    Tensors full{{"q", q}, {"k", k}, {"v", v}};
    if (masked) full.push_back({"key_mask", mask});
    const Tensor o = forward(full);
    for (const std::int64_t n : {std::int64_t{1}, std::int64_t{127}, std::int64_t{128}, std::int64_t{129},
                                 std::int64_t{257}, kS}) {
      for (const std::int64_t sq : {std::int64_t{1}, std::int64_t{61}}) {
        if (sq > n) continue;
        INFO("queries [" << n - sq << ", " << n << ") against the first " << n << " keys");
        Tensors part{{"q", q.slice(2, n - sq, n).contiguous()},
                     {"k", k.slice(2, 0, n).contiguous()},
                     {"v", v.slice(2, 0, n).contiguous()}};
        if (masked) part.push_back({"key_mask", mask.slice(1, 0, n).contiguous()});
        CHECK(test::same_bits(forward(part), o.slice(2, n - sq, n)));
      }
    }
  }
}

TEST_CASE("attention head_dim 128: V magnitudes past fp16's range stay inside the forward row", "[gpu][attention]") {
  const test::Workload& wl = test::workload(test::gpu_workload_name());
  const RunContext run = test::cuda_run_context(wl);
  Tensor v = ws1_test::grid_bf16({1, 2, 200, kD}, 912, 3.0f);
  auto* bits = v.data<std::uint16_t>();
  // Keys 5 and 150 of kv head 0: one element at 2^20 and 3 * 2^17 (exponents 5 and 3 over
  // 2^15); key 60 of kv head 1: a whole row at -40000 (past 32768, fp16's top binade start).
  bits[5 * kD + 17] = to_bf16(1048576.0f).bits;
  bits[150 * kD + 100] = to_bf16(393216.0f).bits;
  for (std::int64_t d = 0; d < kD; ++d) bits[(200 + 60) * kD + d] = to_bf16(-40000.0f).bits;
  CellInputs in;
  in.fixture_id = "gpu-test:attention-v-past-fp16";
  in.tier = kUserTier;
  in.tensors = {{"q", ws1_test::grid_bf16({1, 8, 200, kD}, 910, 2.0f)},
                {"k", ws1_test::grid_bf16({1, 2, 200, kD}, 911, 2.0f)},
                {"v", v}};
  auto cell = run_accuracy_cell_on(run, test::cuda_backend(), *find_op_impl("attention"),
                                   Judgment::kForwardAccuracy, in);
  REQUIRE(cell.ok());
  INFO(cell->reason);
  CHECK(cell->verdict == Verdict::kGreen);
}

TEST_CASE("attention head_dim 128 without keys: o is zero", "[gpu][attention]") {
  // Skv = 0 (an empty cache): every row sees no key. The tensor-core forward needs a key (its
  // tensor maps have no empty dimension), so this shape takes the mma.sync kernel.
  const Tensor o = forward({{"q", ws1_test::grid_bf16({1, 8, 3, kD}, 920, 2.0f)},
                            {"k", Tensor(DType::kBF16, {1, 2, 0, kD})},
                            {"v", Tensor(DType::kBF16, {1, 2, 0, kD})}});
  REQUIRE(o.shape() == Shape{1, 8, 3, kD});
  CHECK(test::same_bits(o, Tensor(DType::kBF16, {1, 8, 3, kD})));  // a new Tensor is zeros
}

TEST_CASE("attention head_dim 128 backward: dy times 2^k gives dq, dk and dv times 2^k bit for bit", "[gpu][attention]") {
  const Tensor q = ws1_test::grid_bf16({1, kHq, kS, kD}, 930, 2.0f);
  const Tensor k = ws1_test::grid_bf16({1, kHkv, kS, kD}, 931, 2.0f);
  const Tensor v = ws1_test::grid_bf16({1, kHkv, kS, kD}, 932, 3.0f);
  Tensor dy = ws1_test::grid_bf16({1, kHq, kS, kD}, 933, 1.0f);
  for (std::int64_t r = 0; r < kHq * kS; ++r) {  // channel 35 of every row 64 times larger
    auto& e = dy.data<std::uint16_t>()[r * kD + 35];
    e = to_bf16(64.0f * from_bf16(bf16{e})).bits;
  }
  const Tensors base = backward({{"q", q}, {"k", k}, {"v", v}, {"dy.o", dy}});
  REQUIRE(base.size() == 3);
  for (const int e : {-20, 13}) {
    INFO("dy times 2^" << e);
    const Tensors got = backward({{"q", q}, {"k", k}, {"v", v}, {"dy.o", times_pow2(dy, e)}});
    REQUIRE(got.size() == base.size());
    for (std::size_t t = 0; t < base.size(); ++t) {
      INFO(base[t].name);
      CHECK(got[t].name == base[t].name);
      CHECK(test::same_bits(got[t].tensor, times_pow2(base[t].tensor, e)));
    }
  }
}

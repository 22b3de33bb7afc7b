// rope on cuda_bf16 (cuda/ops/rope.cu: rope_table_kernel forms the cos/sin table per position
// slot, rope_rotate_kernel rotates each row by its slot's entries). What the workloads' cells
// cannot show:
//   1. every layout finds its rows' slots: the same values as token-major [T, H, D], head-major
//      [1, H, T, D] with positions [T], and head-major [B, H, S, D] with positions [B, S]
//      (T = B*S) rotate to the same bits, forward and backward, at row counts past the grid
//      (grid-stride) and head counts below and above a block's threads;
//   2. it equals cpu_bf16 bit for bit on these inputs, large positions included (long range
//      reductions). The two tables can differ where CUDA's double sin/cos and glibc's round to
//      different float32 values (probability of order 2^-28 per entry, rope.cu's comment); the
//      inputs here are fixed, so this is a fixed check, not a flaky one.
#include <cstdint>

#include "bf16_patterns.hpp"
#include "gpu_test_support.hpp"

using namespace ws1;

namespace {

Tensor positions_for(Shape shape, std::uint32_t seed) {
  Tensor p(DType::kI64, std::move(shape));
  ws1_test::Xorshift32 g(seed);
  for (std::int64_t t = 0; t < p.numel(); ++t)
    p.data<std::int64_t>()[t] = t % 3 == 0 ? t : static_cast<std::int64_t>(g.next() % (std::int64_t{1} << 29));
  return p;
}

}  // namespace

TEST_CASE("rope: its layouts agree bit for bit and equal cpu_bf16", "[gpu][rope]") {
  const Op& rope = *find_op_impl("rope");
  OpContext ctx = test::cuda_run_context(test::workload(test::gpu_workload_name())).op_context;
  static auto cpu = make_cpu_bf16_backend();
  struct Case {
    std::int64_t batch, seq, heads, dim;
  };
  std::uint32_t seed = 500;
  for (const Case c : {Case{1, 37, 4, 128}, Case{2, 1500, 32, 128}, Case{5, 1, 2, 16}, Case{3, 100, 40, 256}}) {
    const std::int64_t tokens = c.batch * c.seq;
    INFO(c.batch << " x " << c.seq << " tokens, " << c.heads << " heads, head_dim " << c.dim);
    ctx.head_dim = c.dim;
    const Tensor x = ws1_test::grid_bf16({tokens, c.heads, c.dim}, seed, 3.0f);
    const Tensor dy = ws1_test::grid_bf16({tokens, c.heads, c.dim}, seed + 1, 1.0f);
    const Tensor pos = positions_for({c.batch, c.seq}, seed + 2);
    // [T, H, D] -> [1, H, T, D] and [B, H, S, D] (T = B*S), and back.
    const auto flat_head = [&](const Tensor& t) { return t.transpose(0, 1).contiguous().view({1, c.heads, tokens, c.dim}); };
    const auto batched = [&](const Tensor& t) {
      return t.view({c.batch, c.seq, c.heads, c.dim}).transpose(1, 2).contiguous();
    };
    for (bool backward : {false, true}) {
      INFO((backward ? "backward" : "forward"));
      const auto inputs = [&](const auto& shape_of, const Tensor& positions) {
        Tensors in{{"x", shape_of(x)}, {"positions", positions}};
        if (backward) in.push_back({"dy.y", shape_of(dy)});
        return in;
      };
      const auto same = [](const Tensor& t) { return t; };
      const Tensors tok = inputs(same, pos.view({tokens})), head = inputs(flat_head, pos.view({tokens})),
                    bat = inputs(batched, pos);
      const auto run = [&](Backend& be, const Tensors& in) {
        auto r = backward ? be.backward(rope, in, ctx) : be.forward(rope, in, ctx);
        if (!r.ok()) FAIL(r.error().message());
        REQUIRE(r->size() == 1);
        return (*r)[0].tensor.contiguous();
      };
      const Tensor a = run(test::cuda_backend(), tok);
      CHECK(test::same_bits(flat_head(a), run(test::cuda_backend(), head)));
      CHECK(test::same_bits(batched(a), run(test::cuda_backend(), bat)));
      CHECK(test::same_bits(a, run(*cpu, tok)));
    }
    seed += 3;
  }
}

// det_gemm's skinny forward (few rows: decode steps) runs the declared tree in the same
// operations as the tiled kernel and cpu_bf16: equal bits for every row count it takes and just
// past it (the tiled kernel again), over reduction lengths whose trees have leaves of 32, of 24
// (K = 12288, the down projection) and ragged ones.
#include <cstring>

#include "bf16_patterns.hpp"
#include "gpu_test_support.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;

TEST_CASE("det_gemm forward with 1 to 5 rows equals cpu_bf16 bit for bit", "[gpu][det_gemm][bitwise]") {
  const RunContext ctx = test::cuda_run_context(test::workload(test::gpu_workload_name()));
  const Op& op = *find_op_impl("det_gemm");
  auto cpu = make_cpu_bf16_backend();
  for (std::int64_t K : {33, 100, 4096, 12288}) {
    for (std::int64_t M : {1, 2, 3, 4, 5}) {
      const std::int64_t N = 200;  // not a multiple of 32: the last block has idle lanes
      const Tensors in{{"a", ws1_test::grid_bf16({M, K}, static_cast<std::uint32_t>(K + M), 1.0f)},
                       {"b", ws1_test::grid_bf16({K, N}, static_cast<std::uint32_t>(K), 1.0f / 64)}};
      auto want = cpu->forward(op, in, ctx.op_context);
      auto got = test::cuda_backend().forward(op, in, ctx.op_context);
      REQUIRE(want.ok());
      REQUIRE(got.ok());
      const Tensor& w = want->front().tensor;
      const Tensor& g = got->front().tensor;
      INFO("M " << M << " K " << K);
      REQUIRE(g.shape() == w.shape());
      CHECK(std::memcmp(g.raw(), w.raw(), w.nbytes()) == 0);
    }
  }
}

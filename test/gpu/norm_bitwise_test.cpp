// rms_norm / qk_norm backward on cuda_bf16 equals cpu_bf16 bit for bit at shapes that exercise
// dweight's declared blocked order (ws1/op_orders.hpp kDwRowBlock, docs/decisions.md D24):
// no rows, fewer rows than a block, exactly one block, one row past it, many blocks with a
// ragged last one; even widths (the partials kernel's 2-wide loads) and odd ones (1-wide),
// widths that are not multiples of 8 or 32; qk_norm's 128-wide heads over up to 65536 rows.
// dx is compared too; 2048, 4096 and 8192 (and 32 to 256 below) run the fused backward, the
// others the row kernels and the partials kernel. Run alone with: test_gpu "[norm_dweight]". And the lane kernels of
// narrow rows (widths of 1, 2, 4 or 8 chunks), forward in both orders and backward, at row
// counts that leave a warp's last row group partly empty: test_gpu "[norm_lanes]".
#include <cmath>
#include <cstddef>
#include <cstring>

#include "bf16_patterns.hpp"
#include "gpu_test_support.hpp"
#include "norm_dweight_restated.hpp"
#include "ws1/numeric.hpp"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

using namespace ws1;

namespace {

// x and dy of `shape`, weight [last dimension].
Tensors norm_inputs(const Shape& shape, std::uint32_t seed) {
  return {{"x", ws1_test::grid_bf16(shape, seed, 3.0f)},
          {"weight", ws1_test::grid_bf16({shape.back()}, seed + 1, 1.0f)},
          {"dy.y", ws1_test::grid_bf16(shape, seed + 2, 1.0f)}};
}

// The forward or backward of `op` on both backends; every output equal in dtype, shape and bits.
void check_bits(const char* name, bool backward, const Tensors& in, const OpContext& ctx) {
  static auto cpu = make_cpu_bf16_backend();
  const Op& op = *find_op_impl(name);
  auto want = backward ? cpu->backward(op, in, ctx) : cpu->forward(op, in, ctx);
  auto got = backward ? test::cuda_backend().backward(op, in, ctx) : test::cuda_backend().forward(op, in, ctx);
  REQUIRE(want.ok());
  if (!got.ok()) FAIL(got.error().message());
  REQUIRE(got->size() == want->size());
  for (std::size_t i = 0; i < want->size(); ++i) {
    const Tensor w = (*want)[i].tensor.contiguous(), g = (*got)[i].tensor.contiguous();
    INFO((*want)[i].name);
    REQUIRE((*got)[i].name == (*want)[i].name);
    REQUIRE(g.dtype() == w.dtype());
    REQUIRE(g.shape() == w.shape());
    std::int64_t differ = 0, first = -1;
    const std::byte* gb = g.raw();
    const std::byte* wb = w.raw();
    const std::size_t esize = w.numel() == 0 ? 1 : w.nbytes() / static_cast<std::size_t>(w.numel());
    for (std::int64_t e = 0; e < w.numel(); ++e)
      if (std::memcmp(gb + e * esize, wb + e * esize, esize) != 0) {
        if (first < 0) first = e;
        ++differ;
      }
    INFO(differ << " of " << w.numel() << " elements differ, the first at " << first);
    CHECK(differ == 0);
  }
}

}  // namespace

TEST_CASE("rms_norm backward equals cpu_bf16 bit for bit across dweight's row blocks", "[gpu][bitwise][norm_dweight]") {
  const OpContext ctx = test::cuda_run_context(test::workload(test::gpu_workload_name())).op_context;
  const std::int64_t block = ops::kDwRowBlock;
  struct Case {
    std::int64_t rows, width;
  };
  std::uint32_t seed = 100;
  for (const Case c : {Case{0, 64}, Case{0, 37}, Case{1, 4096}, Case{block - 1, 4096}, Case{block, 4096},
                       Case{block + 1, 4096}, Case{16 * block + 4, 4096}, Case{3 * block + 17, 1000},
                       Case{5 * block + 3, 4095}, Case{7 * block, 37}, Case{4 * block + 200, 1},
                       Case{2 * block + 9, 2}, Case{33 * block + 5, 24}, Case{32 * block, 4096},
                       Case{3 * block + 5, 2048}, Case{block + 7, 8192}, Case{5, 2048},
                       Case{600 * block + 3, 8}, Case{130 * block, 5}}) {
    INFO("rows " << c.rows << ", width " << c.width);
    check_bits("rms_norm", true, norm_inputs({c.rows, c.width}, seed), ctx);
    seed += 3;
  }
}

TEST_CASE("qk_norm backward equals cpu_bf16 bit for bit across dweight's row blocks", "[gpu][bitwise][norm_dweight]") {
  OpContext ctx = test::cuda_run_context(test::workload(test::gpu_workload_name())).op_context;
  std::uint32_t seed = 200;
  // [tokens, 32 heads, head_dim]: rows = 32 * tokens. 128 (Qwen3-8B): 32 rows (under a block),
  // 256 (one block), 288 (ragged second), 1312 (ragged sixth), 9600, 65536 (256 whole blocks)
  // and 65568 (one row block of 32 more); 36 and 27: head_dim not a multiple of 8, even and odd.
  struct Case {
    std::int64_t tokens, head_dim;
  };
  for (const Case c : {Case{1, 128}, Case{8, 128}, Case{9, 128}, Case{41, 128}, Case{300, 128}, Case{2048, 128},
                       Case{2049, 128}, Case{41, 36}, Case{300, 27}}) {
    INFO(c.tokens << " tokens, head_dim " << c.head_dim);
    ctx.head_dim = c.head_dim;
    check_bits("qk_norm", true, norm_inputs({c.tokens, 32, c.head_dim}, seed), ctx);
    seed += 3;
  }
}

TEST_CASE("cuda_bf16 rms_norm dweight sums blocks of rows, then the blocks in order", "[gpu][norm_dweight]") {
  // As test/ops/rms_norm_test.cpp's CPU case (ws1_test::absorbing_dweight_inputs): the blocked
  // order gives +0 where one row-order chain would give about kDwRowBlock - 1.
  const OpContext ctx = test::cuda_run_context(test::workload(test::gpu_workload_name())).op_context;
  for (std::int64_t width : {8, 7}) {
    INFO("width " << width);
    const Tensors in = ws1_test::absorbing_dweight_inputs(width, ws1_test::grid_bf16({width}, 7, 1.0f));
    auto got = test::cuda_backend().backward(*find_op_impl("rms_norm"), in, ctx);
    if (!got.ok()) FAIL(got.error().message());
    const Tensor* dw = find_tensor(*got, "dweight");
    REQUIRE(dw != nullptr);
    REQUIRE(dw->dtype() == DType::kBF16);
    const Tensor c = dw->contiguous();
    for (std::int64_t i = 0; i < width; ++i) CHECK(c.data<std::uint16_t>()[i] == 0);
    check_bits("rms_norm", true, in, ctx);
  }
}

TEST_CASE("rms_norm / qk_norm lane kernels (narrow rows) equal cpu_bf16 bit for bit", "[gpu][bitwise][norm_lanes]") {
  OpContext ctx = test::cuda_run_context(test::workload(test::gpu_workload_name())).op_context;
  struct Case {
    std::int64_t rows, width;
  };
  std::uint32_t seed = 300;
  // 32, 64, 128, 256: 1, 2, 4, 8 chunks per row (32, 16, 8, 4 rows per warp); row counts that
  // are not multiples of a warp's rows, of a block's, or that need many blocks; 96 (3 chunks)
  // and 160 run the team kernels, as neighbours.
  for (const Case c : {Case{1, 32}, Case{45, 32}, Case{7, 64}, Case{1001, 64}, Case{3, 128}, Case{9, 128},
                       Case{4099, 128}, Case{1, 256}, Case{5, 256}, Case{2051, 256}, Case{37, 96}, Case{37, 160}}) {
    for (RmsNormOrder order : {RmsNormOrder::kKernel, RmsNormOrder::kHf}) {
      ctx.rms_norm_order = order;
      INFO("rows " << c.rows << ", width " << c.width << (order == RmsNormOrder::kHf ? ", hf order" : ""));
      const Tensors in = norm_inputs({c.rows, c.width}, seed);
      check_bits("rms_norm", false, in, ctx);
      if (order == RmsNormOrder::kKernel) check_bits("rms_norm", true, in, ctx);
    }
    seed += 3;
  }
  // qk_norm's [tokens, heads, 128] on the lane kernels, an odd token count.
  ctx.rms_norm_order = RmsNormOrder::kKernel;
  ctx.head_dim = 128;
  const Tensors in = norm_inputs({37, 32, 128}, 400);
  check_bits("qk_norm", false, in, ctx);
  check_bits("qk_norm", true, in, ctx);
}


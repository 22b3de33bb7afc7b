// Resident weights (ws1cuda/resident.hpp): a kept tensor is uploaded once and later calls borrow
// the device copy (the chain's weights; test/gpu/parity_test.cpp runs the chain through it).
#include <cstring>

#include "gpu_test_support.hpp"
#include "ws1/numeric.hpp"
#include "ws1cuda/resident.hpp"

using namespace ws1;

namespace {

Tensor bf16_pattern(const Shape& shape, std::uint32_t seed) {
  Tensor t(DType::kBF16, shape);
  auto* p = t.data<std::uint16_t>();
  std::uint32_t x = seed;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = to_bf16(static_cast<float>(static_cast<int>(x >> 24) - 128) / 64.0f).bits;
  }
  return t;
}

Tensor det_gemm_c(const Tensor& a, const Tensor& b) {
  const RunContext ctx = test::cuda_run_context(test::workload(test::gpu_workload_name()));
  auto r = test::cuda_backend().forward(*find_op_impl("det_gemm"), {{"a", a}, {"b", b}}, ctx.op_context);
  if (!r) FAIL(r.error().message());
  return r->front().tensor;
}

bool same(const Tensor& x, const Tensor& y) {
  return x.shape() == y.shape() && std::memcmp(x.raw(), y.raw(), x.nbytes()) == 0;
}

}  // namespace

TEST_CASE("a kept weight is borrowed from the device; release goes back to copying", "[gpu][resident]") {
  Backend& cuda = test::cuda_backend();
  const Tensor a = bf16_pattern({5, 256}, 1);
  Tensor b = bf16_pattern({256, 96}, 2);
  const Tensor c0 = det_gemm_c(a, b);
  const Tensor kept[] = {b};
  cuda.keep_resident(kept);
  CHECK(ws1cuda::resident_tensors() == 1);
  CHECK(ws1cuda::resident_bytes() == b.nbytes());
  CHECK(ws1cuda::find_resident(b) != nullptr);
  CHECK(ws1cuda::find_resident(b.contiguous()) == nullptr);    // same values, other storage
  CHECK(ws1cuda::find_resident(b.transpose(0, 1)) == nullptr);  // same storage, other view
  CHECK(same(det_gemm_c(a, b), c0));
  // Break the promise on purpose: the host values change, the kept device copy does not, so the
  // result shows which one ran.
  Tensor changed = bf16_pattern({256, 96}, 3);
  std::memcpy(b.raw(), changed.raw(), b.nbytes());
  CHECK(same(det_gemm_c(a, b), c0));
  cuda.release_resident(kept);
  CHECK(ws1cuda::resident_tensors() == 0);
  CHECK(ws1cuda::resident_bytes() == 0);
  CHECK_FALSE(same(det_gemm_c(a, b), c0));
  CHECK(same(det_gemm_c(a, b), det_gemm_c(a, changed)));
}

TEST_CASE("keeps are counted: the copy goes with the last release", "[gpu][resident]") {
  Backend& cuda = test::cuda_backend();
  const Tensor w = bf16_pattern({64}, 4);
  const Tensor kept[] = {w};
  cuda.keep_resident(kept);
  cuda.keep_resident(kept);
  CHECK(ws1cuda::resident_tensors() == 1);
  cuda.release_resident(kept);
  CHECK(ws1cuda::find_resident(w) != nullptr);
  cuda.release_resident(kept);
  CHECK(ws1cuda::find_resident(w) == nullptr);
}

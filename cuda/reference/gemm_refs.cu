// FP32 references of the GEMM-shaped ops on the device, where the CPU references take longest
// (det_gemm over K = 12288, lm_head over V = 151936): cublasSgemm on the fixture's bf16 operands
// widened exactly to FP32, one cuBLAS product per 32-long K slice and the slices added in a
// pairwise tree (reference_support.cu: a gold's error then grows with the tree's depth, not with
// K). Not the CPU reference's bits; where the two differ beyond the float32 rows,
// test/gpu/reference_test.cpp measures both against a float64 lm_head (docs/decisions.md D26).
#include "reference_ops.hpp"
#include "reference_support.cuh"
#include "ws1/op_inputs.hpp"
#include "ws1/op_orders.hpp"

namespace ws1cuda::reference {
namespace {

constexpr const char* kEngine = "cuda_fp32 (cublasSgemm per 32-long K slice, pairwise tree, on bf16 operands widened to FP32)";

// c = a·b; backward da = dy·bᵀ (over N), db = aᵀ·dy (over M).
ws1::Tensors det_gemm(const ws1::Tensors& in, cublasHandle_t h, bool backward) {
  constexpr std::string_view op = "det_gemm";
  const ws1::ops::DetGemmInputs x = ws1::ops::det_gemm_inputs(op, in, backward);
  const int M = extent(x.a.shape()[0], op, "a"), K = extent(x.a.shape()[1], op, "a");
  const int N = extent(x.b.shape()[1], op, "b");
  const DeviceArray<float> a = widened(x.a), b = widened(x.b);
  if (!backward) return {{"c", download_f32(gemm(h, a, false, b, false, M, N, K), {M, N})}};
  const DeviceArray<float> dy = widened(*x.dy);
  return {{"da", download_f32(gemm(h, dy, false, b, true, M, K, N), {M, K})},
          {"db", download_f32(gemm(h, a, true, dy, false, K, N, M), {K, N})}};
}

// logits = hidden·weightᵀ; backward dhidden = dy·weight (over V), dweight = dyᵀ·hidden (over T).
ws1::Tensors lm_head(const ws1::Tensors& in, cublasHandle_t h, bool backward) {
  constexpr std::string_view op = "lm_head";
  const ws1::ops::LmHeadInputs x = ws1::ops::lm_head_inputs(op, in, backward);
  const int T = extent(x.rows, op, "hidden"), H = extent(x.width, op, "hidden"), V = extent(x.vocab, op, "weight");
  const DeviceArray<float> hidden = widened(x.hidden), weight = widened(x.weight);
  if (!backward) return {{"logits", download_f32(gemm(h, hidden, false, weight, true, T, V, H), x.logits_shape)}};
  const DeviceArray<float> dy = widened(*x.dy);
  return {{"dhidden", download_f32(gemm(h, dy, false, weight, false, T, H, V), x.hidden.shape())},
          {"dweight", download_f32(gemm(h, dy, true, hidden, false, V, H, T), {V, H})}};
}

// A table entry for a GEMM-shaped reference `f(in, handle, backward)`.
template <class F>
DeviceRef through_cublas(F f) {
  return {kEngine, true,
          [f](const ws1::Tensors& in, const ws1::OpContext&, cublasHandle_t h) { return f(in, h, false); },
          [f](const ws1::Tensors& in, const ws1::OpContext&, cublasHandle_t h) { return f(in, h, true); }};
}

}  // namespace

void add_gemm_refs(Table& t) {
  t.emplace("det_gemm", through_cublas(det_gemm));
  t.emplace("lm_head", through_cublas(lm_head));
}

}  // namespace ws1cuda::reference

// Internal: the skeleton shared by the elementwise-class ops (spec §2.3: one output rounding).
//   map_elements(): the pointwise map of silu and swiglu. Every output element is an FP32
//     function of the input elements at the same index; the reference stores that FP32 value,
//     the cpu_bf16 candidate its bf16 rounding (nearest even), so the candidate is the
//     reference rounded once. No reduction: nothing depends on the row or thread count.
//   PathOp: the Op of silu, swiglu, rope, embedding and pack, whose forward and backward are
//     one function each taking the path (reference or candidate).
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "op_support.hpp"
#include "ws1/numeric.hpp"

namespace ws1::ops {

enum class PointwisePath { kReference, kCandidate };

// sigmoid(x) = 1 / (1 + exp(-x)) in FP32 (std::exp on float: expf). Large negative x gives
// exp overflow to +inf and sigmoid 0, the FP32 limit.
inline float sigmoid_f32(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// The bf16 input `name`, which must exist and have `shape` (the op's first input's shape).
inline const Tensor& input_like(const Tensors& in, std::string_view op, std::string_view name,
                                const Shape& shape) {
  const Tensor& t = input(in, op, name, DType::kBF16);
  require(t.shape() == shape, op, name,
          "shape " + shape_string(t.shape()) + " (expected " + shape_string(shape) + ")");
  return t;
}

// A tensor of `shape` whose element i (row-major) is f(i): float32 for the reference, the
// bf16 rounding of f(i) for the candidate. Elements are split over threads in contiguous
// blocks (parallel_for); each is computed exactly once.
template <class F>
Tensor map_elements(const Shape& shape, PointwisePath path, unsigned threads, const F& f) {
  const std::int64_t n = numel(shape);
  if (path == PointwisePath::kReference) {
    Tensor t(DType::kF32, shape);
    float* out = t.data<float>();
    parallel_for(n, threads, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) out[i] = f(i);
    });
    return t;
  }
  Tensor t(DType::kBF16, shape);
  std::uint16_t* out = t.data<std::uint16_t>();
  parallel_for(n, threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) out[i] = to_bf16(f(i)).bits;
  });
  return t;
}

// The Op of an elementwise-class file: its forward and backward are one function each, run on
// the reference path or the candidate path (the four Op entry points differ only in that).
class PathOp final : public Op {
 public:
  using Fn = Result<Tensors> (*)(std::string_view op, const Tensors& in, const OpContext& ctx,
                                 PointwisePath path);
  PathOp(std::string_view name, std::vector<TensorDecl> outputs, std::vector<TensorDecl> gradients,
         Fn forward, Fn backward)
      : Op(*find_op(name)),
        outputs_(std::move(outputs)),
        gradients_(std::move(gradients)),
        forward_(forward),
        backward_(backward) {}
  std::vector<TensorDecl> outputs() const override { return outputs_; }
  std::vector<TensorDecl> gradients() const override { return gradients_; }
  Result<Tensors> reference_forward(const Tensors& in, const OpContext& ctx) const override {
    return forward_(name(), in, ctx, PointwisePath::kReference);
  }
  Result<Tensors> reference_backward(const Tensors& in, const OpContext& ctx) const override {
    return backward_(name(), in, ctx, PointwisePath::kReference);
  }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return forward_(name(), in, ctx, PointwisePath::kCandidate);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return backward_(name(), in, ctx, PointwisePath::kCandidate);
  }

 private:
  std::vector<TensorDecl> outputs_, gradients_;
  Fn forward_, backward_;
};

}  // namespace ws1::ops

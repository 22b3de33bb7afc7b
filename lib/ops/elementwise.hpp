// Internal: the skeleton shared by the elementwise-class candidates (spec §2.3: one output
// rounding).
//   map_elements(): the pointwise map of silu and swiglu. Every output element is the bf16
//     rounding (nearest even) of an FP32 function of the input elements at the same index.
//     No reduction: nothing depends on the row or thread count.
//   ElementwiseOp: the Op of silu, swiglu, rope, embedding and pack.
// The input checks these ops share with cuda_bf16 are ws1/op_inputs.hpp's.
// The FP32 references are lib/ref's (ws1/ref.hpp), which share none of this.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "op_support.hpp"
#include "ws1/numeric.hpp"

namespace ws1::ops {

// sigmoid(x) = 1 / (1 + exp(-x)) in FP32 (std::exp on float: expf). Large negative x gives
// exp overflow to +inf and sigmoid 0, the FP32 limit.
inline float sigmoid_f32(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// A bf16 tensor of `shape` whose element i (row-major) is the rounding of f(i). Elements are
// split over threads in contiguous blocks (parallel_for); each is computed exactly once.
template <class F>
Tensor map_elements(const Shape& shape, unsigned threads, const F& f) {
  Tensor t(DType::kBF16, shape);
  std::uint16_t* out = t.data<std::uint16_t>();
  parallel_for(numel(shape), threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) out[i] = to_bf16(f(i)).bits;
  });
  return t;
}

// The Op of an elementwise-class file: its candidate's forward and backward, one function each.
class ElementwiseOp final : public Op {
 public:
  using Fn = Result<Tensors> (*)(std::string_view op, const Tensors& in, const OpContext& ctx);
  using WorkFn = OpWork (*)(const Tensors& in, bool backward);
  ElementwiseOp(std::string_view name, std::vector<TensorDecl> outputs, std::vector<TensorDecl> gradients,
                Fn forward, Fn backward, WorkFn work = nullptr)
      : Op(*find_op(name)),
        outputs_(std::move(outputs)),
        gradients_(std::move(gradients)),
        forward_(forward),
        backward_(backward),
        work_(work) {}
  OpWork work(const Tensors& in, bool backward) const override {
    return work_ != nullptr ? work_(in, backward) : OpWork{};
  }
  std::vector<TensorDecl> outputs() const override { return outputs_; }
  std::vector<TensorDecl> gradients() const override { return gradients_; }
  Result<Tensors> cpu_forward(const Tensors& in, const OpContext& ctx) const override {
    return forward_(name(), in, ctx);
  }
  Result<Tensors> cpu_backward(const Tensors& in, const OpContext& ctx) const override {
    return backward_(name(), in, ctx);
  }

 private:
  std::vector<TensorDecl> outputs_, gradients_;
  Fn forward_, backward_;
  WorkFn work_;
};

}  // namespace ws1::ops

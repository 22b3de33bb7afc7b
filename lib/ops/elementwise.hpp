// Internal: the skeleton shared by the elementwise-class candidates (spec §2.3: one output
// rounding).
//   map_elements(): the pointwise map of silu and swiglu. Every output element is the bf16
//     rounding (nearest even) of an FP32 function of the input elements at the same index.
//     No reduction: nothing depends on the row or thread count.
//   ElementwiseOp: the Op of silu, swiglu, rope, embedding and pack.
//   <op>_inputs(): each op's input validation, shared with its cuda_bf16 host function
//     (cuda/ops/<op>.cu) so both refuse the same inputs with the same message. Defined in
//     lib/ops/<op>.cpp. This header is also compiled by nvcc (no fmt, no spdlog).
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

// Marks the few layout helpers that the CUDA kernels call on the device too.
#if defined(__CUDACC__)
#define WS1_HOST_DEVICE __host__ __device__
#else
#define WS1_HOST_DEVICE
#endif

namespace ws1::ops {

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

// The bf16 inputs `names` of a pointwise op (silu, swiglu): the first of any shape, each
// other one with the first one's shape.
template <std::size_t N>
std::array<const Tensor*, N> pointwise_inputs(std::string_view op, const Tensors& in,
                                              const std::array<std::string_view, N>& names) {
  std::array<const Tensor*, N> t{};
  t[0] = &input(in, op, names[0], DType::kBF16);
  for (std::size_t k = 1; k < N; ++k) t[k] = &input_like(in, op, names[k], t[0]->shape());
  return t;
}

// embedding: ids (int64) and table [V, H] bf16; backward also dy.y [ids..., H].
struct EmbeddingInputs {
  const Tensor* table = nullptr;
  const Tensor* dy = nullptr;        // backward only
  std::vector<std::int64_t> ids;     // row-major, every one in [0, V)
  std::int64_t vocab = 0, hidden = 0;
  Shape out_shape;                   // ids.shape + [H]
};
EmbeddingInputs embedding_inputs(std::string_view op, const Tensors& in, bool backward);

// rope: where each D-wide row of x (or dy.y) takes its position from.
struct RopeLayout {
  std::int64_t rows = 0, dim = 0;
  std::int64_t heads = 0, seq = 0;  // head-major: H and S
  bool token_major = false;
  bool batched_positions = false;   // head-major with positions [B, S]

  // The index into positions (and into the cos/sin table) of row `row`.
  WS1_HOST_DEVICE std::int64_t slot(std::int64_t row) const {
    if (token_major) return row / heads;  // row = t*H + h
    const std::int64_t s = row % seq;     // row = (b*H + h)*S + s
    return batched_positions ? (row / (heads * seq)) * seq + s : s;
  }
};
struct RopeInputs {
  const Tensor* v = nullptr;              // x (forward) or dy.y (backward)
  RopeLayout layout;
  std::vector<std::int64_t> positions;    // row-major, every one in [0, 2^29)
  std::vector<float> inv_freq;            // D/2 entries: float32(1 / theta^(2i/D)) via double
};
RopeInputs rope_inputs(std::string_view op, const Tensors& in, const OpContext& ctx,
                       bool backward);

// pack: x [B, S, *tail] (or [T, *tail]) bf16 and mask [B, S] (or [T]); backward also
// dy.packed [A, *tail].
struct Packing {
  std::vector<std::int64_t> active;  // flat (b, s) row index of each packed row, in order
  std::vector<std::int64_t> cu_seqlens;
  std::int64_t rows = 0;             // rows of x: the mask's element count
  std::int64_t width = 0;            // elements per row (product of the tail)
  Shape packed_shape;                // [A, *tail]
};
struct PackInputs {
  const Tensor* x = nullptr;
  const Tensor* dy = nullptr;        // backward only
  Packing packing;
};
PackInputs pack_inputs(std::string_view op, const Tensors& in, bool backward);

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

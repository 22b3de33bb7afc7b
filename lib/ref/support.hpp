// Internal to lib/ref: how the references read their inputs and the few loops several of them
// run. Nothing here is shared with the candidates (lib/ops, cuda/ops): only the number formats
// (ws1/numeric.hpp) and the tensor type are common ground.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/error.hpp"
#include "ws1/op.hpp"
#include "ws1/op_list.hpp"
#include "ws1/tensor.hpp"

namespace ws1::ref {

// Thrown by a reference whose inputs do not fit; ref::forward / ref::backward return its error.
struct BadInput {
  Error error;
};

// One call of a reference: the op's name, its tensors and the run's settings. Every read is
// checked (present, dtype, rank) and fails with "<op>: <tensor>: <problem>" (exit 2).
class Call {
 public:
  Call(std::string_view op, const Tensors& in, const OpContext& ctx) : op_(op), in_(in), ctx_(ctx) {}

  std::string_view op() const { return op_; }
  const OpContext& ctx() const { return ctx_; }
  bool has(std::string_view name) const;
  // The tensor `name` with `dtype` and, when rank >= 0, that rank.
  const Tensor& tensor(std::string_view name, DType dtype, int rank = -1) const;
  // Its values widened exactly to FP32, row-major: a bf16 activation, or (dtype kF32) a
  // float32 upstream gradient such as logp's dy.logp.
  std::vector<float> floats(std::string_view name, DType dtype = DType::kBF16, int rank = -1) const;
  // An integer tensor's values (int32 or int64), row-major.
  std::vector<std::int64_t> integers(std::string_view name, int rank = -1) const;
  // Fails unless `ok`, saying `problem` about tensor `name`.
  void expect(bool ok, std::string_view name, const std::string& problem) const;

 private:
  const Tensor* find(std::string_view name) const;

  std::string_view op_;
  const Tensors& in_;
  const OpContext& ctx_;
};

// An engine's table of its op definitions (lib/ref's, and lib/naive's reading through this
// Call): each op's forward and backward body.
struct Definition {
  std::string_view op;
  Tensors (*forward)(const Call&);
  Tensors (*backward)(const Call&);
};
// The definition of `op` in `defs`, or nullptr.
const Definition* find_definition(std::span<const Definition> defs, std::string_view op);
// Runs op `op`'s body on `in`: an op missing from `defs` is bad input saying `missing`; a
// BadInput or a shape check of the tensor layer becomes the op's bad-input Error.
Result<Tensors> run_definition(std::span<const Definition> defs, std::string_view op, const Tensors& in,
                               const OpContext& ctx, bool backward, std::string_view missing);

// A float32 tensor holding `values` (values.size() == the shape's element count).
Tensor f32_tensor(const Shape& shape, std::vector<float> values);
// "[2, 3]" (the tensor layer's shape_string).
std::string shape_text(const Shape& shape);

// body(i) for every i in [0, n), spread over `threads` workers (0: every core). Each i is run
// exactly once, so results written per index do not depend on the thread count.
void each_index(std::int64_t n, unsigned threads, const std::function<void(std::int64_t)>& body);

// c[m, n] = sum over k of a[m, k] * b[k, n] (row-major, FP32): each output's products added
// in increasing k from +0 (one multiply and one add per step) in leaves of 32 consecutive k,
// the leaf sums then added as a balanced binary tree (a gold's own error must not grow with k). b_rows_are_n: b is given as
// [n, k] instead (its transpose), as weights [V, H] are stored.
void matmul(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k, std::int64_t n,
            bool b_rows_are_n, unsigned threads);
// The [cols, rows] transpose of a row-major [rows, cols] matrix.
std::vector<float> transposed(const std::vector<float>& x, std::int64_t rows, std::int64_t cols);

// ---- the references, one pair per op of ws1/op_list.hpp (lib/ref/<op>.cpp) ----
#define WS1_REF_OP(name)                      \
  Tensors name##_forward(const Call& call); \
  Tensors name##_backward(const Call& call);
WS1_OP_LIST(WS1_REF_OP)
#undef WS1_REF_OP

}  // namespace ws1::ref

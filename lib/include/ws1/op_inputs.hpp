// What every implementation of an op calls, whichever backend it is (the cpu_bf16 candidate in
// lib/ops, the cuda_bf16 kernels and the cuda_fp32 engine in cuda/): each op's checked inputs,
// so that all refuse the same inputs with the same one-line error ("<op>: <tensor>: problem"),
// and the two failures an op may throw inside guarded(). Defined in lib/ops (op_support.cpp and
// the op's own file). Also compiled by nvcc: no fmt, no spdlog.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/error.hpp"
#include "ws1/op.hpp"
#include "ws1/tensor.hpp"

// Marks the few layout helpers that the CUDA kernels call on the device too.
#if defined(__CUDACC__)
#define WS1_HOST_DEVICE __host__ __device__
#else
#define WS1_HOST_DEVICE
#endif

namespace ws1::ops {

// ---- failures inside an op ----

// The inputs do not fit the op (bad input, exit 2).
struct OpInputError {
  Error error;
};
// The machine failed under the op: a CUDA call, launch or allocation, a cuBLAS status
// (environment, exit 3).
struct DeviceError {
  Error error;
};

// Runs `body` and returns the Error of an OpInputError or DeviceError it throws (or a bad-input
// Error naming the op for a std::logic_error from the tensor layer).
Result<Tensors> guarded(std::string_view op, const std::function<Tensors()>& body);

// The input `name`, which must exist with `dtype` and `rank` (rank < 0: any). Throws
// OpInputError "<op>: <name>: problem".
const Tensor& input(const Tensors& in, std::string_view op, std::string_view name, DType dtype,
                    int rank = -1);
// Throws OpInputError saying `problem` about `op`'s tensor `name` unless `cond`.
void require(bool cond, std::string_view op, std::string_view name, const std::string& problem);

// ---- conversions ----

// The int64 elements of an integer tensor (I32 or I64), row-major.
std::vector<std::int64_t> to_i64(const Tensor& t);
// A float32 tensor holding `values` (moved).
Tensor f32_tensor(const Shape& shape, std::vector<float> values);

// ---- each op's checked inputs (the checks are defined in lib/ops/<op>.cpp) ----

// embedding: ids (int64) and table [V, H] bf16; backward also dy.y [ids..., H].
struct EmbeddingInputs {
  const Tensor* table = nullptr;
  const Tensor* dy = nullptr;        // backward only
  std::vector<std::int64_t> ids;     // row-major, every one in [0, V)
  std::int64_t vocab = 0, hidden = 0;
  Shape out_shape;                   // ids.shape + [H]
};
EmbeddingInputs embedding_inputs(std::string_view op, const Tensors& in, bool backward);

// rms_norm / qk_norm: x viewed as [rows, width] (the last dimension).
struct NormInputs {
  const Tensor* x = nullptr;
  const Tensor* weight = nullptr;
  const Tensor* dy = nullptr;  // "dy.y"; backward only
  std::int64_t rows = 0, width = 0;
};
// bf16 x with at least one dimension, bf16 weight [width of x's last dimension], and with
// `backward` bf16 dy.y shaped like x.
NormInputs check_norm_inputs(std::string_view op, const Tensors& in, bool backward);
// qk_norm's check before check_norm_inputs: when the run knows head_dim (ctx.head_dim > 0),
// x's last dimension must equal it. Defined in qk_norm.cpp.
void check_qk_norm_head_dim(std::string_view op, const Tensors& in, const OpContext& ctx);

// det_gemm: a [M, K] and b [K, N] bf16; backward also dy.c [M, N].
struct DetGemmInputs {
  const Tensor& a;
  const Tensor& b;
  const Tensor* dy = nullptr;  // backward only
};
DetGemmInputs det_gemm_inputs(std::string_view op, const Tensors& in, bool with_dy);

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
RopeInputs rope_inputs(std::string_view op, const Tensors& in, const OpContext& ctx, bool backward);

// attention: q [B, Hq, Sq, D]; k, v [B, Hkv, Skv, D].
inline constexpr std::string_view kAttentionOp = "attention";
struct AttentionDims {
  std::int64_t b = 0, hq = 0, hkv = 0, sq = 0, skv = 0, d = 0;
  std::int64_t group() const { return hq / hkv; }
  std::int64_t offset() const { return skv - sq; }  // bottom-right causal alignment
};
// Pointers into the caller's Tensors (valid while those live).
struct AttentionInputs {
  AttentionDims n;
  const Tensor* q = nullptr;
  const Tensor* k = nullptr;
  const Tensor* v = nullptr;
  const Tensor* dy = nullptr;       // "dy.o", backward only
  std::vector<std::uint8_t> valid;  // [B, Skv]: 1 = key may be attended to (key_mask, or all 1)
  float scale = 1.0f;               // 1/sqrt(D), the float32 rounding of the double value
};
// q, k, v (bf16, head-major rank 4, fitting shapes), the optional key_mask ([B, Skv] bool, bytes
// 0 or 1) and, for backward, dy.o (bf16, q's shape).
AttentionInputs check_attention_inputs(const Tensors& in, bool backward);

// The bf16 input `name`, which must exist and have `shape` (the op's first input's shape).
inline const Tensor& input_like(const Tensors& in, std::string_view op, std::string_view name,
                                const Shape& shape) {
  const Tensor& t = input(in, op, name, DType::kBF16);
  require(t.shape() == shape, op, name,
          "shape " + shape_string(t.shape()) + " (expected " + shape_string(shape) + ")");
  return t;
}
// The bf16 inputs `names` of a pointwise op (silu, swiglu): the first of any shape, each other
// one with the first one's shape.
template <std::size_t N>
std::array<const Tensor*, N> pointwise_inputs(std::string_view op, const Tensors& in,
                                              const std::array<std::string_view, N>& names) {
  std::array<const Tensor*, N> t{};
  t[0] = &input(in, op, names[0], DType::kBF16);
  for (std::size_t k = 1; k < N; ++k) t[k] = &input_like(in, op, names[k], t[0]->shape());
  return t;
}

// lm_head: hidden [..., H] bf16 (the leading dims are the rows) and weight [V, H] bf16; backward
// also dy.logits.
struct LmHeadInputs {
  const Tensor& hidden;
  const Tensor& weight;
  const Tensor* dy = nullptr;    // dy.logits, the logits' shape, bf16 (backward only)
  std::int64_t rows = 0;         // T: the product of hidden's leading dims
  std::int64_t width = 0;        // H
  std::int64_t vocab = 0;        // V
  Shape logits_shape;            // hidden's shape with H replaced by V
};
LmHeadInputs lm_head_inputs(std::string_view op, const Tensors& in, bool with_dy);

// logp / batch_invariant_logp: "logits" [..., V] bf16, "targets" [...] int64 (each in [0, V),
// or ctx.ignore_index when `honour_ignore_index`), and with `backward` "dy.logp" [...] float32.
struct LogitRows {
  const Tensor* logits = nullptr;
  const Tensor* targets = nullptr;
  const Tensor* dy = nullptr;  // backward only
  std::int64_t rows = 0, vocab = 0;
  std::vector<std::int64_t> ids;  // the targets, row-major
  std::vector<bool> ignored;      // ids[r] == ctx.ignore_index (honour_ignore_index only)
};
LogitRows check_logit_rows(std::string_view op, const Tensors& in, const OpContext& ctx,
                           bool honour_ignore_index, bool backward);

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

// linear_logp: "hidden" [..., H] bf16, "weight" [V, H] bf16, "targets" [...] int64 each in
// [0, V), and with `backward` "dy.logp" [...] float32.
struct LinearLogpInputs {
  Tensor hidden;                  // [rows, H] contiguous view of the input
  const Tensor* weight = nullptr;
  const Tensor* dy = nullptr;     // backward only
  Shape lead;                     // hidden's shape without H (= targets' shape)
  std::int64_t rows = 0, width = 0, vocab = 0;
  std::vector<std::int64_t> targets;
};
LinearLogpInputs check_linear_logp_inputs(std::string_view op, const Tensors& in, bool backward);

}  // namespace ws1::ops

#include "support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <stdexcept>
#include <utility>

#include "ws1/numeric.hpp"

namespace ws1::ref {

const Definition* find_definition(std::span<const Definition> defs, std::string_view op) {
  for (const Definition& d : defs)
    if (d.op == op) return &d;
  return nullptr;
}

Result<Tensors> run_definition(std::span<const Definition> defs, std::string_view op, const Tensors& in,
                               const OpContext& ctx, bool backward, std::string_view missing) {
  const Definition* d = find_definition(defs, op);
  if (d == nullptr) return bad_input(std::string(op), "", std::string(missing));
  try {
    const Call call(op, in, ctx);
    return backward ? d->backward(call) : d->forward(call);
  } catch (const BadInput& e) {
    return e.error;
  } catch (const std::logic_error& e) {  // the tensor layer's shape checks
    return bad_input(std::string(op), "", e.what());
  }
}

const Tensor* Call::find(std::string_view name) const {
  for (const NamedTensor& t : in_)
    if (t.name == name) return &t.tensor;
  return nullptr;
}

bool Call::has(std::string_view name) const { return find(name) != nullptr; }

void Call::expect(bool ok, std::string_view name, const std::string& problem) const {
  if (!ok) throw BadInput{bad_input(std::string(op_), std::string(name), problem)};
}

const Tensor& Call::tensor(std::string_view name, DType dtype, int rank) const {
  const Tensor* t = find(name);
  expect(t != nullptr, name, "missing input");
  expect(t->dtype() == dtype, name,
         fmt::format("dtype {} (expected {})", dtype_safetensors_name(t->dtype()), dtype_safetensors_name(dtype)));
  expect(rank < 0 || t->dim() == rank, name, fmt::format("shape {} (expected rank {})", shape_text(t->shape()), rank));
  return *t;
}

std::vector<float> Call::floats(std::string_view name, DType dtype, int rank) const {
  const Tensor& given = tensor(name, dtype, rank);
  const Tensor t = given.is_contiguous() ? given : given.contiguous();
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  if (dtype == DType::kF32) {
    std::copy_n(t.data<float>(), out.size(), out.begin());
    return out;
  }
  expect(dtype == DType::kBF16 || dtype == DType::kF16, name, "not a floating-point input");
  const auto* bits = t.data<std::uint16_t>();
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = dtype == DType::kBF16 ? from_bf16(bf16{bits[i]}) : from_fp16(fp16{bits[i]});
  return out;
}

std::vector<std::int64_t> Call::integers(std::string_view name, int rank) const {
  const Tensor* found = find(name);
  expect(found != nullptr, name, "missing input");
  const DType dtype = found->dtype();
  expect(dtype == DType::kI64 || dtype == DType::kI32, name,
         fmt::format("dtype {}, expected int64 or int32", dtype_safetensors_name(dtype)));
  const Tensor& given = tensor(name, dtype, rank);
  const Tensor t = given.is_contiguous() ? given : given.contiguous();
  std::vector<std::int64_t> out(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = dtype == DType::kI64 ? t.data<std::int64_t>()[i] : t.data<std::int32_t>()[i];
  return out;
}

Tensor f32_tensor(const Shape& shape, std::vector<float> values) {
  Tensor t = Tensor::uninitialized(DType::kF32, shape);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

std::string shape_text(const Shape& shape) { return shape_string(shape); }

void each_index(std::int64_t n, unsigned threads, const std::function<void(std::int64_t)>& body) {
  if (n <= 0) return;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const auto workers = static_cast<unsigned>(std::min<std::int64_t>(threads != 0 ? threads : cores, n));
  // Indices are handed out one at a time: rows of unequal cost (causal attention) balance.
  std::atomic<std::int64_t> next{0};
  const auto run = [&] {
    for (std::int64_t i = next++; i < n; i = next++) body(i);
  };
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) pool.emplace_back(run);
  run();
  for (auto& t : pool) t.join();
}

std::vector<float> transposed(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
  std::vector<float> out(x.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(c * rows + r)] = x[static_cast<std::size_t>(r * cols + c)];
  return out;
}

namespace {

// The product's inner loops are also compiled for AVX2, chosen at load time: every output is
// its own chain and nothing is contracted (-ffp-contract=off), so both give the same bits.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define WS1_REF_GEMM_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define WS1_REF_GEMM_CLONES
#endif

constexpr std::int64_t kCols = 16;  // output columns per task, b's block copied as [k][kCols]
constexpr std::int64_t kRows = 4;   // output rows sharing each copied row of b
// Products are summed in leaves of kLeaf consecutive k, the leaf sums then added as a balanced
// tree: the rounding error of a sum over k grows with kLeaf + log2(k / kLeaf), not with k
// (dhidden sums over a vocabulary of 151936).
constexpr std::int64_t kLeaf = 32;

// Rows [i0, i0 + kRowsNow) of c for the columns of `packed` (k rows of kCols, zero padded).
// Each leaf's sums go into a binary counter: level l holds the sum of 2^l leaves, and a new
// leaf carries upward as a counter's bit does, so leaf sums meet in a balanced tree.
template <int kRowsNow>
WS1_REF_GEMM_CLONES void rows_times_block(const float* a, const float* packed, float* c, std::int64_t i0, std::int64_t k,
                      std::int64_t n, std::int64_t j0, std::int64_t width) {
  constexpr int kLevels = 48;
  float level[kLevels][kRowsNow][kCols];
  bool full[kLevels] = {};
  for (std::int64_t k0 = 0; k0 < k; k0 += kLeaf) {
    float acc[kRowsNow][kCols] = {};
    for (std::int64_t kk = k0; kk < std::min(k, k0 + kLeaf); ++kk) {
      const float* b = packed + kk * kCols;
#pragma GCC unroll 8
      for (int r = 0; r < kRowsNow; ++r) {
        const float ar = a[(i0 + r) * k + kk];
#pragma GCC unroll 32
        for (std::int64_t j = 0; j < kCols; ++j) acc[r][j] = acc[r][j] + ar * b[j];
      }
    }
    int l = 0;
    for (; full[l]; ++l) {  // the earlier (left) sum first
      for (int r = 0; r < kRowsNow; ++r)
        for (std::int64_t j = 0; j < kCols; ++j) acc[r][j] = level[l][r][j] + acc[r][j];
      full[l] = false;
    }
    std::copy_n(&acc[0][0], kRowsNow * kCols, &level[l][0][0]);
    full[l] = true;
  }
  // What is left: the levels from the highest (leftmost leaves) down, added left to right.
  float total[kRowsNow][kCols] = {};
  bool any = false;
  for (int l = kLevels - 1; l >= 0; --l) {
    if (!full[l]) continue;
    for (int r = 0; r < kRowsNow; ++r)
      for (std::int64_t j = 0; j < kCols; ++j) total[r][j] = any ? total[r][j] + level[l][r][j] : level[l][r][j];
    any = true;
  }
  for (int r = 0; r < kRowsNow; ++r) std::copy_n(total[r], width, c + (i0 + r) * n + j0);
}

}  // namespace

void matmul(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k, std::int64_t n,
            bool b_rows_are_n, unsigned threads) {
  const std::int64_t blocks = (n + kCols - 1) / kCols;
  each_index(blocks, threads, [&](std::int64_t block) {
    const std::int64_t j0 = block * kCols, width = std::min(kCols, n - j0);
    std::vector<float> packed(static_cast<std::size_t>(k * kCols), 0.0f);
    for (std::int64_t kk = 0; kk < k; ++kk)
      for (std::int64_t j = 0; j < width; ++j)
        packed[static_cast<std::size_t>(kk * kCols + j)] = b_rows_are_n ? b[(j0 + j) * k + kk] : b[kk * n + j0 + j];
    std::int64_t i = 0;
    for (; i + kRows <= m; i += kRows) rows_times_block<kRows>(a, packed.data(), c, i, k, n, j0, width);
    for (; i < m; ++i) rows_times_block<1>(a, packed.data(), c, i, k, n, j0, width);
  });
}

}  // namespace ws1::ref

#include "support.hpp"

namespace ws1::naive {

std::vector<float>& bf_all(std::vector<float>& v) {
  for (float& x : v) x = bf(x);
  return v;
}

Tensor bf16_tensor(const Shape& shape, const std::vector<float>& values) {
  Tensor t(DType::kBF16, shape);
  auto* out = t.data<std::uint16_t>();
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = to_bf16(values[i]).bits;
  return t;
}

Tensor widened_tensor(const Shape& shape, const std::vector<float>& values) {
  std::vector<float> v = values;
  return ref::f32_tensor(shape, bf_all(v));
}

void matmul_bf16(const float* a, const float* b, float* c, std::int64_t m, std::int64_t k, std::int64_t n,
                 bool b_rows_are_n, unsigned threads) {
  ref::matmul(a, b, c, m, k, n, b_rows_are_n, threads);
  for (std::int64_t i = 0; i < m * n; ++i) c[i] = bf(c[i]);
}

float sum_fp32(const float* x, std::int64_t n) {
  if (n <= 0) return 0.0f;
  if (n <= 32) {
    float s = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) s += x[i];
    return s;
  }
  const std::int64_t half = n / 2;
  return sum_fp32(x, half) + sum_fp32(x + half, n - half);
}

}  // namespace ws1::naive

// Internal to lib/ref: a per-element FP32 function of same-shaped bf16 inputs (silu, swiglu).
#pragma once

#include <array>
#include <cmath>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "support.hpp"

namespace ws1::ref {

inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// f(v) at every index, v[j] the j-th named input's element there; the inputs after the
// first must have its shape.
template <class F>
Tensor elementwise(const Call& call, std::initializer_list<std::string_view> names, F f) {
  const Shape& shape = call.tensor(*names.begin(), DType::kBF16).shape();
  std::vector<std::vector<float>> v;
  for (std::string_view name : names) {
    call.expect(call.tensor(name, DType::kBF16).shape() == shape, name,
                "shape " + shape_text(call.tensor(name, DType::kBF16).shape()) + " (expected " + shape_text(shape) + ")");
    v.push_back(call.floats(name));
  }
  std::vector<float> out(v[0].size());
  std::array<float, 4> at{};
  for (std::size_t i = 0; i < out.size(); ++i) {
    for (std::size_t j = 0; j < v.size(); ++j) at[j] = v[j][i];
    out[i] = f(at.data());
  }
  return f32_tensor(shape, std::move(out));
}

}  // namespace ws1::ref

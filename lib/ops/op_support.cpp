#include "op_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <thread>

#include "ws1/numeric.hpp"

namespace ws1::ops {

void require(bool cond, std::string_view op, std::string_view name, const std::string& problem) {
  if (!cond) throw OpInputError{bad_input(std::string(op), std::string(name), problem)};
}

const Tensor& input(const Tensors& in, std::string_view op, std::string_view name, DType dtype,
                    int rank) {
  const Tensor* t = find_tensor(in, name);
  require(t != nullptr, op, name, "missing input");
  require(t->dtype() == dtype, op, name,
          fmt::format("dtype {} (expected {})", dtype_safetensors_name(t->dtype()),
                      dtype_safetensors_name(dtype)));
  require(rank < 0 || t->dim() == rank, op, name,
          fmt::format("shape {} (expected rank {})", shape_string(t->shape()), rank));
  return *t;
}

OpWork projection_work(const Tensors& in, bool backward) {
  const Tensor* h = find_tensor(in, "hidden");
  const Tensor* w = find_tensor(in, "weight");
  if (h == nullptr || w == nullptr || h->dim() < 1 || w->dim() != 2 || h->shape().back() != w->shape()[1] ||
      w->shape()[1] == 0)
    return {};
  const std::int64_t hid = w->shape()[1], v = w->shape()[0], t = h->numel() / hid;
  OpWork work;
  if (!backward) {
    work.gemms.push_back({t, v, hid});  // logits = hidden · Wᵀ
    return work;
  }
  work.gemms.push_back({t, hid, v});  // dhidden = dlogits · W
  work.gemms.push_back({v, hid, t});  // dweight = dlogitsᵀ · hidden
  return work;
}

Result<Tensors> guarded(std::string_view op, const std::function<Tensors()>& body) {
  try {
    return body();
  } catch (const OpInputError& e) {
    return e.error;
  } catch (const DeviceError& e) {
    return e.error;
  } catch (const std::logic_error& e) {
    return bad_input(std::string(op), "", e.what());
  }
}

std::vector<float> to_f32(const Tensor& t) {
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  const auto n = static_cast<std::size_t>(c.numel());
  std::vector<float> out(n);
  switch (c.dtype()) {
    case DType::kBF16: {
      const auto* p = c.data<std::uint16_t>();
      for (std::size_t i = 0; i < n; ++i) out[i] = from_bf16(bf16{p[i]});
      break;
    }
    case DType::kF16: {
      const auto* p = c.data<std::uint16_t>();
      for (std::size_t i = 0; i < n; ++i) out[i] = from_fp16(fp16{p[i]});
      break;
    }
    case DType::kF32:
      std::copy_n(c.data<float>(), n, out.data());
      break;
    default:
      throw std::logic_error("to_f32: not a float tensor");
  }
  return out;
}

Tensor f32_tensor(const Shape& shape, std::vector<float> values) {
  Tensor t(DType::kF32, shape);
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

Tensor bf16_tensor(const Shape& shape, std::span<const float> values) {
  Tensor t(DType::kBF16, shape);
  auto* p = t.data<std::uint16_t>();
  for (std::size_t i = 0; i < values.size(); ++i) p[i] = to_bf16(values[i]).bits;
  return t;
}

std::vector<std::int64_t> to_i64(const Tensor& t) {
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  const auto n = static_cast<std::size_t>(c.numel());
  std::vector<std::int64_t> out(n);
  if (c.dtype() == DType::kI64) {
    std::copy_n(c.data<std::int64_t>(), n, out.data());
  } else if (c.dtype() == DType::kI32) {
    std::copy_n(c.data<std::int32_t>(), n, out.data());
  } else {
    throw std::logic_error("to_i64: not an integer tensor");
  }
  return out;
}

void parallel_for(std::int64_t n, unsigned threads,
                  const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (n <= 0) return;
  unsigned t = threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  t = static_cast<unsigned>(std::min<std::int64_t>(t, n));
  if (t <= 1) {
    body(0, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(t);
  const std::int64_t block = (n + t - 1) / t;
  for (unsigned w = 0; w < t; ++w) {
    const std::int64_t b = w * block, e = std::min(n, b + block);
    if (b < e) pool.emplace_back(body, b, e);
  }
  for (auto& th : pool) th.join();
}

float chunked_sum_squares(const float* x, std::int64_t n) {
  constexpr std::int64_t kChunk = 32;
  float total = 0.0f;
  for (std::int64_t c = 0; c < n; c += kChunk) {
    float part = 0.0f;
    const std::int64_t end = std::min(n, c + kChunk);
    // std::fma: the fused multiply-add a GPU kernel's accumulation compiles to, so cpu_bf16
    // and cuda_bf16 can agree bit for bit.
    for (std::int64_t i = c; i < end; ++i) part = std::fma(x[i], x[i], part);
    total += part;
  }
  return total;
}

}  // namespace ws1::ops

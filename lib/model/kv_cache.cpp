// The KV cache of rollout decode: per layer and kv head, the bf16 bits of every position's key
// (after qk_norm and rope) and value, appended in position order and handed to attention as
// [1, Hkv, Skv, D]. The bits stored are the bits attention reads: nothing is rounded again.
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "ws1/model.hpp"

namespace ws1 {

KvCache::KvCache(std::int64_t layers, std::int64_t kv_heads, std::int64_t head_dim)
    : kv_heads_(kv_heads), head_dim_(head_dim) {
  const auto per_layer = std::vector<std::vector<std::uint16_t>>(static_cast<std::size_t>(kv_heads));
  k_.assign(static_cast<std::size_t>(layers), per_layer);
  v_.assign(static_cast<std::size_t>(layers), per_layer);
}

namespace {

// Rows [n, Hkv, D] of `t` appended head by head.
void append_rows(std::vector<std::vector<std::uint16_t>>& heads, const Tensor& t,
                 std::int64_t kv_heads, std::int64_t head_dim) {
  if (t.dtype() != DType::kBF16 || t.dim() != 3 || t.shape()[1] != kv_heads || t.shape()[2] != head_dim)
    throw std::logic_error(fmt::format("KvCache::append: {} {} (expected bf16 [n, {}, {}])",
                                       dtype_safetensors_name(t.dtype()), shape_string(t.shape()),
                                       kv_heads, head_dim));
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  const auto* bits = c.data<std::uint16_t>();
  const std::int64_t n = t.shape()[0];
  for (std::int64_t h = 0; h < kv_heads; ++h) {
    auto& dst = heads[static_cast<std::size_t>(h)];
    for (std::int64_t s = 0; s < n; ++s) {
      const std::uint16_t* row = bits + (s * kv_heads + h) * head_dim;
      dst.insert(dst.end(), row, row + head_dim);
    }
  }
}

}  // namespace

void KvCache::append(std::int64_t layer, const Tensor& k, const Tensor& v) {
  const auto l = static_cast<std::size_t>(layer);
  append_rows(k_.at(l), k, kv_heads_, head_dim_);
  append_rows(v_.at(l), v, kv_heads_, head_dim_);
}

void KvCache::commit(std::int64_t n) { length_ += n; }

Tensor KvCache::gather(const std::vector<std::vector<std::uint16_t>>& heads, std::int64_t count) const {
  Tensor out(DType::kBF16, {1, kv_heads_, count, head_dim_});
  auto* dst = out.data<std::uint16_t>();
  const std::int64_t row = count * head_dim_;
  for (std::int64_t h = 0; h < kv_heads_; ++h) {
    const auto& src = heads[static_cast<std::size_t>(h)];
    if (static_cast<std::int64_t>(src.size()) < row)
      throw std::logic_error(fmt::format("KvCache: {} positions asked, {} stored", count,
                                         static_cast<std::int64_t>(src.size()) / head_dim_));
    std::copy_n(src.begin(), row, dst + h * row);
  }
  return out;
}

Tensor KvCache::keys(std::int64_t layer, std::int64_t count) const {
  return gather(k_.at(static_cast<std::size_t>(layer)), count);
}

Tensor KvCache::values(std::int64_t layer, std::int64_t count) const {
  return gather(v_.at(static_cast<std::size_t>(layer)), count);
}

}  // namespace ws1

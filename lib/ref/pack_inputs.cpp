// pack's input reading and segments (pack_inputs.hpp).
#include "pack_inputs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace ws1::ref {

Tensor PackInputs::cu_seqlens_tensor() const {
  Tensor cu(DType::kI64, {static_cast<std::int64_t>(cu_seqlens.size())});
  std::copy(cu_seqlens.begin(), cu_seqlens.end(), cu.data<std::int64_t>());
  return cu;
}

PackInputs read_pack_inputs(const Call& call) {
  PackInputs p;
  p.x_shape = call.tensor("x", DType::kBF16).shape();
  const Tensor& mt = call.tensor("mask", DType::kBool);
  const Shape& ms = mt.shape();
  call.expect(ms.size() == 1 || ms.size() == 2, "mask",
              fmt::format("shape {}, expected [B, S] or [T]", shape_text(ms)));
  const std::size_t lead = ms.size();
  call.expect(p.x_shape.size() >= lead && std::equal(ms.begin(), ms.end(), p.x_shape.begin()), "mask",
              fmt::format("shape {} is not x's leading dimensions ({})", shape_text(ms), shape_text(p.x_shape)));
  const Shape tail(p.x_shape.begin() + static_cast<std::ptrdiff_t>(lead), p.x_shape.end());
  p.width = 1;
  for (std::int64_t n : tail) p.width *= n;
  const Tensor mask = mt.is_contiguous() ? mt : mt.contiguous();
  const auto* bytes = mask.data<std::uint8_t>();
  const std::int64_t seqs = lead == 2 ? ms[0] : 1, len = ms.back();
  p.cu_seqlens.push_back(0);
  for (std::int64_t b = 0; b < seqs; ++b) {
    for (std::int64_t s = 0; s < len; ++s) {
      const std::int64_t k = b * len + s;
      call.expect(bytes[k] <= 1, "mask", fmt::format("element {} is the byte {}, not a bool (0 or 1)", k, bytes[k]));
      if (bytes[k] == 1) p.active.push_back(k);
    }
    p.cu_seqlens.push_back(static_cast<std::int64_t>(p.active.size()));
  }
  p.packed_shape = {static_cast<std::int64_t>(p.active.size())};
  p.packed_shape.insert(p.packed_shape.end(), tail.begin(), tail.end());
  return p;
}

const Tensor& read_pack_dy(const Call& call, const PackInputs& p) {
  const Tensor& dy = call.tensor("dy.packed", DType::kBF16);
  call.expect(dy.shape() == p.packed_shape, "dy.packed",
              fmt::format("shape {}, expected {} (the active rows of x)", shape_text(dy.shape()),
                          shape_text(p.packed_shape)));
  return dy;
}

}  // namespace ws1::ref

#include "attention_inputs.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string_view>

namespace ws1::ref {
namespace {

constexpr std::string_view kQ = "q", kK = "k", kV = "v", kMask = "key_mask", kDy = "dy.o";

const Tensor& head_major(const Call& call, std::string_view name) {
  const Tensor& t = call.tensor(name, DType::kBF16);
  call.expect(t.dim() != 3, name,
              fmt::format("shape {} is the token-major layout [T, H, D]; the attention reference takes "
                          "head-major [B, H, S, D] (the runner lays each sample's tokens out so)",
                          shape_text(t.shape())));
  call.expect(t.dim() == 4, name, fmt::format("shape {}, expected rank 4 ([B, H, S, D])", shape_text(t.shape())));
  return t;
}

}  // namespace

AttentionInputs read_attention_inputs(const Call& call, bool backward) {
  AttentionInputs x;
  const Tensor& qt = head_major(call, kQ);
  const Tensor& kt = head_major(call, kK);
  const Tensor& vt = head_major(call, kV);
  AttentionDims& n = x.n;
  n.b = qt.shape()[0];
  n.hq = qt.shape()[1];
  n.sq = qt.shape()[2];
  n.d = qt.shape()[3];
  n.hkv = kt.shape()[1];
  n.skv = kt.shape()[2];
  x.q_shape = qt.shape();
  x.kv_shape = kt.shape();
  call.expect(n.d >= 1, kQ, fmt::format("shape {}: the head dimension D must be at least 1", shape_text(qt.shape())));
  call.expect(vt.shape() == kt.shape(), kV,
              fmt::format("shape {}, expected the shape of k {}", shape_text(vt.shape()), shape_text(kt.shape())));
  call.expect(kt.shape()[0] == n.b && kt.shape()[3] == n.d, kK,
              fmt::format("shape {} does not match q {} in batch and head dimension", shape_text(kt.shape()),
                          shape_text(qt.shape())));
  call.expect(n.hq >= 1 && n.hkv >= 1 && n.hq % n.hkv == 0, kK,
              fmt::format("{} kv heads cannot serve {} query heads (need a positive divisor)", n.hkv, n.hq));
  x.valid.assign(static_cast<std::size_t>(n.b * n.skv), 1);
  if (call.has(kMask)) {
    const Tensor& given = call.tensor(kMask, DType::kBool);
    call.expect(given.shape() == Shape{n.b, n.skv}, kMask,
                fmt::format("shape {}, expected [B, Skv] = [{}, {}]", shape_text(given.shape()), n.b, n.skv));
    const Tensor m = given.is_contiguous() ? given : given.contiguous();
    const auto* bytes = m.data<std::uint8_t>();
    for (std::size_t i = 0; i < x.valid.size(); ++i) {
      call.expect(bytes[i] <= 1, kMask, fmt::format("element {} is byte {}; a bool must be 0 or 1", i, bytes[i]));
      x.valid[i] = bytes[i];
    }
  }
  if (backward) {
    const Tensor& dt = call.tensor(kDy, DType::kBF16);
    call.expect(dt.shape() == qt.shape(), kDy,
                fmt::format("shape {}, expected the shape of q {}", shape_text(dt.shape()), shape_text(qt.shape())));
    x.dy = call.floats(kDy);
  }
  x.q = call.floats(kQ);
  x.k = call.floats(kK);
  x.v = call.floats(kV);
  x.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(n.d)));
  return x;
}

}  // namespace ws1::ref

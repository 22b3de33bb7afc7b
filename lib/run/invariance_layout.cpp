// Gather a call's inputs from the logical token order and restore its outputs to it.
#include "invariance_layout.hpp"

#include <fmt/format.h>

#include <cstring>

namespace ws1::invariance {
namespace {

std::size_t row_bytes(const Tensor& t) {
  return t.shape().empty() || t.shape()[0] == 0
             ? 0
             : t.nbytes() / static_cast<std::size_t>(t.shape()[0]);
}

// Rows of `src` (contiguous, one per token) at `slots`; pad slots hold `pad` (an integer value
// for integer tensors, else zero bytes).
Tensor gather_rows(const Tensor& src, const std::vector<std::int64_t>& slots,
                   std::optional<std::int64_t> pad) {
  Shape shape = src.shape();
  shape[0] = static_cast<std::int64_t>(slots.size());
  Tensor out(src.dtype(), shape);
  const std::size_t rb = row_bytes(src);
  const std::byte* from = src.data<std::byte>();
  std::byte* to = out.data<std::byte>();
  for (std::size_t i = 0; i < slots.size(); ++i) {
    std::byte* dst = to + i * rb;
    if (slots[i] != kPadSlot) {
      std::memcpy(dst, from + static_cast<std::size_t>(slots[i]) * rb, rb);
    } else if (pad && src.dtype() == DType::kI64) {
      for (std::size_t e = 0; e < rb / sizeof(std::int64_t); ++e)
        std::memcpy(dst + e * sizeof(std::int64_t), &*pad, sizeof(std::int64_t));
    }  // else: the zero fill of the new tensor (0.0, false, position 0)
  }
  return out;
}

// The same values as a non-contiguous view: every row of a rank >= 2 tensor padded by a few
// elements (rows not adjacent, as slices of a fused projection's output), a vector at stride 2.
Tensor strided_view(const Tensor& t) {
  if (t.dim() == 0 || t.numel() == 0) return t;
  const Tensor c = t.contiguous();
  const std::size_t es = dtype_size(t.dtype());
  if (t.dim() == 1) {
    Tensor buf(t.dtype(), {t.shape()[0], 2});
    for (std::int64_t i = 0; i < t.shape()[0]; ++i)
      std::memcpy(buf.data<std::byte>() + static_cast<std::size_t>(2 * i) * es,
                  c.data<std::byte>() + static_cast<std::size_t>(i) * es, es);
    return buf.select(1, 0);
  }
  constexpr std::int64_t kRowPad = 3;
  Shape wide = t.shape();
  const std::int64_t last = wide.back();
  wide.back() += kRowPad;
  Tensor buf(t.dtype(), wide);
  const std::int64_t rows = t.numel() / last;
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(buf.data<std::byte>() + static_cast<std::size_t>(r * (last + kRowPad)) * es,
                c.data<std::byte>() + static_cast<std::size_t>(r * last) * es,
                static_cast<std::size_t>(last) * es);
  return buf.slice(static_cast<int>(wide.size()) - 1, 0, last);
}

}  // namespace

bool OpLayout::key_side(const std::string& name) const {
  return layout == TokenLayout::kAttentionGrid &&
         (name == "k" || name == "v" || name == "dk" || name == "dv");
}

Axis OpLayout::axis_of_result(const std::string& name, const Tensor& t, std::int64_t call_rows,
                              std::int64_t call_active) const {
  if (name.size() > 1 && name[0] == 'd') {
    auto it = inputs.find(name.substr(1));
    if (it != inputs.end()) return it->second;
  }
  if (!dtype_is_float(t.dtype()) || t.dim() == 0) return Axis::kOther;
  if (layout == TokenLayout::kAttentionGrid) return Axis::kToken;
  if (t.shape()[0] == call_rows) return Axis::kToken;
  if (t.shape()[0] == call_active) return Axis::kActive;
  return Axis::kOther;
}

OpLayout op_layout(const Op& op, const FixtureSpec& spec, const LogicalTokens& tokens,
                   std::int64_t pad_token_id) {
  OpLayout l;
  l.layout = op.token_layout();
  l.pad_token_id = pad_token_id;
  for (const TensorSpec& t : spec.tensors) {
    Axis a = Axis::kOther;
    if (t.role == TensorRole::kParameter) a = Axis::kWhole;
    else if (!t.shape.empty() && t.shape[0] == tokens.count()) a = Axis::kToken;
    else if (t.role == TensorRole::kGradSeed && !t.shape.empty() && t.shape[0] == tokens.active_count())
      a = Axis::kActive;
    l.inputs[t.name] = a;
  }
  return l;
}

std::vector<std::int64_t> active_slots(const LogicalTokens& tokens, const Call& call) {
  std::vector<std::int64_t> v;
  for (std::int64_t s : call.q)
    if (s != kPadSlot && tokens.active[static_cast<std::size_t>(s)]) v.push_back(s);
  return v;
}

Tensors call_inputs(const OpLayout& layout, const Tensors& canonical, const LogicalTokens& tokens,
                    const Call& call, bool strided) {
  const bool grid = layout.layout == TokenLayout::kAttentionGrid;
  Tensors out;
  for (const NamedTensor& nt : canonical) {
    const auto it = layout.inputs.find(nt.name);
    const Axis axis = it == layout.inputs.end() ? Axis::kOther : it->second;
    // Whole tensors (weights, up to V x H) are shared, never copied per call.
    const Tensor src =
        axis == Axis::kWhole || nt.tensor.is_contiguous() ? nt.tensor : nt.tensor.contiguous();
    Tensor t;
    if (axis == Axis::kToken) {
      const bool kv = layout.key_side(nt.name);
      std::optional<std::int64_t> pad;
      if (nt.name == "ids" || nt.name == "targets") pad = layout.pad_token_id;
      t = gather_rows(src, kv ? call.kv : call.q, pad);
      if (grid) {  // [B*S, H, D] -> [B, H, S, D]: a transposed view, as q comes out of a projection
        const std::int64_t len = kv ? call.kv_len : call.q_len;
        Shape s = t.shape();
        s[0] = len;
        s.insert(s.begin(), call.batch);
        t = t.view(s).transpose(1, 2);
        if (!strided) t = t.contiguous();
      }
    } else if (axis == Axis::kActive) {
      std::vector<std::int64_t> rows;
      for (std::int64_t s : active_slots(tokens, call))
        rows.push_back(tokens.active_index[static_cast<std::size_t>(s)]);
      t = gather_rows(src, rows, std::nullopt);
    } else {
      t = nt.tensor;
    }
    if (strided && !grid) t = strided_view(t);
    out.push_back({nt.name, std::move(t)});
  }
  if (grid) {
    Tensor mask(DType::kBool, {call.batch, call.kv_len});
    for (std::size_t i = 0; i < call.kv.size(); ++i)
      mask.data<std::uint8_t>()[i] = call.kv[i] != kPadSlot ? 1 : 0;
    out.push_back({"key_mask", std::move(mask)});
  }
  return out;
}

std::optional<std::string> LogicalResult::add(const OpLayout& layout, const std::string& name,
                                              Axis axis, const Tensor& t,
                                              const LogicalTokens& tokens, const Call& call) {
  const bool grid = layout.layout == TokenLayout::kAttentionGrid && axis == Axis::kToken;
  const bool kv = layout.key_side(name);
  const std::vector<std::int64_t>& slots = kv ? call.kv : call.q;
  const std::int64_t len = kv ? call.kv_len : call.q_len;
  std::vector<std::int64_t> rows;  // token per row of t (grid: per slot)
  if (axis == Axis::kActive) rows = active_slots(tokens, call);
  else rows = slots;

  if (grid) {
    if (t.dim() != 4 || t.shape()[0] != call.batch || t.shape()[2] != len)
      return fmt::format("{} has shape {}, not [{}, H, {}, D] for this call", name,
                         shape_string(t.shape()), call.batch, len);
  } else if (t.dim() < 1 || t.shape()[0] != static_cast<std::int64_t>(rows.size())) {
    return fmt::format("{} has shape {}; this call has {} rows", name, shape_string(t.shape()),
                       rows.size());
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::int64_t tok = rows[i];
    if (tok == kPadSlot || !tokens.active[static_cast<std::size_t>(tok)]) continue;
    const auto idx = static_cast<std::int64_t>(i);
    const Tensor sub =
        (grid ? t.select(0, idx / len).select(1, idx % len) : t.select(0, idx)).contiguous();
    auto [it, fresh] = entries_.try_emplace(name);
    Entry& e = it->second;
    if (fresh) {
      Shape s = sub.shape();
      s.insert(s.begin(), tokens.active_count());
      e.data = Tensor(sub.dtype(), s);
      e.seen.assign(static_cast<std::size_t>(tokens.active_count()), 0);
      order_.push_back(name);
    }
    Shape row_shape(e.data.shape().begin() + 1, e.data.shape().end());
    if (sub.dtype() != e.data.dtype() || sub.shape() != row_shape)
      return fmt::format("{}: a token row is {} {} in one call and {} {} in another", name,
                         dtype_contract_name(sub.dtype()), shape_string(sub.shape()),
                         dtype_contract_name(e.data.dtype()), shape_string(row_shape));
    const std::int64_t a = tokens.active_index[static_cast<std::size_t>(tok)];
    if (++e.seen[static_cast<std::size_t>(a)] > 1)
      return fmt::format("{}: active token {} came back from two calls", name, a);
    const std::size_t rb = sub.nbytes();
    std::memcpy(e.data.data<std::byte>() + static_cast<std::size_t>(a) * rb,
                sub.data<std::byte>(), rb);
  }
  return std::nullopt;
}

std::optional<std::string> LogicalResult::finish(std::vector<NamedTensor>& out) const {
  for (const std::string& name : order_) {
    const Entry& e = entries_.at(name);
    for (std::size_t a = 0; a < e.seen.size(); ++a)
      if (e.seen[a] != 1) return fmt::format("{}: active token {} never came back", name, a);
    out.push_back({name, e.data});
  }
  return std::nullopt;
}

}  // namespace ws1::invariance

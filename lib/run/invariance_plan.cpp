// Invariance configurations as calls over token slots. Row-wise ops see packed rows (a padded
// grid is flattened to batch x len rows); attention sees [batch, len] grids with a key mask,
// and its chunked prefill queries one chunk against the sample's key prefix.
#include "invariance_plan.hpp"

#include <algorithm>
#include <numeric>

namespace ws1::invariance {

std::int64_t LogicalTokens::active_count() const {
  return std::count(active.begin(), active.end(), true);
}

LogicalTokens logical_tokens(const Manifest& m) {
  LogicalTokens t;
  std::int64_t next_active = 0;
  for (const std::string& sid : m.sample_ids) {
    const Sample* s = m.sample(sid);
    t.sample_start.push_back(t.count());
    t.sample_len.push_back(s->seq_len);
    for (std::int64_t p = 0; p < s->seq_len; ++p) {
      const bool act = p >= s->prompt_len;
      t.active.push_back(act);
      t.active_index.push_back(act ? next_active++ : -1);
    }
  }
  return t;
}

namespace {

enum class Pad { kRight, kLeft };

// Tokens [begin, end) of sample s.
std::vector<std::int64_t> span_of(const LogicalTokens& t, std::size_t s, std::int64_t begin,
                                  std::int64_t end) {
  std::vector<std::int64_t> v(static_cast<std::size_t>(end - begin));
  std::iota(v.begin(), v.end(), t.sample_start[s] + begin);
  return v;
}

// One sequence per sample of `order`, padded to `len` on `pad`'s side.
Call grid(const LogicalTokens& t, const std::vector<std::size_t>& order, std::int64_t len, Pad pad) {
  Call c;
  c.batch = static_cast<std::int64_t>(order.size());
  c.q_len = c.kv_len = len;
  for (std::size_t s : order) {
    std::vector<std::int64_t> row(static_cast<std::size_t>(len), kPadSlot);
    const std::int64_t n = t.sample_len[s];
    const std::int64_t first = pad == Pad::kRight ? 0 : len - n;
    for (std::int64_t p = 0; p < n; ++p) row[static_cast<std::size_t>(first + p)] = t.sample_start[s] + p;
    c.q.insert(c.q.end(), row.begin(), row.end());
  }
  c.kv = c.q;
  return c;
}

// Row-wise ops take the grid as rows; a grid without pads is the packed call.
Call packed(const LogicalTokens& t, const std::vector<std::size_t>& order) {
  Call c;
  for (std::size_t s : order) {
    auto v = span_of(t, s, 0, t.sample_len[s]);
    c.q.insert(c.q.end(), v.begin(), v.end());
  }
  c.q_len = static_cast<std::int64_t>(c.q.size());
  c.kv = c.q;
  c.kv_len = c.q_len;
  return c;
}

Call single(const LogicalTokens& t, std::size_t s, std::int64_t begin, std::int64_t end,
            bool prefix_keys) {
  Call c;
  c.q = span_of(t, s, begin, end);
  c.q_len = end - begin;
  c.kv = prefix_keys ? span_of(t, s, 0, end) : c.q;
  c.kv_len = static_cast<std::int64_t>(c.kv.size());
  return c;
}

}  // namespace

Plan make_plan(const Manifest& m, const LogicalTokens& t, std::optional<Transform> tr,
               TokenLayout layout) {
  const bool attention = layout == TokenLayout::kAttentionGrid;
  const std::size_t n = t.sample_len.size();
  std::vector<std::size_t> in_order(n);
  std::iota(in_order.begin(), in_order.end(), std::size_t{0});
  const std::int64_t longest = n == 0 ? 0 : *std::max_element(t.sample_len.begin(), t.sample_len.end());
  // The whole batch in one call: packed rows, or attention's right-padded grid.
  auto batch = [&](const std::vector<std::size_t>& order) {
    return attention ? grid(t, order, longest, Pad::kRight) : packed(t, order);
  };

  Plan plan;
  // repeat: the canonical plan itself, made again (the runner never reuses the canonical results
  // for it).
  if (!tr || *tr == Transform::kLayout || tp_ranks(*tr) > 0 || *tr == Transform::kRepeat) {
    plan.calls.push_back(batch(in_order));
    plan.strided = tr == Transform::kLayout;
    plan.k_ranks = tr ? tp_ranks(*tr) : 0;
    return plan;
  }
  switch (*tr) {
    case Transform::kBnChunked:
    case Transform::kB1Chunked:
      // Row-wise ops: the spans s0 [7, 4], s1 [7, 7, 2], ...; attention: a real chunked
      // prefill (each chunk's queries against the sample's keys up to the chunk's end).
      // Both configurations make the same calls, as upstream's (NOTES §d).
      for (std::size_t s = 0; s < n; ++s)
        for (std::int64_t b = 0; b < t.sample_len[s]; b += m.chunk_size)
          plan.calls.push_back(single(t, s, b, std::min(b + m.chunk_size, t.sample_len[s]), attention));
      break;
    case Transform::kB1Full:
      for (std::size_t s = 0; s < n; ++s) plan.calls.push_back(single(t, s, 0, t.sample_len[s], false));
      break;
    case Transform::kBnPermuted: {
      std::vector<std::size_t> order;
      for (std::int64_t i : m.batch_permutation) order.push_back(static_cast<std::size_t>(i));
      plan.calls.push_back(batch(order));
      break;
    }
    case Transform::kBnPaddedRight:
    case Transform::kBnPaddedLeft: {
      Call c = grid(t, in_order, m.padded_len,
                    *tr == Transform::kBnPaddedRight ? Pad::kRight : Pad::kLeft);
      if (!attention) {  // one call of batch x padded_len rows
        c.q_len = c.kv_len = c.batch * c.q_len;
        c.batch = 1;
      }
      plan.calls.push_back(std::move(c));
      break;
    }
    case Transform::kLayout:
    case Transform::kTp2:
    case Transform::kTp4:
    case Transform::kTp8:
    case Transform::kRepeat:
      break;  // handled above
  }
  return plan;
}

}  // namespace ws1::invariance

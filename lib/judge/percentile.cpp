#include "percentile.hpp"

#include <algorithm>
#include <bit>

namespace ws1::judge_detail {

constexpr std::size_t kBuckets = 1u << 16;

RankSelector::RankSelector() : hist_(kBuckets, 0) {}

void RankSelector::add_counts(const RankSelector& o) {
  for (std::size_t b = 0; b < kBuckets; ++b) hist_[b] += o.hist_[b];
  zeros_ += o.zeros_;
}

// Both ranks in one bucket: target 0's counts serve both.
void RankSelector::keep_in_bucket(float v, std::uint32_t b) {
  Target& t = b == target_[0].bucket ? target_[0] : target_[1];
  ++t.low[std::bit_cast<std::uint32_t>(v) & 0xffffu];
}

void RankSelector::take_kept(const RankSelector& o) {
  for (std::size_t i = 0; i < target_.size(); ++i)
    for (std::size_t j = 0; j < target_[i].low.size(); ++j) target_[i].low[j] += o.target_[i].low[j];
}

void RankSelector::plan() {
  std::int64_t n = zeros_;
  for (std::int64_t h : hist_) n += h;
  target_[0].rank = ws1::nearest_rank_index(n, 99, 100);
  target_[1].rank = ws1::nearest_rank_index(n, 999, 1000);
  for (Target& t : target_) {
    // The counted zeros sit in bucket 0, below every streamed value of that bucket.
    std::int64_t before = 0;
    std::uint32_t b = 0;
    for (; b + 1 < kBuckets; ++b) {
      const std::int64_t in = hist_[b] + (b == 0 ? zeros_ : 0);
      if (before + in > t.rank) break;
      before += in;
    }
    t.bucket = b;
    t.before = before;
  }
  target_[0].low.assign(kBuckets, 0);
  target_[1].low.assign(target_[1].bucket == target_[0].bucket ? 0 : kBuckets, 0);
}

Percentiles RankSelector::result() {
  std::array<float, 2> out{};
  for (std::size_t i = 0; i < 2; ++i) {
    const Target& t = target_[i];
    const std::vector<std::int64_t>& low = t.bucket == target_[0].bucket ? target_[0].low : t.low;
    std::int64_t q = t.rank - t.before;  // rank inside the bucket
    if (t.bucket == 0) {
      if (q < zeros_) continue;  // a counted zero: 0
      q -= zeros_;
    }
    std::uint32_t l = 0;
    for (; l + 1 < kBuckets; ++l) {
      if (q < low[l]) break;
      q -= low[l];
    }
    out[i] = std::bit_cast<float>(t.bucket << 16 | l);
  }
  return {out[0], out[1]};
}

}  // namespace ws1::judge_detail

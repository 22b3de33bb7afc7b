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

void RankSelector::keep_in_bucket(float v, std::uint32_t b) {
  if (b == target_[0].bucket) target_[0].kept.push_back(v);
  if (b == target_[1].bucket && target_[1].bucket != target_[0].bucket) target_[1].kept.push_back(v);
}

void RankSelector::take_kept(RankSelector& o) {
  for (std::size_t i = 0; i < target_.size(); ++i)
    target_[i].kept.insert(target_[i].kept.end(), o.target_[i].kept.begin(), o.target_[i].kept.end());
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
}

Percentiles RankSelector::result() {
  std::array<float, 2> out{};
  for (std::size_t i = 0; i < 2; ++i) {
    Target& t = target_[i];
    std::vector<float>& kept = t.bucket == target_[0].bucket ? target_[0].kept : t.kept;
    std::int64_t q = t.rank - t.before;  // rank inside the bucket
    if (t.bucket == 0) {
      if (q < zeros_) continue;  // a counted zero: 0
      q -= zeros_;
    }
    std::nth_element(kept.begin(), kept.begin() + q, kept.end());
    out[i] = kept[static_cast<std::size_t>(q)];
  }
  return {out[0], out[1]};
}

}  // namespace ws1::judge_detail

// Nearest-rank percentiles (the rank definition the judges document in ws1/judge.hpp).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "ws1/accuracy_parts.hpp"  // nearest_rank_index

namespace ws1::judge_detail {

struct Percentiles {
  float p99 = 0, p999 = 0;
};

// P99 and P99.9, exactly, over a stream of non-negative floats read twice, without keeping it: the
// judged tensors reach V x H (6e8 elements). Pass 1 counts the values per bucket of their top
// 16 bits (a non-negative float's bits order like its value); pass 2 counts the values of the
// buckets that hold the two ranks by their low 16 bits, which picks each rank's value exactly
// in O(1) memory (keeping those values instead held gigabytes where errors repeat, as ulp
// errors do: one bucket is every element 1 ulp off). Elements whose candidate equals the
// reference bit for bit are counted as zeros, not streamed.
class RankSelector {
 public:
  RankSelector();
  void count(float v) { ++hist_[bucket(v)]; }  // pass 1
  void count_zeros(std::int64_t n) { zeros_ += n; }
  void add_counts(const RankSelector& o);       // another worker's pass 1
  void take_kept(const RankSelector& o);         // another worker's pass 2 (planned as this)
  void plan();                                  // between the passes
  void keep(float v) {                          // pass 2: the values of pass 1 again
    // Inline test, out-of-line store: nearly every value lies outside both buckets.
    const std::uint32_t b = bucket(v);
    if (b == target_[0].bucket || b == target_[1].bucket) keep_in_bucket(v, b);
  }
  Percentiles result();  // total count must not be 0

 private:
  void keep_in_bucket(float v, std::uint32_t b);  // b: a target's bucket
  // A non-negative float's top 16 bits (inline: called three times per judged element).
  static std::uint32_t bucket(float v) { return std::bit_cast<std::uint32_t>(v) >> 16; }
  struct Target {
    std::int64_t rank = 0;          // 0-based among all values (zeros included)
    std::uint32_t bucket = 0;
    std::int64_t before = 0;        // values in lower buckets (zeros included)
    std::vector<std::int64_t> low;  // pass 2: the bucket's values by their low 16 bits
  };
  std::vector<std::int64_t> hist_;
  std::int64_t zeros_ = 0;
  std::array<Target, 2> target_;  // P99, P99.9
};

}  // namespace ws1::judge_detail

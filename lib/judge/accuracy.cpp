// The accuracy comparator of spec §4.1 and its error statistics (definitions in ws1/judge.hpp).
//
// Pass 1 decides every element and gathers counts, the leaf sums of the summation tree
// (ws1/accuracy_parts.hpp: one kSumBlock buffer per worker), maxima, the worst element and a
// histogram of each statistic; pass 2 recomputes the statistics and keeps only the values in
// the histogram buckets that hold P99 and P99.9 (percentile.hpp), so no per-element buffer is
// kept. Both passes run over fixed chunks of the flat range on a few threads; the per-chunk
// results are merged in chunk order, so every output bit is independent of the thread count.
// A non-contiguous view is first copied into a contiguous tensor. A pair held on a device goes
// to the device judge instead (the same record; accuracy_parts.hpp), where one is installed.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include "elements.hpp"
#include "pair_errors.hpp"
#include "percentile.hpp"
#include "ws1/accuracy_parts.hpp"
#include "ws1/judge.hpp"

namespace ws1 {
namespace {

using judge_detail::abs_error;
using judge_detail::error_ratio;
using judge_detail::kInf;
using judge_detail::load_float;
using judge_detail::rel_error;
using judge_detail::same_finite;
using judge_detail::ulp_error;

bool candidate_dtype_ok(DType t) {
  return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32;
}

// Why the pair cannot be compared element by element, or nothing.
std::optional<std::string> incomparable(const Tensor& c, const Tensor& r, const Tolerance& tol) {
  if (!candidate_dtype_ok(c.dtype()))
    return fmt::format("candidate dtype {} is not bfloat16, float16 or float32",
                       dtype_contract_name(c.dtype()));
  if (r.dtype() != DType::kF32)
    return fmt::format(
        "reference dtype {} is not float32 (spec §3.1: the reference is computed and kept in "
        "FP32)",
        dtype_contract_name(r.dtype()));
  if (c.shape() != r.shape())
    return fmt::format("candidate shape {} differs from the reference shape {}",
                       shape_string(c.shape()), shape_string(r.shape()));
  if (!(tol.atol >= 0 && tol.rtol >= 0) || std::isinf(tol.atol) || std::isinf(tol.rtol))
    return fmt::format("tolerance atol {} rtol {} is not finite and non-negative", tol.atol,
                       tol.rtol);
  return std::nullopt;
}

ErrorStats nan_stats() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {nan, nan, nan, nan};
}

// ---- the two passes, over fixed chunks ----------------------------------------------------

// Elements per chunk: fixed, and a whole number of summation blocks, so the chunks' block sums
// are the tree's leaves in order whatever the number of workers.
constexpr std::int64_t kChunk = std::int64_t{1} << 22;
static_assert(kChunk % kSumBlock == 0);

// What pass 1 learns from one chunk.
struct Partial {
  std::int64_t nan_elements = 0, violations = 0, candidate_nans = 0, reference_nans = 0;
  std::int64_t infinite = 0;
  std::vector<double> abs_blocks, rel_blocks, ulp_blocks;  // the chunk's block sums, in order
  double abs_max = 0, rel_max = 0, ulp_max = 0;
  std::int64_t signed_ulp_sum = 0;  // exact: the order does not matter
  float reference_max_abs = 0;
  SignCounts signs;  // exact counts, as the sum
  std::int64_t worst_flat = -1;
  WorstElement worst;

  // The worst element is the first, in row-major order, of the largest (ratio, violates).
  bool outranks(double ratio, bool violates) const {
    return worst_flat < 0 || ratio > worst.margin ||
           (ratio == worst.margin && violates && !worst.violates);
  }
  // `p` is the next chunk in row-major order.
  void merge(const Partial& p) {
    nan_elements += p.nan_elements;
    violations += p.violations;
    candidate_nans += p.candidate_nans;
    reference_nans += p.reference_nans;
    infinite += p.infinite;
    abs_blocks.insert(abs_blocks.end(), p.abs_blocks.begin(), p.abs_blocks.end());
    rel_blocks.insert(rel_blocks.end(), p.rel_blocks.begin(), p.rel_blocks.end());
    ulp_blocks.insert(ulp_blocks.end(), p.ulp_blocks.begin(), p.ulp_blocks.end());
    abs_max = std::max(abs_max, p.abs_max);
    rel_max = std::max(rel_max, p.rel_max);
    ulp_max = std::max(ulp_max, p.ulp_max);
    signed_ulp_sum += p.signed_ulp_sum;
    signs += p.signs;
    reference_max_abs = std::fmax(reference_max_abs, p.reference_max_abs);
    if (p.worst_flat >= 0 && outranks(p.worst.margin, p.worst.violates)) {
      worst_flat = p.worst_flat;
      worst = p.worst;
    }
  }
};

// P99 / P99.9 of each error, selected exactly over two passes (percentile.hpp).
struct Ranks {
  judge_detail::RankSelector abs, rel, ulp;
  void add_counts(const Ranks& o) {
    abs.add_counts(o.abs);
    rel.add_counts(o.rel);
    ulp.add_counts(o.ulp);
  }
  void plan() {
    abs.plan();
    rel.plan();
    ulp.plan();
  }
  void take_kept(const Ranks& o) {
    abs.take_kept(o.abs);
    rel.take_kept(o.rel);
    ulp.take_kept(o.ulp);
  }
};

// ---- pass 1 and pass 2 on one chunk --------------------------------------------------------
//
// Both are templates on the candidate dtype so that the element loads and the finite pair's
// errors (pair_errors.hpp) inline into the loop. A pair of finite floats, the common case, takes
// the finite form of pair_errors.hpp; a pair with a NaN or an infinity takes nonfinite_pair(),
// the general definitions. Both give the same values bit for bit (pair_errors.hpp says why) and
// feed the same running values in element order, so every sum is associated as in a plain loop
// over the chunk: results are identical to a visit of each element by the general form.

template <DType CT>
float load_candidate(const std::byte* base, std::int64_t flat) {
  if constexpr (CT == DType::kBF16) {
    std::uint16_t h = 0;  // from_bf16(), inline: the bf16 bits are the float's top half
    std::memcpy(&h, base + static_cast<std::size_t>(flat) * 2, 2);
    return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
  } else {
    return load_float(base + static_cast<std::size_t>(flat) * dtype_size(CT), CT);
  }
}

float load_reference(const std::byte* base, std::int64_t flat) {
  float f = 0;
  std::memcpy(&f, base + static_cast<std::size_t>(flat) * 4, 4);
  return f;
}

// judge_pair() of a pair with a NaN or an infinity: the general definitions.
PairJudgement nonfinite_pair(float c, float r, const Tolerance& tol, DType ct) {
  PairJudgement x;
  if (std::isnan(c) || std::isnan(r)) {
    x.nan = true;
    x.candidate_nan = std::isnan(c);
    x.reference_nan = std::isnan(r);
    x.allowed = std::isnan(r) ? r : std::isinf(r) ? kInf : tol.atol + tol.rtol * std::fabs(r);
    x.ratio = kInf;
    x.violates = true;
    return x;
  }
  x.infinite = true;
  const bool ok = within_tolerance(c, r, tol);
  x.violates = !ok;
  x.abs = abs_error(c, r);
  x.rel = rel_error(c, r);
  x.ulp = ulp_error(c, r, ct);
  x.allowed = std::isinf(r) ? kInf : tol.atol + tol.rtol * std::fabs(r);
  x.ratio = error_ratio(x.abs, x.allowed, ok);
  return x;
}

// Pass 1 on the elements [begin, end) of one chunk (whole summation blocks but for the
// tensor's last): decisions, counts, block sums, maxima and the worst element; the error
// values are counted into the worker's histograms `rk`. Each block's values go to `buf`
// (three arrays of kSumBlock) and are summed by the block tree. The running values live in
// locals rather than in a Partial so that the compiler can keep them in registers.
template <DType CT>
Partial pass1_chunk(Ranks& rk, std::vector<double>& buf, const std::byte* cbase,
                    const std::byte* rbase, std::int64_t begin, std::int64_t end,
                    const Tolerance& tol) {
  Partial p;
  std::int64_t zeros = 0, violations = 0;
  double abs_max = 0, rel_max = 0, ulp_max = 0;
  std::int64_t sulp = 0;
  SignCounts signs;
  float rmax = 0;  // std::fmax leaves a NaN reference out
  std::int64_t worst_flat = -1;
  float worst_c = 0, worst_r = 0;
  double worst_allowed = 0, worst_margin = 0;
  bool worst_violates = false;
  buf.resize(3 * kSumBlock);
  double* const va = buf.data();
  double* const vr = va + kSumBlock;
  double* const vu = vr + kSumBlock;

  const auto add_stats = [&](std::int64_t i, double a, double rel, double u) {
    va[i] = a;
    vr[i] = rel;
    vu[i] = u;
    rk.abs.count(static_cast<float>(a));
    rk.rel.count(static_cast<float>(rel));
    rk.ulp.count(static_cast<float>(u));
    abs_max = std::max(abs_max, a);
    rel_max = std::max(rel_max, rel);
    ulp_max = std::max(ulp_max, u);
  };
  const auto add_zero = [&](std::int64_t i) { va[i] = vr[i] = vu[i] = 0; };
  // Partial::outranks(): the first, in row-major order, of the largest (ratio, violates); at
  // an equal ratio a violation outranks a pass (both can read 1.0).
  const auto consider_worst = [&](std::int64_t flat, float c, float r, double allowed,
                                  double ratio, bool violates) {
    if (worst_flat < 0 || ratio > worst_margin ||
        (ratio == worst_margin && violates && !worst_violates)) {
      worst_flat = flat;
      worst_c = c;
      worst_r = r;
      worst_allowed = allowed;
      worst_margin = ratio;
      worst_violates = violates;
    }
  };

  const auto add_finite = [&](std::int64_t flat, std::int64_t i, float c, float r,
                              const judge_detail::FiniteStats& s, double allowed, bool ok) {
    add_stats(i, s.abs, s.rel, s.ulp);
    sulp += s.sulp;
    violations += ok ? 0 : 1;
    consider_worst(flat, c, r, allowed, error_ratio(s.abs, allowed, ok), !ok);
  };

  for (std::int64_t bs = begin; bs < end; bs += kSumBlock) {
    const std::int64_t be = std::min(end, bs + kSumBlock);
    std::int64_t flat = bs;
    for (;;) {
      // The common pairs, in a loop without a function call (so the running values can stay
      // in registers): equal bits, or finite with a decision the fast comparison settles. It
      // stops at the first other pair.
      for (; flat < be; ++flat) {
        const float c = load_candidate<CT>(cbase, flat);
        const float r = load_reference(rbase, flat);
        rmax = std::fmax(rmax, std::fabs(r));
        if (same_finite(c, r)) {  // every error is 0: counted as zeros; a first worst element
          ++zeros;
          count_signs(signs, c, c);  // r is a value of the candidate's dtype: q = r = c
          add_zero(flat - bs);
          if (worst_flat < 0)
            consider_worst(flat, c, r, judge_detail::finite_allowed(r, tol), 0.0, false);
          continue;
        }
        if (!std::isfinite(c) || !std::isfinite(r)) break;
        const judge_detail::FiniteStats s = judge_detail::finite_stats<CT>(c, r);
        const double allowed = judge_detail::finite_allowed(r, tol);
        const std::optional<bool> ok = judge_detail::fast_decision(s.abs, allowed);
        if (!ok) break;
        count_signs(signs, c, judge_detail::rounded_to<CT>(r));
        add_finite(flat, flat - bs, c, r, s, allowed, *ok);
      }
      if (flat == be) break;
      // A rare pair: a NaN or an infinity, or finite within the rounding band of its bound.
      const float c = load_candidate<CT>(cbase, flat);
      const float r = load_reference(rbase, flat);
      rmax = std::fmax(rmax, std::fabs(r));
      if (std::isfinite(c) && std::isfinite(r)) {
        const judge_detail::FiniteErrors e = judge_detail::finite_errors<CT>(c, r, tol);
        add_finite(flat, flat - bs, c, r, e.stats, e.allowed, e.ok);
        count_signs(signs, c, judge_detail::rounded_to<CT>(r));
      } else {
        const PairJudgement x = nonfinite_pair(c, r, tol, CT);
        if (x.nan) {
          ++p.nan_elements;
          p.candidate_nans += x.candidate_nan;
          p.reference_nans += x.reference_nan;
          add_zero(flat - bs);
        } else {
          ++p.infinite;
          add_stats(flat - bs, x.abs, x.rel, x.ulp);
        }
        violations += x.violates ? 1 : 0;
        consider_worst(flat, c, r, x.allowed, x.ratio, x.violates);
      }
      ++flat;
    }
    for (std::int64_t i = be - bs; i < kSumBlock; ++i) add_zero(i);  // the last block's padding
    p.abs_blocks.push_back(leaf_sum({va, static_cast<std::size_t>(kSumBlock)}));
    p.rel_blocks.push_back(leaf_sum({vr, static_cast<std::size_t>(kSumBlock)}));
    p.ulp_blocks.push_back(leaf_sum({vu, static_cast<std::size_t>(kSumBlock)}));
  }

  rk.abs.count_zeros(zeros);
  rk.rel.count_zeros(zeros);
  rk.ulp.count_zeros(zeros);
  p.violations = violations;
  p.abs_max = abs_max;
  p.rel_max = rel_max;
  p.ulp_max = ulp_max;
  p.signed_ulp_sum = sulp;
  p.signs = signs;
  p.reference_max_abs = rmax;
  p.worst_flat = worst_flat;
  if (worst_flat >= 0)
    p.worst = WorstElement{{}, worst_c, worst_r, worst_allowed, worst_margin, worst_violates};
  return p;
}

// Pass 2 on one chunk: the same error values as pass 1 (same functions), offered to the
// worker's selectors `rk`, which keep those in the buckets that hold the ranks.
template <DType CT>
void pass2_chunk(Ranks& rk, const std::byte* cbase, const std::byte* rbase, std::int64_t begin,
                 std::int64_t end) {
  for (std::int64_t flat = begin; flat < end; ++flat) {
    const float c = load_candidate<CT>(cbase, flat);
    const float r = load_reference(rbase, flat);
    if (same_finite(c, r)) continue;  // a counted zero
    if (std::isfinite(c) && std::isfinite(r)) {
      const judge_detail::FiniteStats s = judge_detail::finite_stats<CT>(c, r);
      rk.abs.keep(static_cast<float>(s.abs));
      rk.rel.keep(static_cast<float>(s.rel));
      rk.ulp.keep(static_cast<float>(s.ulp));
    } else if (!std::isnan(c) && !std::isnan(r)) {
      rk.abs.keep(static_cast<float>(abs_error(c, r)));
      rk.rel.keep(static_cast<float>(rel_error(c, r)));
      rk.ulp.keep(static_cast<float>(ulp_error(c, r, CT)));
    }
  }
}

// f(std::integral_constant<DType, CT>) for the candidate dtype (bf16, f16 or f32, checked by
// incomparable() before any pass).
template <class F>
decltype(auto) with_candidate_dtype(DType ct, F&& f) {
  switch (ct) {
    case DType::kBF16:
      return f(std::integral_constant<DType, DType::kBF16>{});
    case DType::kF16:
      return f(std::integral_constant<DType, DType::kF16>{});
    default:
      return f(std::integral_constant<DType, DType::kF32>{});
  }
}

unsigned worker_count(std::int64_t chunks) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::clamp<std::int64_t>(chunks, 1, hw));
}

// body(worker, chunk, begin, end) for every chunk of [0, n); chunks are taken in order from a
// shared counter, so which worker runs a chunk varies but what a chunk computes does not.
template <class F>
void for_chunks(std::int64_t n, unsigned workers, F&& body) {
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
  std::atomic<std::int64_t> next{0};
  auto run = [&](unsigned w) {
    for (std::int64_t k = next++; k < chunks; k = next++)
      body(w, k, k * kChunk, std::min(n, (k + 1) * kChunk));
  };
  if (workers <= 1) {
    run(0);
    return;
  }
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) pool.emplace_back(run, w);
  run(0);
  for (std::thread& th : pool) th.join();
}

}  // namespace

double halving_sum(std::span<double> v) {
  for (std::size_t m = v.size() / 2; m >= 1; m /= 2)
    for (std::size_t j = 0; j < m; ++j) v[j] += v[j + m];
  return v.empty() ? 0.0 : v[0];
}

double leaf_sum(std::span<double> v) {
  // Lane t accumulates v[t + 256 j] left to right, in place in v[t].
  for (std::int64_t j = 1; j < kSumBlock / kSumLanes; ++j)
    for (std::int64_t t = 0; t < kSumLanes; ++t) v[static_cast<std::size_t>(t)] += v[static_cast<std::size_t>(j * kSumLanes + t)];
  return halving_sum(v.first(static_cast<std::size_t>(kSumLanes)));
}

double sum_of_blocks(std::vector<double> block_sums) {
  if (block_sums.empty()) return 0;
  block_sums.resize(std::bit_ceil(block_sums.size()), 0.0);
  return halving_sum(block_sums);
}

PairJudgement judge_pair(float c, float r, const Tolerance& tol, DType candidate) {
  if (!std::isfinite(c) || !std::isfinite(r)) return nonfinite_pair(c, r, tol, candidate);
  return with_candidate_dtype(candidate, [&](auto dt) {
    const judge_detail::FiniteErrors e = judge_detail::finite_errors<decltype(dt)::value>(c, r, tol);
    PairJudgement x;
    x.abs = e.stats.abs;
    x.rel = e.stats.rel;
    x.ulp = e.stats.ulp;
    x.signed_ulp = e.stats.sulp;
    x.allowed = e.allowed;
    x.violates = !e.ok;
    x.ratio = error_ratio(e.stats.abs, e.allowed, e.ok);
    return x;
  });
}

std::optional<std::string> accuracy_incomparable(const Tensor& candidate, const Tensor& reference,
                                                 const Tolerance& tol) {
  return incomparable(candidate, reference, tol);
}

AccuracyTensor accuracy_record(std::string name, const Tensor& candidate, AccuracyTotals all,
                               std::string engine, const Tolerance& tol) {
  AccuracyTensor t;
  t.name = std::move(name);
  t.shape = candidate.shape();
  t.dtype = candidate.dtype();
  t.numel = candidate.numel();
  t.engine = std::move(engine);
  t.nan_elements = all.nan_elements;
  t.violations = all.violations;
  if (all.worst_flat >= 0) {
    all.worst.index = judge_detail::unravel(all.worst_flat, t.shape);
    t.worst = std::move(all.worst);
  }
  const std::int64_t measured = t.numel - t.nan_elements;  // elements in the statistics
  // The null candidates (ws1/evidence.hpp): 0 meets atol + rtol * |r| >= |r| everywhere iff it
  // does at the largest |r| (the test only tightens as |r| grows when rtol <= 1, and always
  // holds when rtol > 1).
  t.reference_max_abs = all.reference_max_abs;
  t.zeros_pass = all.reference_nans == 0 && within_tolerance(0.0f, all.reference_max_abs, tol);
  t.signs = all.signs;
  const std::int64_t finite = measured - all.infinite;
  t.bias_ulp = finite > 0 ? static_cast<double>(all.signed_ulp_sum) / static_cast<double>(finite)
                          : std::numeric_limits<double>::quiet_NaN();
  if (measured == 0) {
    if (t.numel > 0) t.abs_error = t.rel_error = t.ulp_distance = nan_stats();
  } else {
    const auto n = static_cast<double>(measured);
    // A float rounding can land just above the double max: percentiles are capped there.
    const auto fill = [n](ErrorStats& s, double sum, double max, float p99, float p999) {
      s.max = max;
      s.mean = sum / n;
      s.p99 = std::min(static_cast<double>(p99), max);
      s.p999 = std::min(static_cast<double>(p999), max);
    };
    fill(t.abs_error, all.abs_sum, all.abs_max, all.abs_p99, all.abs_p999);
    fill(t.rel_error, all.rel_sum, all.rel_max, all.rel_p99, all.rel_p999);
    fill(t.ulp_distance, all.ulp_sum, all.ulp_max, all.ulp_p99, all.ulp_p999);
  }
  if (all.infinite > 0)
    t.notes.push_back(fmt::format(
        "{} element(s) hold an infinity: the same infinity on both sides passes, any other "
        "pairing is a violation",
        all.infinite));
  if (t.nan_elements > 0)
    t.notes.insert(t.notes.begin(), fmt::format(
        "{} element(s) hold NaN (candidate {}, reference {}): a NaN never passes; each counts "
        "as a violation and none enters the error statistics",
        t.nan_elements, all.candidate_nans, all.reference_nans));
  return t;
}

namespace {
DeviceAccuracyJudge g_device_judge = nullptr;
}  // namespace

void set_device_accuracy_judge(DeviceAccuracyJudge judge) { g_device_judge = judge; }

BiasCheck judge_bias(const SignCounts& counts, double max_mean, double z) {
  BiasCheck b;
  b.counts = counts;
  b.max_mean = max_mean;
  b.z = z;
  b.passed = true;
  if (counts.finite == 0) return b;
  const auto n = static_cast<double>(counts.finite);
  // One sign: its mean, and whether |sum| <= max(max_mean * n, z * sqrt(nonzero)); the sums and
  // counts are exact integers below 2^53.
  const auto lean = [&](std::int64_t plus, std::int64_t minus, double& mean, double& bound) {
    const auto sum = static_cast<double>(plus - minus);
    const double limit = std::max(max_mean * n, z * std::sqrt(static_cast<double>(plus + minus)));
    mean = sum / n;
    bound = limit / n;
    return std::fabs(sum) <= limit;
  };
  const bool drift_ok = lean(counts.above, counts.below, b.drift, b.drift_bound);
  const bool growth_ok = lean(counts.away, counts.toward, b.growth, b.growth_bound);
  b.passed = drift_ok && growth_ok;
  return b;
}

double max_abs_error(const Tensor& candidate, const Tensor& reference) {
  judge_detail::require_defined(candidate, "max_abs_error", "candidate");
  judge_detail::require_defined(reference, "max_abs_error", "reference");
  if (auto why = incomparable(candidate, reference, Tolerance{CompareMode::kTolerance, 0, 0}))
    throw std::logic_error("ws1::max_abs_error: " + *why);
  const std::int64_t numel = candidate.numel();
  if (numel == 0) return 0;
  const Tensor cc = candidate.is_contiguous() ? candidate : candidate.contiguous();
  const Tensor rc = reference.is_contiguous() ? reference : reference.contiguous();
  const std::int64_t chunks = (numel + kChunk - 1) / kChunk;
  // Per chunk: the largest error and whether any pair was measured. A maximum does not depend
  // on the order it is taken in, so the result is the thread count's as well.
  std::vector<std::pair<double, bool>> parts(static_cast<std::size_t>(chunks), {0.0, false});
  for_chunks(numel, worker_count(chunks), [&](unsigned, std::int64_t k, std::int64_t begin, std::int64_t end) {
    parts[static_cast<std::size_t>(k)] = with_candidate_dtype(candidate.dtype(), [&](auto dt) {
      double m = 0;
      bool any = false;
      for (std::int64_t flat = begin; flat < end; ++flat) {
        const float c = load_candidate<decltype(dt)::value>(cc.raw(), flat);
        const float r = load_reference(rc.raw(), flat);
        if (std::isnan(c) || std::isnan(r)) continue;
        any = true;
        m = std::max(m, judge_detail::abs_error(c, r));
      }
      return std::pair{m, any};
    });
  });
  double m = 0;
  bool any = false;
  for (const auto& [pm, pany] : parts) {
    m = std::max(m, pm);
    any = any || pany;
  }
  return any ? m : std::numeric_limits<double>::quiet_NaN();
}

AccuracyTensor judge_accuracy(std::string name, const Tensor& candidate, const Tensor& reference,
                              const Tolerance& tol) {
  judge_detail::require_defined(candidate, "judge_accuracy", "candidate");
  judge_detail::require_defined(reference, "judge_accuracy", "reference");
  if (auto why = incomparable(candidate, reference, tol)) {
    AccuracyTensor t;
    t.name = std::move(name);
    t.shape = candidate.shape();
    t.dtype = candidate.dtype();
    t.numel = candidate.numel();
    t.comparable = false;
    t.notes.push_back(std::move(*why));
    return t;
  }
  // Both sides in device memory: the device judge, where it applies (same record, no copy).
  if (g_device_judge != nullptr && candidate.device_data() != nullptr &&
      reference.device_data() != nullptr) {
    if (std::optional<AccuracyTensor> d = g_device_judge(name, candidate, reference, tol))
      return std::move(*d);
  }
  const DType ct = candidate.dtype();
  const std::int64_t numel = candidate.numel();

  // Contiguous element arrays: the passes below split the flat range into fixed chunks.
  const Tensor cc = candidate.is_contiguous() ? candidate : candidate.contiguous();
  const Tensor rc = reference.is_contiguous() ? reference : reference.contiguous();
  const std::byte* cbase = cc.raw();
  const std::byte* rbase = rc.raw();
  const std::int64_t chunks = (numel + kChunk - 1) / kChunk;
  const unsigned workers = worker_count(chunks);

  // Pass 1: decisions, counts, block sums, maxima, worst element, per chunk; histograms and
  // block buffers per worker.
  std::vector<Partial> parts(static_cast<std::size_t>(chunks));
  std::vector<Ranks> ranks(workers);
  std::vector<std::vector<double>> bufs(workers);
  for_chunks(numel, workers, [&](unsigned w, std::int64_t k, std::int64_t begin, std::int64_t end) {
    parts[static_cast<std::size_t>(k)] = with_candidate_dtype(ct, [&](auto dt) {
      return pass1_chunk<decltype(dt)::value>(ranks[w], bufs[w], cbase, rbase, begin, end, tol);
    });
  });
  // Merged in chunk order: the block sums are the tree's leaves in order, and the worst
  // element's tie rule (the first in row-major order) does not depend on the workers.
  Partial all;
  for (const Partial& p : parts) all.merge(p);
  Ranks merged;
  for (const Ranks& rk : ranks) merged.add_counts(rk);

  AccuracyTotals totals;
  totals.nan_elements = all.nan_elements;
  totals.candidate_nans = all.candidate_nans;
  totals.reference_nans = all.reference_nans;
  totals.infinite = all.infinite;
  totals.violations = all.violations;
  totals.abs_sum = sum_of_blocks(std::move(all.abs_blocks));
  totals.rel_sum = sum_of_blocks(std::move(all.rel_blocks));
  totals.ulp_sum = sum_of_blocks(std::move(all.ulp_blocks));
  totals.abs_max = all.abs_max;
  totals.rel_max = all.rel_max;
  totals.ulp_max = all.ulp_max;
  totals.signed_ulp_sum = all.signed_ulp_sum;
  totals.signs = all.signs;
  totals.reference_max_abs = all.reference_max_abs;
  totals.worst_flat = all.worst_flat;
  totals.worst = all.worst;
  if (numel - all.nan_elements > 0) {
    // Pass 2: the values in the buckets that hold the ranks (each worker keeps its own).
    merged.plan();
    std::vector<Ranks> keep(workers, merged);
    for_chunks(numel, workers, [&](unsigned w, std::int64_t, std::int64_t begin, std::int64_t end) {
      with_candidate_dtype(ct, [&](auto dt) {
        pass2_chunk<decltype(dt)::value>(keep[w], cbase, rbase, begin, end);
      });
    });
    for (const Ranks& rk : keep) merged.take_kept(rk);
    const judge_detail::Percentiles a = merged.abs.result(), r = merged.rel.result(),
                                    u = merged.ulp.result();
    totals.abs_p99 = a.p99;
    totals.abs_p999 = a.p999;
    totals.rel_p99 = r.p99;
    totals.rel_p999 = r.p999;
    totals.ulp_p99 = u.p99;
    totals.ulp_p999 = u.p999;
  }
  return accuracy_record(std::move(name), candidate, std::move(totals), "host", tol);
}

Result<AccuracyTensor> judge_accuracy(const Contract& contract, std::string_view op,
                                      std::string name, const Tensor& candidate,
                                      const Tensor& reference, const Tolerance& tol) {
  judge_detail::require_defined(reference, "judge_accuracy", "reference");
  if (Status st = check_reference_dtype(contract, reference, op, name); !st) return st.error();
  return judge_accuracy(std::move(name), candidate, reference, tol);
}

Status check_reference_dtype(const Contract& contract, const Tensor& reference, std::string_view op,
                             std::string_view tensor) {
  const std::optional<DType> want = to_dtype(contract.policy.reference_dtype);
  if (want && reference.defined() && reference.dtype() == *want) return {};
  const std::string have =
      reference.defined() ? std::string(dtype_contract_name(reference.dtype())) : "none";
  return bad_input(contract.file, "policy.reference_dtype",
                   fmt::format("op {} reference '{}' has dtype {}, not the contract's "
                               "reference_dtype {} (spec §3.1 gold-dtype provenance, §9.3)",
                               op, tensor, have, contract_name(contract.policy.reference_dtype)));
}

}  // namespace ws1

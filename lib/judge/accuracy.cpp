// The accuracy comparator of spec §4.1 and its error statistics (definitions in ws1/judge.hpp).
//
// One pass decides every element and gathers counts, sums, maxima and the worst element; the
// percentiles need the values themselves, so each statistic is then collected into one float
// buffer (reused) and ranked with nth_element. The buffer is 4 bytes per element, whatever the
// number of statistics; the tensors are walked in place, so a non-contiguous view is not copied.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>

#include "elements.hpp"
#include "percentile.hpp"
#include "ws1/judge.hpp"

namespace ws1 {
namespace {

using judge_detail::load_float;

constexpr double kInf = std::numeric_limits<double>::infinity();

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

// Candidate and reference hold the same finite value with the same bits: abs, rel and ulp
// errors are all exactly 0 and the element passes any row (atol, rtol >= 0).
inline bool same_finite(float c, float r) {
  return std::isfinite(c) && std::bit_cast<std::uint32_t>(c) == std::bit_cast<std::uint32_t>(r);
}

// The three observed errors of a pair without NaN.
double abs_error(float c, float r) {
  if (c == r) return 0;  // also equal infinities, and +0 against -0
  if (std::isinf(c) || std::isinf(r)) return kInf;
  return std::fabs(static_cast<double>(c) - static_cast<double>(r));
}

double rel_error(float c, float r) {
  const double a = abs_error(c, r);
  if (a == 0 || std::isinf(a)) return a;
  return a / std::max(std::fabs(static_cast<double>(r)), kRelErrorDenominatorFloor);
}

// ulp_distance() rounds the reference to the candidate dtype (nearest even) before counting.
double ulp_error(float c, float r, DType candidate) {
  return static_cast<double>(ulp_distance(c, r, candidate));
}

// |c - r| / allowed of a pair without NaN, with `ok` the exact decision. 0 / 0 is 0 (an exact
// answer where nothing is allowed) and x / 0 is inf; a failing infinite pairing has an
// infinite error, so inf. The quotient is rounded in double, so it is clamped onto the side of
// 1 the exact decision is on: <= 1 for a pass, >= 1 for a violation (exactly 1 can be either;
// WorstElement::violates tells).
double error_ratio(double abs_err, double allowed, bool ok) {
  double ratio = 0;
  if (abs_err == 0)
    ratio = 0;
  else if (allowed == 0 || std::isinf(abs_err))
    ratio = kInf;
  else
    ratio = abs_err / allowed;
  return ok ? std::min(ratio, 1.0) : std::max(ratio, 1.0);
}

ErrorStats nan_stats() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {nan, nan, nan, nan};
}

// ---- the two passes, over fixed chunks ----------------------------------------------------

// Elements per chunk: fixed, so the merged sums do not depend on the number of workers.
constexpr std::int64_t kChunk = std::int64_t{1} << 22;

// What pass 1 learns from one chunk.
struct Partial {
  std::int64_t nan_elements = 0, violations = 0, candidate_nans = 0, reference_nans = 0;
  std::int64_t infinite = 0;
  double abs_sum = 0, rel_sum = 0, ulp_sum = 0;
  double abs_max = 0, rel_max = 0, ulp_max = 0;
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
    abs_sum += p.abs_sum;
    rel_sum += p.rel_sum;
    ulp_sum += p.ulp_sum;
    abs_max = std::max(abs_max, p.abs_max);
    rel_max = std::max(rel_max, p.rel_max);
    ulp_max = std::max(ulp_max, p.ulp_max);
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
  void take_kept(Ranks& o) {
    abs.take_kept(o.abs);
    rel.take_kept(o.rel);
    ulp.take_kept(o.ulp);
  }
};

// Pass 1 on one element pair.
void visit(Partial& p, Ranks& rk, std::int64_t flat, float c, float r, const Tolerance& tol,
           DType ct) {
  if (same_finite(c, r)) {  // every error is 0: only a first worst element to record
    rk.abs.count_zeros(1);
    rk.rel.count_zeros(1);
    rk.ulp.count_zeros(1);
    if (p.worst_flat < 0) {
      p.worst_flat = flat;
      p.worst = WorstElement{{}, c, r, tol.atol + tol.rtol * std::fabs(static_cast<double>(r)), 0.0, false};
    }
    return;
  }
  double allowed = 0, ratio = 0;
  bool violates = true;
  if (std::isnan(c) || std::isnan(r)) {
    ++p.nan_elements;
    ++p.violations;
    p.candidate_nans += std::isnan(c);
    p.reference_nans += std::isnan(r);
    allowed = std::isnan(r) ? r : std::isinf(r) ? kInf : tol.atol + tol.rtol * std::fabs(r);
    ratio = kInf;
  } else {
    const bool ok = within_tolerance(c, r, tol);
    violates = !ok;
    const double a = abs_error(c, r), rel = rel_error(c, r), u = ulp_error(c, r, ct);
    p.abs_sum += a;
    p.rel_sum += rel;
    p.ulp_sum += u;
    rk.abs.count(static_cast<float>(a));
    rk.rel.count(static_cast<float>(rel));
    rk.ulp.count(static_cast<float>(u));
    p.abs_max = std::max(p.abs_max, a);
    p.rel_max = std::max(p.rel_max, rel);
    p.ulp_max = std::max(p.ulp_max, u);
    if (std::isinf(c) || std::isinf(r)) {
      ++p.infinite;
      allowed = std::isinf(r) ? kInf : tol.atol + tol.rtol * std::fabs(r);
    } else {
      allowed = tol.atol + tol.rtol * std::fabs(static_cast<double>(r));
    }
    ratio = error_ratio(a, allowed, ok);
    if (!ok) ++p.violations;
  }
  // At an equal ratio a violation outranks a pass (both can read 1.0).
  if (p.outranks(ratio, violates)) {
    p.worst_flat = flat;
    p.worst.candidate = c;
    p.worst.reference = r;
    p.worst.allowed = allowed;
    p.worst.margin = ratio;
    p.worst.violates = violates;
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

AccuracyTensor judge_accuracy(std::string name, const Tensor& candidate, const Tensor& reference,
                              const Tolerance& tol) {
  judge_detail::require_defined(candidate, "judge_accuracy", "candidate");
  judge_detail::require_defined(reference, "judge_accuracy", "reference");
  AccuracyTensor t;
  t.name = std::move(name);
  t.shape = candidate.shape();
  t.dtype = candidate.dtype();
  t.numel = candidate.numel();
  if (auto why = incomparable(candidate, reference, tol)) {
    t.comparable = false;
    t.notes.push_back(std::move(*why));
    return t;
  }
  const DType ct = candidate.dtype();
  const DType rt = reference.dtype();

  // Contiguous element arrays: the passes below split the flat range into fixed chunks.
  const Tensor cc = candidate.is_contiguous() ? candidate : candidate.contiguous();
  const Tensor rc = reference.is_contiguous() ? reference : reference.contiguous();
  const std::byte* cbase = cc.raw();
  const std::byte* rbase = rc.raw();
  const std::size_t cs = dtype_size(ct), rs = dtype_size(rt);
  const std::int64_t chunks = (t.numel + kChunk - 1) / kChunk;
  const unsigned workers = worker_count(chunks);

  // Pass 1: decisions, counts, sums, maxima, worst element, per chunk; histograms per worker.
  std::vector<Partial> parts(static_cast<std::size_t>(chunks));
  std::vector<Ranks> ranks(workers);
  for_chunks(t.numel, workers, [&](unsigned w, std::int64_t k, std::int64_t begin, std::int64_t end) {
    Partial& p = parts[static_cast<std::size_t>(k)];
    Ranks& rk = ranks[w];
    for (std::int64_t flat = begin; flat < end; ++flat) {
      const float c = load_float(cbase + static_cast<std::size_t>(flat) * cs, ct);
      const float r = load_float(rbase + static_cast<std::size_t>(flat) * rs, rt);
      visit(p, rk, flat, c, r, tol, ct);
    }
  });
  // Merged in chunk order: the sums' association and the worst element's tie rule (the first
  // in row-major order) do not depend on the number of workers.
  Partial all;
  for (const Partial& p : parts) all.merge(p);
  Ranks merged;
  for (const Ranks& rk : ranks) merged.add_counts(rk);
  t.nan_elements = all.nan_elements;
  t.violations = all.violations;
  if (all.worst_flat >= 0) {
    all.worst.index = judge_detail::unravel(all.worst_flat, t.shape);
    t.worst = std::move(all.worst);
  }

  const std::int64_t measured = t.numel - t.nan_elements;  // elements in the statistics
  if (measured == 0) {
    if (t.numel > 0) t.abs_error = t.rel_error = t.ulp_distance = nan_stats();
  } else {
    const auto n = static_cast<double>(measured);
    t.abs_error.max = all.abs_max;
    t.rel_error.max = all.rel_max;
    t.ulp_distance.max = all.ulp_max;
    t.abs_error.mean = all.abs_sum / n;
    t.rel_error.mean = all.rel_sum / n;
    t.ulp_distance.mean = all.ulp_sum / n;
    // Pass 2: the values in the buckets that hold the ranks (each worker keeps its own).
    merged.plan();
    std::vector<Ranks> keep(workers, merged);
    for_chunks(t.numel, workers, [&](unsigned w, std::int64_t, std::int64_t begin, std::int64_t end) {
      Ranks& rk = keep[w];
      for (std::int64_t flat = begin; flat < end; ++flat) {
        const float c = load_float(cbase + static_cast<std::size_t>(flat) * cs, ct);
        const float r = load_float(rbase + static_cast<std::size_t>(flat) * rs, rt);
        if (same_finite(c, r) || std::isnan(c) || std::isnan(r)) continue;
        rk.abs.keep(static_cast<float>(abs_error(c, r)));
        rk.rel.keep(static_cast<float>(rel_error(c, r)));
        rk.ulp.keep(static_cast<float>(ulp_error(c, r, ct)));
      }
    });
    for (Ranks& rk : keep) merged.take_kept(rk);
    const auto ranked = [](judge_detail::RankSelector& sel, ErrorStats& s) {
      const judge_detail::Percentiles p = sel.result();
      // A float rounding can land just above the double max: cap it there.
      s.p99 = std::min(static_cast<double>(p.p99), s.max);
      s.p999 = std::min(static_cast<double>(p.p999), s.max);
    };
    ranked(merged.abs, t.abs_error);
    ranked(merged.rel, t.rel_error);
    ranked(merged.ulp, t.ulp_distance);
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

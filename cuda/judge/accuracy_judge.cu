// The accuracy judge on the device (ws1cuda/device_judge.hpp). The record must equal the host
// judge's bit for bit, so every number follows a definition that does not depend on the order
// of visits (ws1/accuracy_parts.hpp):
//  1. find_rare: the pairs the common arithmetic does not settle (a NaN, an infinity, a finite
//     pair within the rounding band of its bound) are listed; the host judges them with the
//     library's general definitions (judge_pair) and uploads the results as a table sorted by
//     index. Every later pass takes a rare pair's values from that table.
//  2. leaf_stats: per kSumBlock-element leaf, the three statistics' leaf sums (one thread per
//     lane, then the stride-halving tree), maxima, violations and the worst element (the
//     largest (ratio, violates), then the lowest index: a total order, so the merge order does
//     not matter); the exact sum of the signed ulp distances and the largest |reference| (the
//     null candidates' inputs); and the histogram of each statistic's float32 top 11 bits.
//  3. refine, twice: for each of the six ranks (P99, P99.9 of three statistics), the histogram of
//     the next bits among the values whose leading bits are the rank's prefix so far. After
//     11 + 11 + 10 bits each rank's float32 value is known exactly (non-negative floats order
//     like their bits).
// The host adds the block sums by sum_of_blocks(), reduces the leaf records in index order and
// assembles the record with accuracy_record(), as the host judge does.
//
// The pair arithmetic below is the device twin of lib/judge/pair_errors.hpp's finite form;
// double operations are written as __d*_rn intrinsics so that no FMA contraction or other
// rewriting can change a rounding. test/gpu/device_judge_test.cpp checks whole records against
// the host judge.
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "ws1/accuracy_parts.hpp"
#include "ws1/error.hpp"
#include "ws1/judge.hpp"
#include "ws1cuda/device_array.cuh"
#include "ws1cuda/device_judge.hpp"
#include "ws1/op_inputs.hpp"

namespace ws1cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = static_cast<int>(ws1::kSumBlock / ws1::kSumLanes);  // 16
static_assert(kThreads == ws1::kSumLanes);  // one thread per lane of the leaf sum
constexpr int kBins = 2048;  // 11 bits per histogram level (the last level uses 1024)
// Rare pairs the judge keeps; beyond it the host judge runs (a tensor with that many NaNs or
// infinities is red anyway, and the host has to read it to list them).
constexpr std::size_t kMaxRare = std::size_t{1} << 20;

struct Tol {
  double atol, rtol;
};

// ---- pair arithmetic (pair_errors.hpp's finite form) ------------------------------------------

__device__ __forceinline__ double dabs(double x) {
  return __longlong_as_double(__double_as_longlong(x) & 0x7fffffffffffffffll);
}
__device__ __forceinline__ long long ulp_key(unsigned bits, unsigned sign_bit) {
  const long long mag = static_cast<long long>(bits & (sign_bit - 1u));
  return (bits & sign_bit) != 0 ? -mag : mag;
}
__device__ __forceinline__ unsigned bf16_bits_rne(unsigned f32_bits) {
  return (f32_bits + 0x7fffu + ((f32_bits >> 16) & 1u)) >> 16;
}
__device__ __forceinline__ bool is_finite(float x) { return (__float_as_uint(x) & 0x7f800000u) != 0x7f800000u; }

// Finite r rounded to the candidate's dtype (pair_errors.hpp's rounded_to).
template <bool kBf16>
__device__ __forceinline__ float rounded_to(float r) {
  if constexpr (kBf16)
    return __uint_as_float(bf16_bits_rne(__float_as_uint(r)) << 16);
  else
    return r;
}

// The seven counts of ws1::SignCounts, in its order: finite, above, below, away, toward,
// positive, negative (ws1::count_signs()).
constexpr int kSigns = 7;
__device__ __forceinline__ void count_signs(unsigned (&s)[kSigns], float c, float q) {
  const float ac = fabsf(c), aq = fabsf(q);
  s[0] += 1;
  s[1] += c > q ? 1u : 0u;
  s[2] += c < q ? 1u : 0u;
  s[3] += ac > aq ? 1u : 0u;
  s[4] += ac < aq ? 1u : 0u;
  s[5] += q > 0 ? 1u : 0u;
  s[6] += q < 0 ? 1u : 0u;
}

template <bool kBf16>
__device__ __forceinline__ float load_c(const void* c, long long i) {
  if constexpr (kBf16)
    return __uint_as_float(static_cast<unsigned>(static_cast<const unsigned short*>(c)[i]) << 16);
  else
    return static_cast<const float*>(c)[i];
}

// Everything the passes need of one element.
struct Values {
  double abs, rel, ulp, allowed, ratio;
  bool violates, nan;
  long long sulp;  // the signed ulp distance of a finite pair (clamped), else 0
};

// The table of rare pairs (sorted by index), uploaded by the host.
struct RareTable {
  const long long* index;
  const double *abs, *rel, *ulp, *allowed, *ratio;
  const long long* sulp;
  const unsigned char* flags;  // bit 0: nan, bit 1: violates
  long long count;
};

// false: a rare pair (not settled here).
template <bool kBf16>
__device__ __forceinline__ bool common_pair(float c, float r, Tol tol, Values& v) {
  const unsigned cb = __float_as_uint(c), rb = __float_as_uint(r);
  const double rd = r;
  v.nan = false;
  v.allowed = __dadd_rn(tol.atol, __dmul_rn(tol.rtol, dabs(rd)));
  if (is_finite(c) && cb == rb) {  // same_finite: every error 0, a pass
    v.abs = v.rel = v.ulp = 0;
    v.sulp = 0;
    v.ratio = 0;
    v.violates = false;
    return true;
  }
  if (!is_finite(c) || !is_finite(r)) return false;
  const double abs = dabs(__dsub_rn(static_cast<double>(c), rd));
  const double band = __dmul_rn(v.allowed, 0x1p-49);
  bool ok;
  if (abs < __dsub_rn(v.allowed, band))
    ok = true;
  else if (abs > __dadd_rn(v.allowed, band))
    ok = false;
  else
    return false;  // within the rounding band: the exact test runs on the host
  v.abs = abs;
  v.rel = __ddiv_rn(abs, fmax(dabs(rd), ws1::kRelErrorDenominatorFloor));
  long long d;
  if constexpr (kBf16)
    d = ulp_key(cb >> 16, 0x8000u) - ulp_key(bf16_bits_rne(rb), 0x8000u);
  else
    d = ulp_key(cb, 0x80000000u) - ulp_key(rb, 0x80000000u);
  v.ulp = __ll2double_rn(d < 0 ? -d : d);
  v.sulp = d > ws1::kSignedUlpClamp ? ws1::kSignedUlpClamp : d < -ws1::kSignedUlpClamp ? -ws1::kSignedUlpClamp : d;
  double ratio;
  if (abs == 0)
    ratio = 0;
  else if (v.allowed == 0)
    ratio = __longlong_as_double(0x7ff0000000000000ll);
  else
    ratio = __ddiv_rn(abs, v.allowed);
  v.ratio = ok ? fmin(ratio, 1.0) : fmax(ratio, 1.0);
  v.violates = !ok;
  return true;
}

__device__ __forceinline__ void rare_values(const RareTable& t, long long i, Values& v) {
  long long lo = 0, hi = t.count;  // the first entry >= i
  while (lo < hi) {
    const long long mid = lo + (hi - lo) / 2;
    if (t.index[mid] < i)
      lo = mid + 1;
    else
      hi = mid;
  }
  // Present by construction (find_rare listed every rare pair); a miss would be a bug, and
  // is made loud: a NaN statistic and a violation.
  if (lo >= t.count || t.index[lo] != i) {
    v = Values{__longlong_as_double(0x7ff8000000000000ll), 0, 0, 0, 0, true, false, 0};
    return;
  }
  v.abs = t.abs[lo];
  v.rel = t.rel[lo];
  v.ulp = t.ulp[lo];
  v.allowed = t.allowed[lo];
  v.ratio = t.ratio[lo];
  v.sulp = t.sulp[lo];
  v.nan = (t.flags[lo] & 1u) != 0;
  v.violates = (t.flags[lo] & 2u) != 0;
}

template <bool kBf16>
__device__ __forceinline__ Values element(const void* c, const float* r, long long i, Tol tol, const RareTable& t) {
  Values v;
  if (!common_pair<kBf16>(load_c<kBf16>(c, i), r[i], tol, v)) rare_values(t, i, v);
  return v;
}

// ---- pass 1: the rare pairs ---------------------------------------------------------------------

template <bool kBf16>
__global__ void find_rare(const void* c, const float* r, long long n, Tol tol, long long* out,
                          unsigned long long* count, unsigned long long cap) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x) {
    Values v;
    if (common_pair<kBf16>(load_c<kBf16>(c, i), r[i], tol, v)) continue;
    const unsigned long long at = atomicAdd(count, 1ull);
    if (at < cap) out[at] = i;
  }
}

__global__ void gather_pairs(const void* c, bool bf16, const float* r, const long long* index, long long m,
                             float* c_out, float* r_out) {
  const long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (k >= m) return;
  c_out[k] = bf16 ? load_c<true>(c, index[k]) : load_c<false>(c, index[k]);
  r_out[k] = r[index[k]];
}

// ---- pass 2: leaves ------------------------------------------------------------------------------

// One leaf's results, reduced on the host in leaf order.
struct Leaf {
  double sum[3];
  double max[3];
  double worst_ratio, worst_allowed;
  long long worst_flat;
  long long violations;
  long long sulp_sum;
  long long signs[kSigns];
  float ref_max;
  int worst_violates;
};

struct Worst {
  double ratio, allowed;
  long long flat;
  bool violates;
};
// The total order of the worst element: larger ratio, then a violation, then the lower index.
__device__ __forceinline__ bool outranks(const Worst& a, const Worst& b) {
  if (a.flat < 0) return false;
  if (b.flat < 0) return true;
  if (a.ratio != b.ratio) return a.ratio > b.ratio;
  if (a.violates != b.violates) return a.violates;
  return a.flat < b.flat;
}

__device__ __forceinline__ unsigned float_bits(double v) { return __float_as_uint(__double2float_rn(v)); }

// The stride-halving tree over the leaf's 256 lane sums (thread t holds lane t): m = 128, 64,
// 32 through shared memory, m = 16 .. 1 by shuffles in warp 0. Returns the sum in thread 0.
// `sh` holds kThreads doubles.
__device__ double lanes_tree(double s, double* sh) {
  const int t = threadIdx.x;
  __syncthreads();  // sh may still be read by the previous call
  sh[t] = s;
  __syncthreads();
  for (int m = kThreads / 2; m >= 32; m /= 2) {
    if (t < m) sh[t] = __dadd_rn(sh[t], sh[t + m]);
    __syncthreads();
  }
  if (t < 32) {
    s = sh[t];
    for (int m = 16; m >= 1; m /= 2) s = __dadd_rn(s, __shfl_down_sync(0xffffffffu, s, m));
  }
  return s;
}

template <bool kBf16>
__global__ void __launch_bounds__(kThreads) leaf_stats(const void* c, const float* r, long long n, Tol tol,
                                                       RareTable table, Leaf* leaves, long long leaf_count,
                                                       unsigned long long* hist /* 3 x kBins */) {
  __shared__ unsigned counts[3][kBins];
  __shared__ double sh[kThreads];
  __shared__ Worst wsh[kThreads];
  __shared__ double msh[3][kThreads];
  __shared__ unsigned long long vsh[kThreads];
  __shared__ long long ssh[kThreads];
  __shared__ float rsh[kThreads];
  __shared__ unsigned gsh[kThreads / 32][kSigns];
  const int t = threadIdx.x;
  for (int k = t; k < 3 * kBins; k += kThreads) (&counts[0][0])[k] = 0;
  __syncthreads();

  for (long long leaf = blockIdx.x; leaf < leaf_count; leaf += gridDim.x) {
    const long long base = leaf * ws1::kSumBlock;
    double lane[3] = {0, 0, 0};  // lane t's sums: elements t + 256 j, left to right
    double mx[3] = {0, 0, 0};
    unsigned zeros[3] = {0, 0, 0};
    unsigned long long violations = 0;
    long long sulp = 0;
    unsigned signs[kSigns] = {0, 0, 0, 0, 0, 0, 0};
    float rmax = 0;  // fmaxf leaves a NaN reference out
    Worst best{0, 0, -1, false};
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const long long i = base + t + static_cast<long long>(kThreads) * j;
      if (i >= n) continue;  // the last leaf's padding: + 0 changes no bit
      const Values v = element<kBf16>(c, r, i, tol, table);
      rmax = fmaxf(rmax, fabsf(r[i]));
      if (const float cv = load_c<kBf16>(c, i), rv = r[i]; is_finite(cv) && is_finite(rv))
        count_signs(signs, cv, rounded_to<kBf16>(rv));
      sulp += v.sulp;
      violations += v.violates ? 1 : 0;
      const Worst w{v.ratio, v.allowed, i, v.violates};
      if (outranks(w, best)) best = w;
      if (v.nan) continue;  // out of the statistics (+0 in the sums)
      const double s3[3] = {v.abs, v.rel, v.ulp};
#pragma unroll
      for (int s = 0; s < 3; ++s) {
        lane[s] = __dadd_rn(lane[s], s3[s]);
        mx[s] = fmax(mx[s], s3[s]);
        const unsigned b = float_bits(s3[s]);
        if (b == 0)
          ++zeros[s];
        else
          atomicAdd(&counts[s][b >> 21], 1u);
      }
    }
#pragma unroll
    for (int s = 0; s < 3; ++s)
      if (zeros[s] != 0) atomicAdd(&counts[s][0], zeros[s]);
    const double sa = lanes_tree(lane[0], sh);
    const double sr = lanes_tree(lane[1], sh);
    const double su = lanes_tree(lane[2], sh);
    // Maxima, violations and the worst element: any tree (order-free results).
    wsh[t] = best;
    vsh[t] = violations;
    ssh[t] = sulp;
    rsh[t] = rmax;
    for (int s = 0; s < 3; ++s) msh[s][t] = mx[s];
    // The sign counts: integers, so any tree gives the same sums (warps, then thread 0).
#pragma unroll
    for (int k = 0; k < kSigns; ++k) {
      const unsigned w = __reduce_add_sync(0xffffffffu, signs[k]);
      if ((t & 31) == 0) gsh[t / 32][k] = w;
    }
    __syncthreads();
    for (int m = kThreads / 2; m >= 1; m /= 2) {
      if (t < m) {
        if (outranks(wsh[t + m], wsh[t])) wsh[t] = wsh[t + m];
        vsh[t] += vsh[t + m];
        ssh[t] += ssh[t + m];
        rsh[t] = fmaxf(rsh[t], rsh[t + m]);
        for (int s = 0; s < 3; ++s) msh[s][t] = fmax(msh[s][t], msh[s][t + m]);
      }
      __syncthreads();
    }
    if (t == 0) {
      Leaf& out = leaves[leaf];
      out.sum[0] = sa;
      out.sum[1] = sr;
      out.sum[2] = su;
      for (int s = 0; s < 3; ++s) out.max[s] = msh[s][0];
      out.worst_ratio = wsh[0].ratio;
      out.worst_allowed = wsh[0].allowed;
      out.worst_flat = wsh[0].flat;
      out.worst_violates = wsh[0].violates ? 1 : 0;
      out.violations = static_cast<long long>(vsh[0]);
      out.sulp_sum = ssh[0];
      for (int k = 0; k < kSigns; ++k) {
        long long total = 0;
        for (int w = 0; w < kThreads / 32; ++w) total += gsh[w][k];
        out.signs[k] = total;
      }
      out.ref_max = rsh[0];
    }
    __syncthreads();
  }
  __syncthreads();
  for (int k = t; k < 3 * kBins; k += kThreads) {
    const unsigned v = (&counts[0][0])[k];
    if (v != 0) atomicAdd(&hist[k], static_cast<unsigned long long>(v));
  }
}

// ---- pass 3: the ranks' next bits ---------------------------------------------------------------

// Six ranks: statistic s = k / 2 (abs, rel, ulp), percentile k % 2 (P99, P99.9).
struct Prefixes {
  unsigned prefix[6];  // the leading bits found so far
};

template <bool kBf16>
__global__ void __launch_bounds__(kThreads) refine(const void* c, const float* r, long long n, Tol tol,
                                                   RareTable table, Prefixes p, int known_bits, int next_bits,
                                                   unsigned long long* hist /* 6 x kBins */) {
  __shared__ unsigned counts[6][kBins];
  const int t = threadIdx.x;
  for (int k = t; k < 6 * kBins; k += kThreads) (&counts[0][0])[k] = 0;
  __syncthreads();
  const int shift = 32 - known_bits - next_bits;
  const unsigned mask = (1u << next_bits) - 1u;
  unsigned zeros[6] = {0, 0, 0, 0, 0, 0};  // a 0 is in bin 0 at every level: counted here
  for (long long i = blockIdx.x * static_cast<long long>(kThreads) + t; i < n;
       i += static_cast<long long>(gridDim.x) * kThreads) {
    const Values v = element<kBf16>(c, r, i, tol, table);
    if (v.nan) continue;
    const unsigned b[3] = {float_bits(v.abs), float_bits(v.rel), float_bits(v.ulp)};
#pragma unroll
    for (int k = 0; k < 6; ++k) {
      const unsigned x = b[k / 2];
      if (x == 0)
        zeros[k] += p.prefix[k] == 0 ? 1u : 0u;
      else if ((x >> (32 - known_bits)) == p.prefix[k])
        atomicAdd(&counts[k][(x >> shift) & mask], 1u);
    }
  }
#pragma unroll
  for (int k = 0; k < 6; ++k)
    if (zeros[k] != 0) atomicAdd(&counts[k][0], zeros[k]);
  __syncthreads();
  for (int k = t; k < 6 * kBins; k += kThreads) {
    const unsigned v = (&counts[0][0])[k];
    if (v != 0) atomicAdd(&hist[k], static_cast<unsigned long long>(v));
  }
}

// ---- host side ---------------------------------------------------------------------------------

template <class T>
std::vector<T> to_host(const DeviceArray<T>& a) {
  std::vector<T> v(a.size());
  if (!v.empty()) WS1_CUDA(cudaMemcpy(v.data(), a.get(), a.bytes(), cudaMemcpyDeviceToHost));
  return v;
}
template <class T>
DeviceArray<T> to_device(const std::vector<T>& v) {
  DeviceArray<T> a(v.size());
  if (!v.empty()) WS1_CUDA(cudaMemcpy(a.get(), v.data(), a.bytes(), cudaMemcpyHostToDevice));
  return a;
}

// The rare pairs judged on the host, on the device as a RareTable.
struct RareUpload {
  DeviceArray<long long> index;
  DeviceArray<double> abs, rel, ulp, allowed, ratio;
  DeviceArray<long long> sulp;
  DeviceArray<unsigned char> flags;
  RareTable table() const {
    return {index.get(), abs.get(), rel.get(), ulp.get(), allowed.get(), ratio.get(), sulp.get(), flags.get(),
            static_cast<long long>(index.size())};
  }
};

// Where rank `rank` (0-based among all counted values) falls in a histogram: the bin, and the
// rank inside it.
std::pair<unsigned, std::int64_t> locate(const unsigned long long* hist, int bins, std::int64_t rank) {
  std::int64_t before = 0;
  for (int b = 0; b < bins; ++b) {
    const auto in = static_cast<std::int64_t>(hist[b]);
    if (before + in > rank) return {static_cast<unsigned>(b), rank - before};
    before += in;
  }
  throw std::logic_error("device judge: a rank beyond the histogram's count");
}

int grid_for(long long items_per_block_total) {
  int device = 0, sms = 0;
  WS1_CUDA(cudaGetDevice(&device));
  WS1_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const long long want = std::max<long long>(1, items_per_block_total);
  return static_cast<int>(std::min<long long>(want, static_cast<long long>(sms) * 4));
}

template <bool kBf16>
std::optional<ws1::AccuracyTensor> judge(const std::string& name, const ws1::Tensor& candidate,
                                         const ws1::Tensor& reference, const ws1::Tolerance& tolerance) {
  const void* c = candidate.device_data();
  const auto* r = static_cast<const float*>(reference.device_data());
  const long long n = candidate.numel();
  const Tol tol{tolerance.atol, tolerance.rtol};
  const ws1::DType ct = candidate.dtype();

  // 1. The rare pairs, judged on the host.
  DeviceArray<long long> found(kMaxRare);
  DeviceArray<unsigned long long> count = zeros<unsigned long long>(1);
  find_rare<kBf16><<<grid_for(blocks_for(n, kThreads)), kThreads>>>(c, r, n, tol, found.get(), count.get(),
                                                                      kMaxRare);
  check_launch("find_rare");
  unsigned long long rare = 0;
  WS1_CUDA(cudaMemcpy(&rare, count.get(), sizeof rare, cudaMemcpyDeviceToHost));
  if (rare > kMaxRare) return std::nullopt;
  std::vector<long long> index(rare);
  if (rare > 0) WS1_CUDA(cudaMemcpy(index.data(), found.get(), rare * sizeof(long long), cudaMemcpyDeviceToHost));
  std::sort(index.begin(), index.end());
  ws1::AccuracyTotals totals;
  RareUpload up;
  {
    const DeviceArray<long long> sorted = to_device(index);
    DeviceArray<float> cv(rare), rv(rare);
    if (rare > 0) {
      gather_pairs<<<blocks_for(static_cast<std::int64_t>(rare), kThreads), kThreads>>>(
          c, kBf16, r, sorted.get(), static_cast<long long>(rare), cv.get(), rv.get());
      check_launch("gather_pairs");
    }
    const std::vector<float> ch = to_host(cv), rh = to_host(rv);
    std::vector<double> abs(rare), rel(rare), ulp(rare), allowed(rare), ratio(rare);
    std::vector<long long> sulp(rare);
    std::vector<unsigned char> flags(rare);
    for (std::size_t k = 0; k < rare; ++k) {
      const ws1::PairJudgement x = ws1::judge_pair(ch[k], rh[k], tolerance, ct);
      abs[k] = x.abs;
      rel[k] = x.rel;
      ulp[k] = x.ulp;
      allowed[k] = x.allowed;
      ratio[k] = x.ratio;
      sulp[k] = x.signed_ulp;
      flags[k] = static_cast<unsigned char>((x.nan ? 1u : 0u) | (x.violates ? 2u : 0u));
      totals.nan_elements += x.nan ? 1 : 0;
      totals.candidate_nans += x.candidate_nan ? 1 : 0;
      totals.reference_nans += x.reference_nan ? 1 : 0;
      totals.infinite += x.infinite ? 1 : 0;
    }
    up = RareUpload{to_device(index),   to_device(abs),   to_device(rel),  to_device(ulp),
                    to_device(allowed), to_device(ratio), to_device(sulp), to_device(flags)};
  }
  const RareTable table = up.table();

  // 2. Leaves: block sums, maxima, violations, worst; the first histogram level.
  const long long leaf_count = (n + ws1::kSumBlock - 1) / ws1::kSumBlock;
  DeviceArray<Leaf> leaves(static_cast<std::size_t>(leaf_count));
  DeviceArray<unsigned long long> hist1 = zeros<unsigned long long>(3 * kBins);
  leaf_stats<kBf16><<<grid_for(leaf_count), kThreads>>>(c, r, n, tol, table, leaves.get(), leaf_count, hist1.get());
  check_launch("leaf_stats");
  const std::vector<Leaf> lh = to_host(leaves);
  std::vector<double> sums[3];
  for (auto& s : sums) s.reserve(lh.size());
  double* const maxima[3] = {&totals.abs_max, &totals.rel_max, &totals.ulp_max};
  for (const Leaf& l : lh) {  // in leaf order
    for (int s = 0; s < 3; ++s) {
      sums[s].push_back(l.sum[s]);
      *maxima[s] = std::max(*maxima[s], l.max[s]);
    }
    totals.violations += l.violations;
    totals.signed_ulp_sum += l.sulp_sum;
    totals.signs += ws1::SignCounts{l.signs[0], l.signs[1], l.signs[2], l.signs[3], l.signs[4], l.signs[5], l.signs[6]};
    totals.reference_max_abs = std::fmax(totals.reference_max_abs, l.ref_max);
    const bool v = l.worst_violates != 0;
    if (l.worst_flat >= 0 &&
        (totals.worst_flat < 0 || l.worst_ratio > totals.worst.margin ||
         (l.worst_ratio == totals.worst.margin && v && !totals.worst.violates))) {
      totals.worst_flat = l.worst_flat;
      totals.worst.margin = l.worst_ratio;
      totals.worst.allowed = l.worst_allowed;
      totals.worst.violates = v;
    }
  }
  totals.abs_sum = ws1::sum_of_blocks(std::move(sums[0]));
  totals.rel_sum = ws1::sum_of_blocks(std::move(sums[1]));
  totals.ulp_sum = ws1::sum_of_blocks(std::move(sums[2]));
  if (totals.worst_flat >= 0) {
    DeviceArray<long long> at = to_device(std::vector<long long>{totals.worst_flat});
    DeviceArray<float> cv(1), rv(1);
    gather_pairs<<<1, 1>>>(c, kBf16, r, at.get(), 1, cv.get(), rv.get());
    check_launch("gather_pairs");
    totals.worst.candidate = to_host(cv)[0];
    totals.worst.reference = to_host(rv)[0];
  }

  // 3. The six ranks, 11 + 11 + 10 bits.
  const std::int64_t measured = n - totals.nan_elements;
  if (measured > 0) {
    const std::int64_t ranks[2] = {ws1::nearest_rank_index(measured, 99, 100),
                                   ws1::nearest_rank_index(measured, 999, 1000)};
    const std::vector<unsigned long long> h1 = to_host(hist1);
    Prefixes p{};
    std::int64_t within[6];
    for (int k = 0; k < 6; ++k) {
      const auto [bin, q] = locate(h1.data() + (k / 2) * kBins, kBins, ranks[k % 2]);
      p.prefix[k] = bin;
      within[k] = q;
    }
    int known = 11;
    for (const int next : {11, 10}) {
      DeviceArray<unsigned long long> h = zeros<unsigned long long>(6 * kBins);
      refine<kBf16><<<grid_for(blocks_for(n, kThreads)), kThreads>>>(c, r, n, tol, table, p, known, next, h.get());
      check_launch("refine");
      const std::vector<unsigned long long> hh = to_host(h);
      for (int k = 0; k < 6; ++k) {
        const auto [bin, q] = locate(hh.data() + k * kBins, 1 << next, within[k]);
        p.prefix[k] = (p.prefix[k] << next) | bin;
        within[k] = q;
      }
      known += next;
    }
    float* const out[6] = {&totals.abs_p99, &totals.abs_p999, &totals.rel_p99,
                           &totals.rel_p999, &totals.ulp_p99, &totals.ulp_p999};
    for (int k = 0; k < 6; ++k) *out[k] = std::bit_cast<float>(p.prefix[k]);
  }
  return ws1::accuracy_record(name, candidate, std::move(totals), "cuda", tolerance);
}

std::optional<ws1::AccuracyTensor> hook(const std::string& name, const ws1::Tensor& candidate,
                                        const ws1::Tensor& reference, const ws1::Tolerance& tol) {
  return judge_on_device(name, candidate, reference, tol);
}

}  // namespace

std::optional<ws1::AccuracyTensor> judge_on_device(const std::string& name, const ws1::Tensor& candidate,
                                                   const ws1::Tensor& reference, const ws1::Tolerance& tol) {
  if (candidate.device_data() == nullptr || reference.device_data() == nullptr || candidate.numel() == 0 ||
      reference.dtype() != ws1::DType::kF32 || candidate.shape() != reference.shape())
    return std::nullopt;
  try {
    switch (candidate.dtype()) {
      case ws1::DType::kBF16:
        return judge<true>(name, candidate, reference, tol);
      case ws1::DType::kF32:
        return judge<false>(name, candidate, reference, tol);
      default:
        return std::nullopt;  // f16: the host judge
    }
  } catch (const ws1::ops::DeviceError& e) {
    throw ws1::EnvironmentFailure("device judge of '" + name + "': " + e.error.message());
  }
}

void install_device_judge() { ws1::set_device_accuracy_judge(&hook); }

ws1::Tensor to_device_tensor(const ws1::Tensor& t) {
  const ws1::Tensor c = t.contiguous();
  DeviceArray<unsigned char> a(c.nbytes());
  if (c.nbytes() > 0) WS1_CUDA(cudaMemcpy(a.get(), c.raw(), c.nbytes(), cudaMemcpyHostToDevice));
  return ws1::Tensor::on_device(c.dtype(), c.shape(), adopt_as_device_copy(std::move(a)));
}

}  // namespace ws1cuda

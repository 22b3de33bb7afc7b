// The shared CPU GEMM (gemm_cpu.hpp). Structure, a classic packed GEMM:
//   jobs = tiles of C (kMB rows x kNB columns), split contiguously over threads;
//   K is walked in blocks of whole leaves (about kKC elements); for each block the job's A rows
//   and B columns are packed into k-major panels (kMR rows / kNR columns wide, zero padded,
//   bf16 widened exactly) and the kMR x kNR micro-kernel runs on every tile. An operand that
//   several jobs would pack again (e.g. lm_head's hidden, shared by all vocabulary tiles) is
//   packed once up front.
// A micro-kernel computes one leaf at a time in registers (FP32 fma chain from 0.0f) and then
// applies the leaf's merges against the tile's stack of pending partial results, so the fold and
// the mid-split tree are one mechanism: the tree is evaluated in post-order (leaves in k order;
// after a leaf, every node whose right subtree ends there merges top-of-stack + value). The
// stack lives in memory per tile and carries over from one K block to the next, which is why
// the order per output does not depend on blocking. Packing and storing move data only; the
// arithmetic is all in the micro-kernels.
#include "gemm_cpu.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "op_support.hpp"
#include "ws1/numeric.hpp"

namespace ws1::ops::gemm {
namespace {

constexpr int kMR = 6;               // micro-tile rows
constexpr int kNR = 16;              // micro-tile columns (two AVX2 vectors)
constexpr int kTile = kMR * kNR;
constexpr std::int64_t kMB = 96;     // job rows (multiple of kMR)
constexpr std::int64_t kNB = 256;    // job columns (multiple of kNR)
constexpr std::int64_t kKC = 256;    // K block target length (whole leaves)

[[noreturn]] void misuse(const std::string& what) { throw std::logic_error("gemm: " + what); }

// ---- The reduction plan -------------------------------------------------------------------------

// A leaf [lo, hi), then `merges` pops: value = stack.top + value (rounded if asked).
struct Step {
  std::int64_t lo = 0, hi = 0;
  int merges = 0;
};

struct Plan {
  std::vector<Step> steps;  // in k order, covering [0, K)
  bool init_zero = false;   // the fold starts its stack with 0.0f
  int capacity = 1;         // stack slots a tile needs
  bool round_leaves = false, round_merges = false;
};

void tree_steps(std::int64_t lo, std::int64_t hi, std::int64_t leaf, std::vector<Step>& out) {
  if (hi - lo <= leaf) {
    out.push_back({lo, hi, 0});
    return;
  }
  const std::int64_t mid = lo + (hi - lo) / 2;
  tree_steps(lo, mid, leaf, out);
  tree_steps(mid, hi, leaf, out);
  out.back().merges += 1;  // this node completes right after its right subtree
}

Plan make_plan(const Reduction& r, std::int64_t k) {
  if (r.leaf < 1) misuse("leaf width " + std::to_string(r.leaf) + " (must be >= 1)");
  Plan p;
  p.round_leaves = r.round_leaves;
  p.round_merges = r.round_merges;
  if (r.kind == Reduction::Kind::kFold) {
    p.init_zero = true;
    for (std::int64_t lo = 0; lo < k; lo += r.leaf) p.steps.push_back({lo, std::min(k, lo + r.leaf), 1});
  } else if (k > 0) {
    tree_steps(0, k, r.leaf, p.steps);
  }
  // Stack depth: simulate (a merge pops one and pushes one; the leaf pushes one at the end).
  int sp = p.init_zero ? 1 : 0, most = sp;
  for (const Step& s : p.steps) {
    sp = sp - s.merges + 1;
    if (sp < 1) misuse("internal: unbalanced reduction plan");
    most = std::max(most, sp);
  }
  if (!p.steps.empty() && sp != 1) misuse("internal: reduction plan leaves " + std::to_string(sp) + " values");
  p.capacity = std::max(1, most);
  return p;
}

// K blocks: runs of whole leaves of about kKC elements (a longer leaf is a block of its own).
struct KBlock {
  std::size_t first = 0, last = 0;  // steps [first, last)
  std::int64_t k0 = 0, k1 = 0;
};

std::vector<KBlock> k_blocks(const Plan& p) {
  std::vector<KBlock> out;
  std::size_t i = 0;
  while (i < p.steps.size()) {
    KBlock b{i, i, p.steps[i].lo, p.steps[i].lo};
    while (b.last < p.steps.size() &&
           (b.last == b.first || p.steps[b.last].hi - b.k0 <= kKC)) {
      b.k1 = p.steps[b.last].hi;
      ++b.last;
    }
    out.push_back(b);
    i = b.last;
  }
  return out;
}

// ---- Packing ------------------------------------------------------------------------------------

// A matrix seen as [K][X]: element (k, x) at data[k * sk + x * sx].
struct KxView {
  const void* data;
  DType dtype;
  std::int64_t sk, sx;
};


template <class T>
inline float widen(T v) {
  if constexpr (std::is_same_v<T, std::uint16_t>)
    return std::bit_cast<float>(static_cast<std::uint32_t>(v) << 16);  // bf16 -> f32, exact
  else
    return v;
}

// dst[panel][k][xi] for k in [0,kc), x = x0 + panel*P + xi, zero where x >= x0 + xc.
template <class T>
void pack_typed(const T* src, std::int64_t sk, std::int64_t sx, std::int64_t k0, std::int64_t kc,
                std::int64_t x0, std::int64_t xc, int P, float* dst) {
  const std::int64_t panels = (xc + P - 1) / P;
  for (std::int64_t p = 0; p < panels; ++p) {
    float* d = dst + p * kc * P;
    const std::int64_t xb = x0 + p * P;
    const int width = static_cast<int>(std::min<std::int64_t>(P, x0 + xc - xb));
    if (width < P) std::fill(d, d + kc * P, 0.0f);
    if (sx == 1) {
      // Rows of the source run along x: copy `width` contiguous values per k.
      for (std::int64_t k = 0; k < kc; ++k) {
        const T* s = src + (k0 + k) * sk + xb;
        float* dk = d + k * P;
        for (int xi = 0; xi < width; ++xi) dk[xi] = widen(s[xi]);
      }
    } else {
      // Source runs along k (or neither): walk k for each x.
      for (int xi = 0; xi < width; ++xi) {
        const T* s = src + k0 * sk + (xb + xi) * sx;
        for (std::int64_t k = 0; k < kc; ++k) d[k * P + xi] = widen(s[k * sk]);
      }
    }
  }
}

void pack_portable(const KxView& v, std::int64_t k0, std::int64_t kc, std::int64_t x0, std::int64_t xc,
                   int P, float* dst) {
  if (v.dtype == DType::kBF16)
    pack_typed(static_cast<const std::uint16_t*>(v.data), v.sk, v.sx, k0, kc, x0, xc, P, dst);
  else
    pack_typed(static_cast<const float*>(v.data), v.sk, v.sx, k0, kc, x0, xc, P, dst);
}

// ---- Micro-kernels ------------------------------------------------------------------------------
// Both compute, for a kMR x kNR tile, the steps [first,last) of one K block:
//   ap: packed A, ap[k * kMR + i]; bp: packed B, bp[k * kNR + j]; k relative to k0.
//   stack: the tile's pending values, stack[s * kTile + i * kNR + j]; sp: entries on entry.
// They return sp on exit. Per element they perform the same IEEE operations in the same order.

struct KernelArgs {
  const float* ap;
  const float* bp;
  const Step* steps;
  std::size_t nsteps;
  std::int64_t k0;
  float* stack;
  int sp;
  bool round_leaves, round_merges;
};

int kernel_portable(const KernelArgs& g) {
  float acc[kTile];
  int sp = g.sp;
  for (std::size_t s = 0; s < g.nsteps; ++s) {
    const Step& st = g.steps[s];
    std::fill(acc, acc + kTile, 0.0f);
    for (std::int64_t k = st.lo - g.k0; k < st.hi - g.k0; ++k) {
      const float* a = g.ap + k * kMR;
      const float* b = g.bp + k * kNR;
      for (int i = 0; i < kMR; ++i)
        for (int j = 0; j < kNR; ++j) acc[i * kNR + j] = std::fma(a[i], b[j], acc[i * kNR + j]);
    }
    if (g.round_leaves)
      for (float& v : acc) v = round_bf16(v);
    for (int m = 0; m < st.merges; ++m) {
      const float* left = g.stack + static_cast<std::ptrdiff_t>(--sp) * kTile;
      for (int e = 0; e < kTile; ++e) {
        const float v = left[e] + acc[e];
        acc[e] = g.round_merges ? round_bf16(v) : v;
      }
    }
    std::copy(acc, acc + kTile, g.stack + static_cast<std::ptrdiff_t>(sp++) * kTile);
  }
  return sp;
}

void store_row_portable(const float* v, int n, DType dtype, void* dst) {
  if (dtype == DType::kBF16) {
    auto* d = static_cast<std::uint16_t*>(dst);
    for (int j = 0; j < n; ++j) d[j] = to_bf16(v[j]).bits;
  } else {
    std::copy(v, v + n, static_cast<float*>(dst));
  }
}

#if defined(__x86_64__)
#define WS1_AVX2 __attribute__((target("avx2,fma")))

// Round to nearest even bf16, as ws1::to_bf16: NaN keeps sign and top payload, quiet bit set.
WS1_AVX2 inline __m256 round_bf16_avx2(__m256 x) {
  const __m256i b = _mm256_castps_si256(x);
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_and_si256(_mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb)), hi_mask);
  const __m256i quiet = _mm256_and_si256(_mm256_or_si256(b, _mm256_set1_epi32(0x00400000)), hi_mask);
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  return _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(quiet), nan);
}

WS1_AVX2 int kernel_avx2(const KernelArgs& g) {
  int sp = g.sp;
  for (std::size_t s = 0; s < g.nsteps; ++s) {
    const Step& st = g.steps[s];
    __m256 c[kMR][2];
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) c[i][0] = c[i][1] = _mm256_setzero_ps();
    const float* a = g.ap + (st.lo - g.k0) * kMR;
    const float* b = g.bp + (st.lo - g.k0) * kNR;
    for (std::int64_t k = st.lo; k < st.hi; ++k, a += kMR, b += kNR) {
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
      for (int i = 0; i < kMR; ++i) {
        const __m256 ai = _mm256_broadcast_ss(a + i);
        c[i][0] = _mm256_fmadd_ps(ai, b0, c[i][0]);
        c[i][1] = _mm256_fmadd_ps(ai, b1, c[i][1]);
      }
    }
    if (g.round_leaves) {
#pragma GCC unroll 6
      for (int i = 0; i < kMR; ++i) {
        c[i][0] = round_bf16_avx2(c[i][0]);
        c[i][1] = round_bf16_avx2(c[i][1]);
      }
    }
    for (int m = 0; m < st.merges; ++m) {
      const float* left = g.stack + static_cast<std::ptrdiff_t>(--sp) * kTile;
#pragma GCC unroll 6
      for (int i = 0; i < kMR; ++i) {
        c[i][0] = _mm256_add_ps(_mm256_loadu_ps(left + i * kNR), c[i][0]);
        c[i][1] = _mm256_add_ps(_mm256_loadu_ps(left + i * kNR + 8), c[i][1]);
        if (g.round_merges) {
          c[i][0] = round_bf16_avx2(c[i][0]);
          c[i][1] = round_bf16_avx2(c[i][1]);
        }
      }
    }
    float* top = g.stack + static_cast<std::ptrdiff_t>(sp++) * kTile;
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      _mm256_storeu_ps(top + i * kNR, c[i][0]);
      _mm256_storeu_ps(top + i * kNR + 8, c[i][1]);
    }
  }
  return sp;
}

WS1_AVX2 inline __m256 widen8_avx2(const std::uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// Full 16-wide panels of a bf16 source, vectorized; anything else goes to the portable packer.
// Pure data movement: the packed floats are the same either way.
WS1_AVX2 void pack_avx2(const KxView& v, std::int64_t k0, std::int64_t kc, std::int64_t x0, std::int64_t xc,
                        int P, float* dst) {
  if (v.dtype != DType::kBF16 || P != 16 || (v.sx != 1 && v.sk != 1)) {
    pack_portable(v, k0, kc, x0, xc, P, dst);
    return;
  }
  const auto* src = static_cast<const std::uint16_t*>(v.data);
  const std::int64_t full = xc / 16;
  for (std::int64_t p = 0; p < full; ++p) {
    float* d = dst + p * kc * 16;
    const std::int64_t xb = x0 + p * 16;
    if (v.sx == 1) {
      // [K][X] rows contiguous along x: 16 values per k.
      for (std::int64_t k = 0; k < kc; ++k) {
        const std::uint16_t* s = src + (k0 + k) * v.sk + xb;
        _mm256_storeu_ps(d + k * 16, widen8_avx2(s));
        _mm256_storeu_ps(d + k * 16 + 8, widen8_avx2(s + 8));
      }
      continue;
    }
    // Contiguous along k: transpose 8 x 8 blocks.
    for (int g = 0; g < 2; ++g) {
      const std::uint16_t* s = src + k0 + (xb + g * 8) * v.sx;
      std::int64_t k = 0;
      for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) r[i] = widen8_avx2(s + i * v.sx + k);
        const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
        const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
        const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
        const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
        const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
        const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
        const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
        const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        float* o = d + k * 16 + g * 8;
        _mm256_storeu_ps(o + 0 * 16, _mm256_permute2f128_ps(u0, u4, 0x20));
        _mm256_storeu_ps(o + 1 * 16, _mm256_permute2f128_ps(u1, u5, 0x20));
        _mm256_storeu_ps(o + 2 * 16, _mm256_permute2f128_ps(u2, u6, 0x20));
        _mm256_storeu_ps(o + 3 * 16, _mm256_permute2f128_ps(u3, u7, 0x20));
        _mm256_storeu_ps(o + 4 * 16, _mm256_permute2f128_ps(u0, u4, 0x31));
        _mm256_storeu_ps(o + 5 * 16, _mm256_permute2f128_ps(u1, u5, 0x31));
        _mm256_storeu_ps(o + 6 * 16, _mm256_permute2f128_ps(u2, u6, 0x31));
        _mm256_storeu_ps(o + 7 * 16, _mm256_permute2f128_ps(u3, u7, 0x31));
      }
      for (; k < kc; ++k)
        for (int i = 0; i < 8; ++i) d[k * 16 + g * 8 + i] = widen(s[i * v.sx + k]);
    }
  }
  if (full * 16 < xc) pack_portable(v, k0, kc, x0 + full * 16, xc - full * 16, P, dst + full * kc * 16);
}

// One output row segment: n values (n <= kNR) to dst as float32 or bf16 (round to nearest even).
WS1_AVX2 void store_row_avx2(const float* v, int n, DType dtype, void* dst) {
  if (dtype == DType::kBF16 && n == kNR) {
    const __m256i lo = _mm256_srli_epi32(_mm256_castps_si256(round_bf16_avx2(_mm256_loadu_ps(v))), 16);
    const __m256i hi = _mm256_srli_epi32(_mm256_castps_si256(round_bf16_avx2(_mm256_loadu_ps(v + 8))), 16);
    // packus interleaves 128-bit lanes: [lo0-3 hi0-3 lo4-7 hi4-7]; permute restores order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
    _mm256_storeu_si256(static_cast<__m256i*>(dst), packed);
    return;
  }
  store_row_portable(v, n, dtype, dst);
}

bool cpu_has_avx2_fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}
#else
bool cpu_has_avx2_fma() { return false; }
#endif

// The code one gemm() call runs: the AVX2+FMA set or the portable one (same results).
struct Impl {
  int (*kernel)(const KernelArgs&);
  void (*pack)(const KxView&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, int, float*);
  void (*store_row)(const float*, int, DType, void*);
};

Impl pick_impl(bool allow_simd) {
#if defined(__x86_64__)
  if (allow_simd && cpu_has_avx2_fma()) return {kernel_avx2, pack_avx2, store_row_avx2};
#endif
  (void)allow_simd;
  return {kernel_portable, pack_portable, store_row_portable};
}

// ---- Driver -------------------------------------------------------------------------------------

void check_view(const ConstMatrix& m, const char* what) {
  if (m.rows < 0 || m.cols < 0) misuse(std::string(what) + ": negative size");
  if (m.dtype != DType::kF32 && m.dtype != DType::kBF16)
    misuse(std::string(what) + ": dtype " + std::string(dtype_safetensors_name(m.dtype)) + " (F32 or BF16)");
  if (m.data == nullptr && m.rows * m.cols > 0) misuse(std::string(what) + ": no data");
}

// One operand's packing: the view, its block size along x (rows of A / columns of B), its panel
// width, and the whole operand packed up front when several jobs would otherwise repack it.
// Packed layout of block xb, K block kb: base + xb * blk * K + kb.k0 * blk, panels of kc * P.
struct Operand {
  KxView view;
  std::int64_t extent = 0, blk = 0;
  int P = 0;
  std::vector<float> pre;

  const float* block(const Impl& impl, std::int64_t xb, const KBlock& kb, std::int64_t K, float* scratch) const {
    if (!pre.empty()) return pre.data() + xb * blk * K + kb.k0 * blk;
    const std::int64_t x0 = xb * blk;
    impl.pack(view, kb.k0, kb.k1 - kb.k0, x0, std::min(blk, extent - x0), P, scratch);
    return scratch;
  }
};

constexpr std::int64_t kPrepackMaxFloats = std::int64_t{1} << 26;  // 256 MiB

void prepack(Operand& op, const Impl& impl, const std::vector<KBlock>& blocks, std::int64_t K, unsigned threads) {
  const std::int64_t nblk = (op.extent + op.blk - 1) / op.blk;
  op.pre.assign(static_cast<std::size_t>(nblk * op.blk * K), 0.0f);
  const auto nkb = static_cast<std::int64_t>(blocks.size());
  parallel_for(nblk * nkb, threads, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      const std::int64_t xb = i / nkb;
      const KBlock& kb = blocks[static_cast<std::size_t>(i % nkb)];
      const std::int64_t x0 = xb * op.blk;
      impl.pack(op.view, kb.k0, kb.k1 - kb.k0, x0, std::min(op.blk, op.extent - x0), op.P,
                op.pre.data() + xb * op.blk * K + kb.k0 * op.blk);
    }
  });
}

}  // namespace

ConstMatrix matrix(const Tensor& t) {
  if (t.dim() != 2) misuse("matrix(): tensor of rank " + std::to_string(t.dim()));
  return {t.data<void>(), t.dtype(), t.shape()[0], t.shape()[1], t.strides()[0], t.strides()[1]};
}

ConstMatrix matrix(const float* data, std::int64_t rows, std::int64_t cols) {
  return {data, DType::kF32, rows, cols, cols, 1};
}

ConstMatrix transposed(const ConstMatrix& m) {
  return {m.data, m.dtype, m.cols, m.rows, m.col_stride, m.row_stride};
}

ConstMatrix block(const ConstMatrix& m, std::int64_t r0, std::int64_t rows, std::int64_t c0,
                  std::int64_t cols) {
  if (r0 < 0 || rows < 0 || c0 < 0 || cols < 0 || r0 + rows > m.rows || c0 + cols > m.cols)
    misuse("block(): range outside the matrix");
  const std::size_t esize = dtype_size(m.dtype);
  const auto* base = static_cast<const std::byte*>(m.data);
  const std::int64_t off = r0 * m.row_stride + c0 * m.col_stride;
  return {base == nullptr ? nullptr : base + off * static_cast<std::int64_t>(esize), m.dtype, rows, cols,
          m.row_stride, m.col_stride};
}

Matrix output(Tensor& t) {
  if (t.dim() != 2 || !t.is_contiguous()) misuse("output(): needs a contiguous rank-2 tensor");
  return {t.data<void>(), t.dtype(), t.shape()[0], t.shape()[1], t.shape()[1]};
}

bool simd_kernel_available() { return cpu_has_avx2_fma(); }

void gemm(const ConstMatrix& a, const ConstMatrix& b, const Matrix& c, const Reduction& r,
          const Options& opt) {
  check_view(a, "a");
  check_view(b, "b");
  if (a.cols != b.rows)
    misuse("a is " + std::to_string(a.rows) + "x" + std::to_string(a.cols) + ", b is " +
           std::to_string(b.rows) + "x" + std::to_string(b.cols));
  if (c.rows != a.rows || c.cols != b.cols) misuse("c does not have a's rows and b's columns");
  if (c.dtype != DType::kF32 && c.dtype != DType::kBF16) misuse("c: dtype must be F32 or BF16");
  const std::int64_t M = a.rows, N = b.cols, K = a.cols;
  if (M == 0 || N == 0) return;
  if (c.data == nullptr) misuse("c: no data");

  const Plan plan = make_plan(r, K);
  const std::vector<KBlock> blocks = k_blocks(plan);
  std::int64_t kc_max = 0;
  for (const KBlock& kb : blocks) kc_max = std::max(kc_max, kb.k1 - kb.k0);
  const Impl impl = pick_impl(opt.allow_simd);

  const std::int64_t mb = std::min(kMB, (M + kMR - 1) / kMR * kMR);
  const std::int64_t nb = std::min(kNB, (N + kNR - 1) / kNR * kNR);
  const std::int64_t jobs_m = (M + mb - 1) / mb, jobs_n = (N + nb - 1) / nb;
  Operand A{{a.data, a.dtype, a.col_stride, a.row_stride}, M, mb, kMR, {}};  // A as [K][M]
  Operand B{{b.data, b.dtype, b.row_stride, b.col_stride}, N, nb, kNR, {}};  // B as [K][N]
  if (jobs_n > 1 && jobs_m * mb * K <= kPrepackMaxFloats) prepack(A, impl, blocks, K, opt.threads);
  if (jobs_m > 1 && jobs_n * nb * K <= kPrepackMaxFloats) prepack(B, impl, blocks, K, opt.threads);

  const std::int64_t tiles_m = mb / kMR, tiles_n = nb / kNR;
  parallel_for(jobs_m * jobs_n, opt.threads, [&](std::int64_t job_begin, std::int64_t job_end) {
    std::vector<float> ascratch(A.pre.empty() ? static_cast<std::size_t>(mb * kc_max) : 0);
    std::vector<float> bscratch(B.pre.empty() ? static_cast<std::size_t>(nb * kc_max) : 0);
    std::vector<float> stack(static_cast<std::size_t>(tiles_m * tiles_n * plan.capacity * kTile));
    for (std::int64_t job = job_begin; job < job_end; ++job) {
      const std::int64_t jm = job / jobs_n, jn = job % jobs_n;
      const std::int64_t m0 = jm * mb, n0 = jn * nb;
      const std::int64_t tm = (std::min(mb, M - m0) + kMR - 1) / kMR;
      const std::int64_t tn = (std::min(nb, N - n0) + kNR - 1) / kNR;
      auto tile_stack = [&](std::int64_t it, std::int64_t jt) {
        return stack.data() + (it * tiles_n + jt) * plan.capacity * kTile;
      };
      int sp = 0;
      if (plan.init_zero) {
        for (std::int64_t it = 0; it < tm; ++it)
          for (std::int64_t jt = 0; jt < tn; ++jt) std::fill(tile_stack(it, jt), tile_stack(it, jt) + kTile, 0.0f);
        sp = 1;
      }
      for (const KBlock& kb : blocks) {
        const std::int64_t kc = kb.k1 - kb.k0;
        const float* ap = A.block(impl, jm, kb, K, ascratch.data());
        const float* bp = B.block(impl, jn, kb, K, bscratch.data());
        int sp_out = sp;
        for (std::int64_t jt = 0; jt < tn; ++jt)
          for (std::int64_t it = 0; it < tm; ++it)
            sp_out = impl.kernel({ap + it * kc * kMR, bp + jt * kc * kNR, plan.steps.data() + kb.first,
                                  kb.last - kb.first, kb.k0, tile_stack(it, jt), sp, plan.round_leaves,
                                  plan.round_merges});
        sp = sp_out;
      }
      // Slot 0 holds the fold total or the tree root (nothing when K = 0: zeros).
      const std::vector<float> zeros(sp == 0 ? kTile : 0, 0.0f);
      const std::size_t esize = dtype_size(c.dtype);
      for (std::int64_t it = 0; it < tm; ++it)
        for (std::int64_t jt = 0; jt < tn; ++jt) {
          const float* v = sp == 0 ? zeros.data() : tile_stack(it, jt);
          const std::int64_t n = n0 + jt * kNR;
          const int width = static_cast<int>(std::min<std::int64_t>(kNR, N - n));
          for (int i = 0; i < kMR && m0 + it * kMR + i < M; ++i) {
            auto* dst = static_cast<std::byte*>(c.data) +
                        ((m0 + it * kMR + i) * c.row_stride + n) * static_cast<std::int64_t>(esize);
            impl.store_row(v + i * kNR, width, c.dtype, dst);
          }
        }
    }
  });
}

Tensor gemm(const ConstMatrix& a, const ConstMatrix& b, DType out, const Reduction& r,
            const Options& opt) {
  Tensor t(out, {a.rows, b.cols});
  gemm(a, b, output(t), r, opt);
  return t;
}

}  // namespace ws1::ops::gemm

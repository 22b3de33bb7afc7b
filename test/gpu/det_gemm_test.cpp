// det_gemm on cuda_bf16 (cuda/ops/det_gemm.cu, Option A): FP32 accumulation, one rounding to
// bf16, the contract's K shards (OpContext::k_shards) folded in FP32 in shard order, and the
// tensor-parallel rank's FP32 partial (OpContext::k_partial). Checked on fresh random inputs,
// outputs poisoned by the op (NaN where nothing was written):
// Shapes cover the forward's two schedules (shards on one CTA, the total in registers; shards
// on separate CTAs where the tiles alone leave SMs idle, folded by the last to arrive), the
// backward's 128 x 256 tiles, the composite and the fallback paths.
//   1. forward / backward against an FP64 host reference on sampled rows, judged by the
//      contract's bf16 reduction rows (forward_accuracy for c, gradient_accuracy for da, db),
//      every element written (a NaN is a violation);
//   2. k_shards = 2, 4: the forward equals bf16(p0 + p1 + ...) of the k_partial calls on the
//      shards, bit for bit (the tensor-core path, the composite path, the fallback);
//   3. batch invariance: rows of an M = 1, 7, 59, 512 call equal the same rows of M = 8192
//      (K 4096, N 1024), forward and da, bit for bit;
//   4. run-to-run bit equality;
//   5. ragged shapes (not multiples of the 128 x 128 x 64 tiles; shapes that take the CUDA-core
//      fallback) against the reference;
//   6. a cancellation probe: small integers whose first half of K is cancelled by the second up
//      to |c| <= 45, while the partial sums are large integers not representable in bf16: an FP32
//      kernel gets every element exactly (all partial sums are integers < 2^24), a kernel that
//      rounds any partial to bf16 does not.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "bf16_patterns.hpp"
#include "gpu_test_support.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;

namespace {

const Op& det_gemm() { return *find_op_impl("det_gemm"); }

// Unit normal values (Box-Muller over a xorshift stream), rounded to bf16.
Tensor normal_bf16(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  Tensor t(DType::kBF16, {rows, cols});
  auto* p = t.data<std::uint16_t>();
  ws1_test::Xorshift32 g(seed);
  auto uniform = [&] { return (static_cast<double>(g.next() >> 8) + 0.5) / 16777216.0; };
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double z = std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
    p[i] = to_bf16(static_cast<float>(z)).bits;
  }
  return t;
}

Tensor cols(const Tensor& t, std::int64_t lo, std::int64_t hi) { return t.slice(1, lo, hi).contiguous(); }
Tensor rows(const Tensor& t, std::int64_t lo, std::int64_t hi) { return t.slice(0, lo, hi).contiguous(); }

OpContext with_shards(std::int64_t t, bool partial = false) {
  OpContext c;
  c.k_shards = t;
  c.k_partial = partial;
  return c;
}

Tensors forward(const Tensor& a, const Tensor& b, const OpContext& ctx) {
  auto r = test::cuda_backend().forward(det_gemm(), Tensors{{"a", a}, {"b", b}}, ctx);
  REQUIRE(r.ok());
  return std::move(r).value();
}
Tensors backward(const Tensor& a, const Tensor& b, const Tensor& dy) {
  auto r = test::cuda_backend().backward(det_gemm(), Tensors{{"a", a}, {"b", b}, {"dy.c", dy}}, with_shards(2));
  REQUIRE(r.ok());
  return std::move(r).value();
}
const Tensor& get(const Tensors& ts, std::string_view name) {
  const Tensor* t = find_tensor(ts, name);
  REQUIRE(t != nullptr);
  return *t;
}

float value(const Tensor& t, std::int64_t i) {
  return t.dtype() == DType::kF32 ? t.data<float>()[i] : from_bf16(bf16{t.data<std::uint16_t>()[i]});
}
std::vector<double> widen(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<double> v(static_cast<std::size_t>(c.numel()));
  for (std::int64_t i = 0; i < c.numel(); ++i) v[static_cast<std::size_t>(i)] = value(c, i);
  return v;
}

// ‖out − x·y‖ / ‖x·y‖ over the output rows `which` (every row when empty), x [R][Q] given as a
// function (so that a transpose needs no copy), y [Q][C] dense, in FP64; fails on a NaN in out.
struct Product {
  std::int64_t R, C, Q;
  std::function<double(std::int64_t, std::int64_t)> x;  // x(r, q)
  std::vector<double> y;                                // y[q * C + c]
};
// The rows `which` of out and of the FP64 product p (rounded to float32, the reference dtype),
// judged by the contract's bf16 reduction row of `judgment`.
AccuracyTensor judged_rows(const char* name, Judgment judgment, const Product& p, const Tensor& out,
                           std::vector<std::int64_t> which) {
  REQUIRE(out.shape() == Shape{p.R, p.C});
  const Tensor o = out.contiguous();
  const auto n = static_cast<std::int64_t>(which.size());
  Tensor cand(DType::kF32, {n, p.C}), ref(DType::kF32, {n, p.C});
  std::vector<double> acc(static_cast<std::size_t>(p.C));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t r = which[static_cast<std::size_t>(i)];
    std::fill(acc.begin(), acc.end(), 0.0);
    for (std::int64_t q = 0; q < p.Q; ++q) {
      const double xv = p.x(r, q);
      if (xv == 0) continue;
      const double* yq = p.y.data() + q * p.C;
      for (std::int64_t c = 0; c < p.C; ++c) acc[static_cast<std::size_t>(c)] += xv * yq[c];
    }
    for (std::int64_t c = 0; c < p.C; ++c) {
      cand.data<float>()[i * p.C + c] = static_cast<float>(value(o, r * p.C + c));
      ref.data<float>()[i * p.C + c] = static_cast<float>(acc[static_cast<std::size_t>(c)]);
    }
  }
  const Contract& contract = test::workload("ws1-smoke").contract;
  auto row = contract.threshold(judgment, OpClass::kReduction, ContractDType::kBFloat16, "sm_90");
  REQUIRE(row);
  REQUIRE(row->tolerance.has_value());
  return judge_accuracy(name, cand, ref, *row->tolerance);
}

// The transpose of a row-major [rows][cols] array.
std::vector<double> transpose(const std::vector<double>& v, std::int64_t rows, std::int64_t cols) {
  std::vector<double> t(v.size());
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) t[static_cast<std::size_t>(j * rows + i)] = v[static_cast<std::size_t>(i * cols + j)];
  return t;
}

std::vector<std::int64_t> sample_rows(std::int64_t M, std::int64_t most) {
  std::vector<std::int64_t> r;
  const std::int64_t step = std::max<std::int64_t>(1, M / most);
  for (std::int64_t m = 0; m < M; m += step) r.push_back(m);
  if (r.back() != M - 1) r.push_back(M - 1);
  return r;
}

struct GemmDims {
  std::int64_t M, N, K, t;
};

void check_forward_accuracy(const GemmDims& d, std::uint32_t seed) {
  const Tensor a = normal_bf16(d.M, d.K, seed), b = normal_bf16(d.K, d.N, seed + 1);
  const Tensors out = forward(a, b, with_shards(d.t));
  const Tensor& c = get(out, "c");
  REQUIRE(c.dtype() == DType::kBF16);
  const std::vector<double> av = widen(a), bv = widen(b);
  const Product p{d.M, d.N, d.K, [&](std::int64_t m, std::int64_t k) { return av[static_cast<std::size_t>(m * d.K + k)]; },
                  bv};
  const AccuracyTensor e = judged_rows("c", Judgment::kForwardAccuracy, p, c, sample_rows(d.M, 192));
  INFO("forward M=" << d.M << " N=" << d.N << " K=" << d.K << " k_shards=" << d.t << ": " << e.violations
                    << " violations, max abs error " << e.abs_error.max);
  CHECK(passed(e));
}

void check_backward_accuracy(const GemmDims& d, std::uint32_t seed) {
  const Tensor a = normal_bf16(d.M, d.K, seed), b = normal_bf16(d.K, d.N, seed + 1), dy = normal_bf16(d.M, d.N, seed + 2);
  const Tensors out = backward(a, b, dy);
  const std::vector<double> av = widen(a), bv = widen(b), gv = widen(dy);
  // da[m][k] = sum_n dy[m][n] b[k][n]; db[k][n] = sum_m a[m][k] dy[m][n].
  const Product pa{d.M, d.K, d.N, [&](std::int64_t m, std::int64_t n) { return gv[static_cast<std::size_t>(m * d.N + n)]; },
                   transpose(bv, d.K, d.N)};
  const Product pb{d.K, d.N, d.M, [&](std::int64_t k, std::int64_t m) { return av[static_cast<std::size_t>(m * d.K + k)]; },
                   gv};
  const AccuracyTensor ea = judged_rows("da", Judgment::kGradientAccuracy, pa, get(out, "da"), sample_rows(d.M, 128));
  const AccuracyTensor eb = judged_rows("db", Judgment::kGradientAccuracy, pb, get(out, "db"), sample_rows(d.K, 128));
  INFO("backward M=" << d.M << " N=" << d.N << " K=" << d.K << ": da " << ea.violations << " violations, db "
                     << eb.violations);
  CHECK(passed(ea));
  CHECK(passed(eb));
}

// Elements whose bits differ (x and y of one dtype and size).
std::int64_t differing(const Tensor& x, const Tensor& y) {
  REQUIRE(x.dtype() == y.dtype());
  REQUIRE(x.numel() == y.numel());
  const Tensor cx = x.contiguous(), cy = y.contiguous();
  const std::size_t es = dtype_size(cx.dtype());
  const auto* px = cx.data<std::uint8_t>();
  const auto* py = cy.data<std::uint8_t>();
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < cx.numel(); ++i) n += std::memcmp(px + i * es, py + i * es, es) != 0;
  return n;
}

}  // namespace

TEST_CASE("det_gemm forward within one bf16 rounding of the FP64 product", "[gpu][det_gemm]") {
  std::uint32_t seed = 100;
  // Shards on one CTA (many tiles) and on separate CTAs (few tiles: M = 1, or N and M small).
  for (const GemmDims& d : {GemmDims{256, 384, 2048, 1}, GemmDims{256, 384, 2048, 2}, GemmDims{128, 1024, 4096, 4},
                        GemmDims{1024, 512, 12288, 2}, GemmDims{512, 4096, 4096, 2}, GemmDims{300, 2056, 1024, 4},
                        GemmDims{1, 12288, 4096, 2}})
    check_forward_accuracy(d, seed += 10);
}

TEST_CASE("det_gemm backward within one bf16 rounding of the FP64 products", "[gpu][det_gemm]") {
  std::uint32_t seed = 200;
  for (const GemmDims& d : {GemmDims{512, 384, 1024, 1}, GemmDims{1024, 1024, 512, 1}, GemmDims{512, 4096, 2048, 1}})
    check_backward_accuracy(d, seed += 10);
}

TEST_CASE("det_gemm ragged and fallback shapes within one bf16 rounding", "[gpu][det_gemm]") {
  std::uint32_t seed = 300;
  // Ragged tiles on the tensor cores; shards not multiples of 16 (composite path, 24 and 2072);
  // contiguous dimensions not multiples of 8 (CUDA-core fallback); tiny.
  for (const GemmDims& d : {GemmDims{1000, 1000, 1024, 2}, GemmDims{1000, 1000, 1000, 2}, GemmDims{300, 264, 48, 2},
                        GemmDims{129, 136, 4144, 2}, GemmDims{77, 130, 33, 2}, GemmDims{5, 64, 20, 3}, GemmDims{1, 8, 8, 1},
                        GemmDims{3, 24, 40, 1}, GemmDims{9, 16, 7, 4}})
    check_forward_accuracy(d, seed += 10);
  for (const GemmDims& d : {GemmDims{1000, 1000, 1000, 1}, GemmDims{77, 130, 33, 1}, GemmDims{333, 72, 136, 1}, GemmDims{7, 5, 3, 1}})
    check_backward_accuracy(d, seed += 10);
}

TEST_CASE("det_gemm forward with k_shards equals bf16 of the folded k_partial calls, bit for bit", "[gpu][det_gemm]") {
  std::uint32_t seed = 400;
  for (const GemmDims& d : {GemmDims{256, 384, 2048, 2}, GemmDims{256, 384, 2048, 4}, GemmDims{300, 264, 48, 2},
                        GemmDims{129, 136, 4144, 2}, GemmDims{100, 136, 1000, 2}, GemmDims{70, 130, 96, 4},
                        GemmDims{64, 256, 4104, 2}, GemmDims{8, 128, 12288, 2}, GemmDims{512, 4096, 4096, 2},
                        GemmDims{256, 4096, 2048, 4}, GemmDims{77, 2048, 48, 2},
                        // shards of 7, 8, 8 with M odd: the composite path's copies of a must be
                        // 16-byte aligned like a fresh tensor, or shards 1 and 2 would take the
                        // fallback there and the tensor cores in their k_partial calls
                        GemmDims{7, 136, 23, 3}}) {
    const Tensor a = normal_bf16(d.M, d.K, seed += 10), b = normal_bf16(d.K, d.N, seed + 1);
    const Tensor c = get(forward(a, b, with_shards(d.t)), "c");
    std::vector<float> total(static_cast<std::size_t>(d.M * d.N), 0.0f);
    for (std::int64_t r = 0; r < d.t; ++r) {
      const std::int64_t lo = r * d.K / d.t, hi = (r + 1) * d.K / d.t;
      // k_partial ignores k_shards: the rank's call is one shard.
      const Tensor p = get(forward(cols(a, lo, hi), rows(b, lo, hi), with_shards(d.t, true)), "c");
      REQUIRE(p.dtype() == DType::kF32);
      REQUIRE(p.shape() == Shape{d.M, d.N});
      const Tensor pc = p.contiguous();
      for (std::size_t i = 0; i < total.size(); ++i) {
        const float v = pc.data<float>()[i];
        total[i] = r == 0 ? v : total[i] + v;
      }
    }
    Tensor want(DType::kBF16, {d.M, d.N});
    for (std::size_t i = 0; i < total.size(); ++i) want.data<std::uint16_t>()[i] = to_bf16(total[i]).bits;
    INFO("M=" << d.M << " N=" << d.N << " K=" << d.K << " k_shards=" << d.t);
    CHECK(differing(c, want) == 0);
  }
}

TEST_CASE("det_gemm rows of c do not depend on M (shards on separate CTAs at small M), bit for bit", "[gpu][det_gemm]") {
  const std::int64_t M = 8192, K = 4096, N = 4096;
  const Tensor a = normal_bf16(M, K, 601), b = normal_bf16(K, N, 602);
  const Tensor c = get(forward(a, b, with_shards(2)), "c");
  for (const std::int64_t m : {1, 7, 59, 512}) {
    INFO("N = 4096, M=" << m << " vs 8192");
    CHECK(differing(get(forward(rows(a, 0, m), b, with_shards(2)), "c"), rows(c, 0, m)) == 0);
  }
}

TEST_CASE("det_gemm rows of c and da do not depend on M, bit for bit; runs repeat bit for bit", "[gpu][det_gemm]") {
  const std::int64_t M = 8192, K = 4096, N = 1024;
  const Tensor a = normal_bf16(M, K, 501), b = normal_bf16(K, N, 502), dy = normal_bf16(M, N, 503);
  for (const std::int64_t t : {std::int64_t{2}, std::int64_t{1}}) {
    const Tensor c = get(forward(a, b, with_shards(t)), "c");
    CHECK(differing(c, get(forward(a, b, with_shards(t)), "c")) == 0);  // run to run
    for (const std::int64_t m : {1, 7, 59, 512}) {
      INFO("k_shards=" << t << ", M=" << m << " vs 8192");
      CHECK(differing(get(forward(rows(a, 0, m), b, with_shards(t)), "c"), rows(c, 0, m)) == 0);
    }
  }
  const Tensors full = backward(a, b, dy);
  const Tensors again = backward(a, b, dy);
  CHECK(differing(get(full, "da"), get(again, "da")) == 0);
  CHECK(differing(get(full, "db"), get(again, "db")) == 0);
  for (const std::int64_t m : {1, 7, 59, 512}) {
    INFO("da, M=" << m << " vs 8192");
    const Tensors part = backward(rows(a, 0, m), b, rows(dy, 0, m));
    CHECK(differing(get(part, "da"), rows(get(full, "da"), 0, m)) == 0);
  }
}

TEST_CASE("det_gemm cancellation probe: partial sums not representable in bf16, exact result", "[gpu][det_gemm]") {
  // a[m][k + H] = a[m][k], b[k + H][n] = -b[k][n] (H = K / 2), except the last row of b, moved by
  // d[n] in [-3, 3]: c[m][n] = a[m][K-1] * d[n], |c| <= 45 (exact in bf16). Every partial sum is
  // an integer below 4096 * 225 < 2^24: exact in FP32 in any order.
  struct Case {
    std::int64_t M, N, K, t;
  };
  for (const Case& s : {Case{64, 64, 4096, 2}, Case{64, 64, 4096, 1}, Case{40, 72, 1024, 4}, Case{19, 24, 72, 2},
                        Case{16, 2048, 4096, 2}, Case{8, 4096, 2048, 4}}) {
    ws1_test::Xorshift32 g(static_cast<std::uint32_t>(s.M * 131 + s.K + s.t));
    const auto small = [&](int lim) { return static_cast<int>(g.next() % static_cast<unsigned>(2 * lim + 1)) - lim; };
    const std::int64_t H = s.K / 2;
    std::vector<int> ai(static_cast<std::size_t>(s.M * s.K)), bi(static_cast<std::size_t>(s.K * s.N));
    for (std::int64_t m = 0; m < s.M; ++m)
      for (std::int64_t k = 0; k < H; ++k)
        ai[static_cast<std::size_t>(m * s.K + k)] = ai[static_cast<std::size_t>(m * s.K + H + k)] = small(15);
    for (std::int64_t k = 0; k < H; ++k)
      for (std::int64_t n = 0; n < s.N; ++n) {
        const int v = small(15);
        bi[static_cast<std::size_t>(k * s.N + n)] = v;
        bi[static_cast<std::size_t>((H + k) * s.N + n)] = -v;
      }
    for (std::int64_t n = 0; n < s.N; ++n) {
      int& v = bi[static_cast<std::size_t>((s.K - 1) * s.N + n)];
      int d = small(3);
      if (v + d > 15 || v + d < -15) d = -d;
      v += d;
    }
    Tensor a(DType::kBF16, {s.M, s.K}), b(DType::kBF16, {s.K, s.N});
    for (std::size_t i = 0; i < ai.size(); ++i) a.data<std::uint16_t>()[i] = to_bf16(static_cast<float>(ai[i])).bits;
    for (std::size_t i = 0; i < bi.size(); ++i) b.data<std::uint16_t>()[i] = to_bf16(static_cast<float>(bi[i])).bits;
    const Tensor c = get(forward(a, b, with_shards(s.t)), "c").contiguous();
    std::int64_t wrong = 0, unrepresentable = 0, largest = 0;
    for (std::int64_t m = 0; m < s.M; ++m)
      for (std::int64_t n = 0; n < s.N; ++n) {
        std::int64_t exact = 0, half = 0;
        for (std::int64_t k = 0; k < s.K; ++k) {
          exact += static_cast<std::int64_t>(ai[static_cast<std::size_t>(m * s.K + k)]) * bi[static_cast<std::size_t>(k * s.N + n)];
          if (k == H - 1) half = exact;
        }
        largest = std::max(largest, std::abs(exact));
        if (static_cast<double>(round_bf16(static_cast<float>(half))) != static_cast<double>(half)) ++unrepresentable;
        wrong += static_cast<double>(value(c, m * s.N + n)) != static_cast<double>(exact);
      }
    INFO("M=" << s.M << " N=" << s.N << " K=" << s.K << " k_shards=" << s.t << ": " << unrepresentable << " of "
              << s.M * s.N << " half-K sums not bf16-representable");
    REQUIRE(largest <= 45);
    if (s.K >= 1024) CHECK(unrepresentable * 2 > s.M * s.N);  // the probe bites
    CHECK(wrong == 0);
  }
}

TEST_CASE("det_gemm with K = 0 gives zeros", "[gpu][det_gemm]") {
  const Tensor a(DType::kBF16, {5, 0}), b(DType::kBF16, {0, 24});
  for (const bool partial : {false, true}) {
    const Tensor c = get(forward(a, b, with_shards(2, partial)), "c").contiguous();
    REQUIRE(c.shape() == Shape{5, 24});
    for (std::int64_t i = 0; i < c.numel(); ++i) CHECK(value(c, i) == 0.0f);
  }
}

// det_gemm (Option A, DESIGN §3.1): the FP32 reference against PyTorch float64; the cpu_bf16
// candidate against an independent, literal implementation of the declared order (per shard an
// FP32 fma chain from zero, shard partials added in order, one rounding), bit for bit; the tp2
// identity with FP32 partials; batch invariance; accuracy on the fixtures that were red under
// Option B; the shared GEMM helper's kernels; and the planted defects (BF16 tree nodes, a split
// chosen by M, TP partials rounded to bf16, TF32), each red where it should be.
#include <chrono>
#include <cmath>
#include <ctime>
#include <functional>
#include <random>
#include <bit>
#include <cstring>

#include "gemm_cpu.hpp"
#include "op_test_support.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;
using namespace ws1::test;

namespace {

const Op& op() {
  const Op* o = find_op_impl("det_gemm");
  REQUIRE(o != nullptr);
  return *o;
}

// The shard count the shipped contract declares (never a literal in the test).
std::int64_t contract_shards() {
  const auto& d = contract().declarations.det_gemm_k_split;
  REQUIRE(d.has_value());
  return d->shards;
}

OpContext declared_context() {
  OpContext ctx = default_context();
  ctx.k_shards = contract_shards();
  return ctx;
}

const std::map<std::string, std::string> kRename = {{"in.A", "a"}, {"in.B", "b"}, {"dy.C", "dy.c"}};

// ---- An independent, literal implementation of the declared order ----------------------------
// out[m][n] = sum over k < K of x[m*K + k] * y[k*N + n], float buffers: per shard
// [r*K/t, (r+1)*K/t) an fma chain from 0.0f in increasing k; total = p0, then total + p_r.
std::vector<float> declared_sum(const std::vector<float>& x, const std::vector<float>& y,
                                std::int64_t M, std::int64_t K, std::int64_t N, std::int64_t t) {
  std::vector<float> out(static_cast<std::size_t>(M * N));
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      float total = 0.0f;
      for (std::int64_t r = 0; r < t; ++r) {
        float p = 0.0f;
        for (std::int64_t k = r * K / t; k < (r + 1) * K / t; ++k) p = std::fma(x[m * K + k], y[k * N + n], p);
        total = r == 0 ? p : total + p;
      }
      out[static_cast<std::size_t>(m * N + n)] = total;
    }
  return out;
}

Tensor bf16_of(const std::vector<float>& v, Shape shape) {
  Tensor t(DType::kBF16, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.data<std::uint16_t>()[i] = to_bf16(v[i]).bits;
  return t;
}

// Transpose of a row-major [R,C] float buffer.
std::vector<float> transpose(const std::vector<float>& v, std::int64_t R, std::int64_t C) {
  std::vector<float> t(v.size());
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c) t[c * R + r] = v[r * C + c];
  return t;
}

Tensors inputs(const Tensor& a, const Tensor& b) { return {{"a", a}, {"b", b}}; }

// bf16(p0 + p1 + ...) of FP32 partials, in order: the all-reduce of the tp transform.
Tensor all_reduce(const std::vector<Tensor>& partials) {
  std::vector<float> total = floats(partials.front());
  for (std::size_t r = 1; r < partials.size(); ++r) {
    const std::vector<float> p = floats(partials[r]);
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += p[i];
  }
  return bf16_of(total, partials.front().shape());
}

// The rank partials of c = a b over t contiguous K shards, each a k_partial call.
std::vector<Tensor> rank_partials(const Tensor& a, const Tensor& b, std::int64_t t,
                                  const std::function<Result<Tensors>(const Tensors&, const OpContext&)>& fwd) {
  OpContext rank = declared_context();
  rank.k_partial = true;
  const std::int64_t K = a.shape()[1];
  std::vector<Tensor> out;
  for (std::int64_t r = 0; r < t; ++r) {
    const std::int64_t lo = r * K / t, hi = (r + 1) * K / t;
    out.push_back(get(fwd(inputs(a.slice(1, lo, hi), b.slice(0, lo, hi)), rank), "c"));
  }
  return out;
}

Result<Tensors> candidate_forward(const Tensors& in, const OpContext& ctx) { return op().cpu_forward(in, ctx); }

// ---- Planted defects ----------------------------------------------------------------------
namespace g = ops::gemm;

// PLANTED: Option B's BF16 tree nodes (FP32 leaves of 32 rounded to bf16, bf16 merges).
Result<Tensors> planted_bf16_tree(const Tensors& in, const OpContext&) {
  const Tensor& a = *find_tensor(in, "a");
  const Tensor& b = *find_tensor(in, "b");
  return Tensors{{"c", g::gemm(g::matrix(a), g::matrix(b), DType::kBF16, g::bf16_tree(32), {})}};
}

// PLANTED: TP partials rounded to bf16 before the sum (kept as float32, so the dtype check
// alone cannot see it).
Result<Tensors> planted_rounded_partials(const Tensors& in, const OpContext& ctx) {
  auto out = op().cpu_forward(in, ctx);
  if (!out || !ctx.k_partial) return out;
  Tensor& c = (*out)[0].tensor;
  float* p = c.data<float>();
  for (std::int64_t i = 0; i < c.numel(); ++i) p[i] = round_bf16(p[i]);
  return out;
}

// PLANTED: a split-K chosen by M (small calls cut K into 4 FP32 partials, as a decode path
// tuned for occupancy would).
Result<Tensors> planted_split_by_m(const Tensors& in, const OpContext& ctx) {
  OpContext c = ctx;
  if (find_tensor(in, "a")->shape()[0] < 64) c.k_shards = 4;
  return op().cpu_forward(in, c);
}

// "TF32 on": the operands rounded to TF32 (10 explicit mantissa bits) before the product.
Result<Tensors> tf32_operands(const Tensors& in, const OpContext& ctx) {
  Tensors t = in;
  for (auto& nt : t) {
    std::vector<float> v = floats(nt.tensor);
    for (float& x : v) {
      auto u = std::bit_cast<std::uint32_t>(x);
      u = (u + 0x0FFFu + ((u >> 13) & 1u)) & ~0x1FFFu;  // RNE to 10 bits
      x = std::bit_cast<float>(u);
    }
    nt.tensor = bf16_of(v, nt.tensor.shape());  // bf16 holds every value exactly: see the test
  }
  return op().cpu_forward(t, ctx);
}

}  // namespace

TEST_CASE("det_gemm reference agrees with PyTorch float64 within the float32 rows", "[ops][det_gemm]") {
  auto f = oracle("det_gemm");
  const Tensors in = oracle_inputs(*f, kRename);
  const OpContext ctx = declared_context();
  const auto fwd = op().reference_forward(in, ctx);
  const Tensor& c = get(fwd, "c");
  CHECK(c.dtype() == DType::kF32);  // spec §3.1 condition 4, §11.1 item 2: the gold is FP32
  const auto fa = agree(c, *f->find("ref64.C"),
                        tolerance(Judgment::kForwardAccuracy, "det_gemm", ContractDType::kFloat32));
  CHECK(fa.violations == 0);
  CHECK(fa.max_abs < tolerance(Judgment::kForwardAccuracy, "det_gemm", ContractDType::kBFloat16).atol / 100);

  const auto bwd = op().reference_backward(in, ctx);
  const auto grad_tol = tolerance(Judgment::kGradientAccuracy, "det_gemm", ContractDType::kFloat32);
  const auto ga = agree(get(bwd, "da"), *f->find("gref64.A"), grad_tol);
  const auto gb = agree(get(bwd, "db"), *f->find("gref64.B"), grad_tol);
  CHECK(get(bwd, "da").dtype() == DType::kF32);
  CHECK(ga.violations == 0);
  CHECK(gb.violations == 0);
  const double bf16_atol = tolerance(Judgment::kGradientAccuracy, "det_gemm", ContractDType::kBFloat16).atol;
  CHECK(ga.max_abs < bf16_atol / 100);
  CHECK(gb.max_abs < bf16_atol / 100);
}

TEST_CASE("det_gemm candidate is the declared Option A order bit for bit (independent implementation)", "[ops][det_gemm]") {
  SECTION("oracle inputs, forward and both gradients, the declared split") {
    auto f = oracle("det_gemm");
    const OpContext ctx = declared_context();
    const Tensors in = oracle_inputs(*f, kRename);
    const Tensor& a = *find_tensor(in, "a");
    const Tensor& b = *find_tensor(in, "b");
    const Tensor& dy = *find_tensor(in, "dy.c");
    const std::int64_t M = a.shape()[0], K = a.shape()[1], N = b.shape()[1];
    const auto fa = floats(a), fb = floats(b), fdy = floats(dy);
    const auto fwd = op().cpu_forward(in, ctx);
    CHECK(get(fwd, "c").dtype() == DType::kBF16);
    CHECK(bits_equal(get(fwd, "c"), bf16_of(declared_sum(fa, fb, M, K, N, ctx.k_shards), {M, N})));
    const auto bwd = op().cpu_backward(in, ctx);
    // da = dy @ b^T over N, db = a^T @ dy over M: one chain each (no split in the backward).
    CHECK(bits_equal(get(bwd, "da"), bf16_of(declared_sum(fdy, transpose(fb, K, N), M, N, K, 1), {M, K})));
    CHECK(bits_equal(get(bwd, "db"), bf16_of(declared_sum(transpose(fa, M, K), fdy, K, M, N, 1), {K, N})));
  }
  SECTION("shard counts 1, 2, 3, 8 and uneven shards; k_partial returns the FP32 partial") {
    for (const std::int64_t t : {1, 2, 3, 8}) {
      for (const std::int64_t K : {1, 7, 33, 1000, 4095}) {
        CAPTURE(t, K);
        const std::int64_t M = 7, N = 19;
        const Tensor a = randn_bf16({M, K}, 11 + static_cast<std::uint64_t>(K));
        const Tensor b = randn_bf16({K, N}, 12 + static_cast<std::uint64_t>(K));
        OpContext ctx = declared_context();
        ctx.k_shards = t;
        const auto want = declared_sum(floats(a), floats(b), M, K, N, t);
        CHECK(bits_equal(get(op().cpu_forward(inputs(a, b), ctx), "c"), bf16_of(want, {M, N})));
        ctx.k_partial = true;  // one chain over the whole K, float32, whatever k_shards says
        const Tensor p = get(op().cpu_forward(inputs(a, b), ctx), "c");
        CHECK(p.dtype() == DType::kF32);
        const auto chain = declared_sum(floats(a), floats(b), M, K, N, 1);
        CHECK(std::memcmp(p.data<float>(), chain.data(), chain.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("det_gemm tp: FP32 rank partials added in rank order equal TP=1 bit for bit", "[ops][det_gemm]") {
  for (const std::int64_t t : {2, 4, 8}) {
    CAPTURE(t);
    OpContext ctx = declared_context();
    ctx.k_shards = t;
    const Tensor a = randn_bf16({9, 4096}, 21), b = randn_bf16({4096, 40}, 22);
    const Tensor full = get(op().cpu_forward(inputs(a, b), ctx), "c");
    CHECK(bits_equal(full, all_reduce(rank_partials(a, b, t, candidate_forward))));
  }
  if (auto f = oracle("det_gemm")) {
    const Tensors in = oracle_inputs(*f, kRename);
    const Tensor& a = *find_tensor(in, "a");
    const Tensor& b = *find_tensor(in, "b");
    const OpContext ctx = declared_context();
    CHECK(bits_equal(get(op().cpu_forward(in, ctx), "c"),
                     all_reduce(rank_partials(a, b, ctx.k_shards, candidate_forward))));
  }
}

TEST_CASE("det_gemm candidate: deterministic, rows independent of M, threads and layout", "[ops][det_gemm]") {
  OpContext ctx = declared_context();
  const std::int64_t M = 59, K = 4096, N = 384;  // primary M and K; N cut for test time
  const Tensor a = randn_bf16({M, K}, 31), b = randn_bf16({K, N}, 32), dy = randn_bf16({M, N}, 33);
  Tensors in = inputs(a, b);
  in.push_back({"dy.c", dy});
  const auto run1 = op().cpu_forward(in, ctx);
  const auto run2 = op().cpu_forward(in, ctx);
  const Tensor& c = get(run1, "c");
  CHECK(bits_equal(c, get(run2, "c")));
  const auto g1 = op().cpu_backward(in, ctx);
  const auto g2 = op().cpu_backward(in, ctx);
  CHECK(bits_equal(get(g1, "da"), get(g2, "da")));
  CHECK(bits_equal(get(g1, "db"), get(g2, "db")));

  // Row chunks of the invariance harness (7, 4, 7, 7, 2, ...): each call's rows equal the
  // corresponding rows of the one-call result; so do da's rows (db sums over the call's rows).
  std::int64_t r0 = 0;
  for (const std::int64_t len : {7, 4, 7, 7, 2, 7, 6, 7, 7, 5}) {
    CAPTURE(r0, len);
    Tensors part = inputs(a.slice(0, r0, r0 + len), b);
    part.push_back({"dy.c", dy.slice(0, r0, r0 + len)});
    CHECK(bits_equal(get(op().cpu_forward(part, ctx), "c"), c.slice(0, r0, r0 + len)));
    CHECK(bits_equal(get(op().cpu_backward(part, ctx), "da"), get(g1, "da").slice(0, r0, r0 + len)));
    r0 += len;
  }
  REQUIRE(r0 == M);

  for (const unsigned threads : {1u, 3u}) {
    ctx.threads = threads;
    CHECK(bits_equal(get(op().cpu_forward(in, ctx), "c"), c));
    const auto g = op().cpu_backward(in, ctx);
    CHECK(bits_equal(get(g, "da"), get(g1, "da")));
    CHECK(bits_equal(get(g, "db"), get(g1, "db")));
  }
  // A transposed-storage b (layout transform): same bits.
  const Tensor bt = b.transpose(0, 1).contiguous().transpose(0, 1);
  CHECK(bits_equal(get(op().cpu_forward(inputs(a, bt), ctx), "c"), c));
}

TEST_CASE("det_gemm candidate is accurate against the FP32 reference (bf16 rows)", "[ops][det_gemm]") {
  const OpContext ctx = declared_context();
  auto judge_all = [&](const Tensors& in) {
    const auto fwd_tol = tolerance(Judgment::kForwardAccuracy, "det_gemm", ContractDType::kBFloat16);
    const auto grad_tol = tolerance(Judgment::kGradientAccuracy, "det_gemm", ContractDType::kBFloat16);
    const auto ref = op().reference_forward(in, ctx);
    const auto cand = op().cpu_forward(in, ctx);
    const auto rb = op().reference_backward(in, ctx);
    const auto cb = op().cpu_backward(in, ctx);
    const auto jc = judge_accuracy(contract(), "det_gemm", "c", get(cand, "c"), get(ref, "c"), fwd_tol);
    const auto ja = judge_accuracy(contract(), "det_gemm", "da", get(cb, "da"), get(rb, "da"), grad_tol);
    const auto jb = judge_accuracy(contract(), "det_gemm", "db", get(cb, "db"), get(rb, "db"), grad_tol);
    REQUIRE(jc.ok());
    REQUIRE(ja.ok());
    REQUIRE(jb.ok());
    CHECK(jc->violations == 0);
    CHECK(ja->violations == 0);
    CHECK(jb->violations == 0);
  };
  SECTION("oracle inputs") {
    if (auto f = oracle("det_gemm")) judge_all(oracle_inputs(*f, kRename));
  }
}

TEST_CASE("det_gemm at unit scale and on an outlier channel: Option A is within the bf16 rows, Option B is not", "[ops][det_gemm][planted]") {
  // Standard normal a and b: partial sums reach |~45| before the root, where a bf16 node rounds
  // by up to 0.125, more than the reduction row allows for outputs near zero (D11). The
  // declared candidate keeps every partial in FP32.
  const std::int64_t M = 59, K = 4096, N = 512;
  Tensor a = randn_bf16({M, K}, 71);
  const Tensor b = randn_bf16({K, N}, 72), dy = randn_bf16({M, N}, 73);
  // One outlier channel of a (x 64): the fixture that was red under Option B.
  for (std::int64_t m = 0; m < M; ++m) {
    auto* p = a.data<std::uint16_t>() + m * K + 17;
    *p = to_bf16(from_bf16(bf16{*p}) * 64.0f).bits;
  }
  const OpContext ctx = declared_context();
  const auto fwd_tol = tolerance(Judgment::kForwardAccuracy, "det_gemm", ContractDType::kBFloat16);
  const auto grad_tol = tolerance(Judgment::kGradientAccuracy, "det_gemm", ContractDType::kBFloat16);
  Tensors in = inputs(a, b);
  in.push_back({"dy.c", dy});
  const Tensor ref = get(op().reference_forward(in, ctx), "c");
  const auto rb = op().reference_backward(in, ctx);
  const auto cb = op().cpu_backward(in, ctx);
  auto judged = [](const Result<AccuracyTensor>& r) {
    REQUIRE(r.ok());
    return *r;
  };
  const auto good_c = judged(judge_accuracy(contract(), "det_gemm", "c", get(op().cpu_forward(in, ctx), "c"), ref, fwd_tol));
  const auto good_da = judged(judge_accuracy(contract(), "det_gemm", "da", get(cb, "da"), get(rb, "da"), grad_tol));
  const auto good_db = judged(judge_accuracy(contract(), "det_gemm", "db", get(cb, "db"), get(rb, "db"), grad_tol));
  CHECK(passed(good_c));
  CHECK(passed(good_da));
  CHECK(passed(good_db));
  const auto bad_c = judged(judge_accuracy(contract(), "det_gemm", "c", get(planted_bf16_tree(in, ctx), "c"), ref, fwd_tol));
  CHECK_FALSE(passed(bad_c));
  CHECK(bad_c.worst->margin > 1);
  WARN("unit scale + outlier channel, bf16 rows: Option A worst |err|/allowed " << good_c.worst->margin
       << " (c), BF16 tree nodes " << bad_c.worst->margin << " (c, " << bad_c.violations << " over)");
}

TEST_CASE("det_gemm refuses inputs that do not fit", "[ops][det_gemm]") {
  const OpContext ctx = declared_context();
  const Tensor a(DType::kBF16, {4, 64}), b(DType::kBF16, {64, 8});
  auto msg = [](const Result<Tensors>& r) {
    REQUIRE_FALSE(r.ok());
    return r.error().message();
  };
  CHECK(msg(op().cpu_forward({{"a", a}}, ctx)).find("det_gemm: b: missing input") != std::string::npos);
  CHECK(msg(op().reference_forward({{"a", Tensor(DType::kF32, {4, 64})}, {"b", b}}, ctx))
            .find("det_gemm: a: dtype F32") != std::string::npos);
  CHECK(msg(op().cpu_forward({{"a", a}, {"b", Tensor(DType::kBF16, {63, 8})}}, ctx))
            .find("det_gemm: b: shape [63, 8]") != std::string::npos);
  CHECK(msg(op().cpu_forward({{"a", Tensor(DType::kBF16, {4, 64, 1})}, {"b", b}}, ctx))
            .find("det_gemm: a: shape [4, 64, 1] (expected rank 2)") != std::string::npos);
  CHECK(msg(op().cpu_backward({{"a", a}, {"b", b}, {"dy.c", Tensor(DType::kBF16, {4, 9})}}, ctx))
            .find("det_gemm: dy.c: shape [4, 9]") != std::string::npos);
  CHECK(msg(op().cpu_backward({{"a", a}, {"b", b}}, ctx)).find("det_gemm: dy.c: missing input") !=
        std::string::npos);
  OpContext bad = ctx;
  bad.k_shards = 0;
  CHECK(msg(op().cpu_forward({{"a", a}, {"b", b}}, bad)).find("det_gemm: k_shards") != std::string::npos);
}

// ---- The shared GEMM helper -------------------------------------------------------------------

TEST_CASE("gemm_cpu: the AVX2 and portable kernels agree bit for bit, also with NaN and inf", "[ops][det_gemm][gemm_cpu]") {
  if (!ops::gemm::simd_kernel_available()) {
    WARN("no AVX2+FMA on this machine: only the portable kernel runs");
    return;
  }
  const std::int64_t M = 13, K = 300, N = 37;
  Tensor a = randn_bf16({M, K}, 41), b = randn_bf16({K, N}, 42, 1e19f);  // some sums overflow
  a.data<std::uint16_t>()[5] = to_bf16(std::numeric_limits<float>::quiet_NaN()).bits;
  a.data<std::uint16_t>()[K + 3] = to_bf16(std::numeric_limits<float>::infinity()).bits;
  b.data<std::uint16_t>()[7] = 0x7f81;  // a signaling NaN payload
  // b row-major and b stored transposed: both packing paths (copy along n, transpose along k).
  const Tensor b_t = b.transpose(0, 1).contiguous().transpose(0, 1);
  for (const auto& red : {ops::gemm::fp32_chunked(), ops::gemm::bf16_tree(32), ops::gemm::fp32_tree(32),
                          ops::gemm::Reduction{ops::gemm::Reduction::Kind::kFold, 7, true, true}})
    for (const DType out : {DType::kF32, DType::kBF16})
      for (const Tensor* bb : {static_cast<const Tensor*>(&b), &b_t}) {
        const Tensor simd = ops::gemm::gemm(ops::gemm::matrix(a), ops::gemm::matrix(*bb), out, red, {2, true});
        const Tensor port = ops::gemm::gemm(ops::gemm::matrix(a), ops::gemm::matrix(*bb), out, red, {2, false});
        CHECK(passed(judge_bitwise("c", simd, port, NanPolicy::kCompareBits)));
      }
  // The bf16 store is ws1::to_bf16 of the float32 result (NaN quieting, overflow to inf).
  const Tensor f32 = ops::gemm::gemm(ops::gemm::matrix(a), ops::gemm::matrix(b), DType::kF32,
                                     ops::gemm::fp32_chunked(), {});
  const Tensor b16 = ops::gemm::gemm(ops::gemm::matrix(a), ops::gemm::matrix(b), DType::kBF16,
                                     ops::gemm::fp32_chunked(), {});
  std::int64_t differ = 0, nans = 0;
  for (std::int64_t i = 0; i < f32.numel(); ++i) {
    if (to_bf16(f32.data<float>()[i]).bits != b16.data<std::uint16_t>()[i]) ++differ;
    if (std::isnan(f32.data<float>()[i])) ++nans;
  }
  CHECK(differ == 0);
  CHECK(nans > 0);
}

TEST_CASE("gemm_cpu: the FP32 fold is the literal chunked loop; K = 0 gives zeros", "[ops][det_gemm][gemm_cpu]") {
  const std::int64_t M = 5, K = 1000, N = 21, chunk = ops::gemm::kFp32Chunk;
  const Tensor a = randn_bf16({M, K}, 51), b = randn_bf16({K, N}, 52);
  const auto fa = floats(a), fb = floats(b);
  const Tensor c = ops::gemm::gemm(ops::gemm::matrix(a), ops::gemm::matrix(b), DType::kF32,
                                   ops::gemm::fp32_chunked(), {});
  std::int64_t differ = 0;
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      float total = 0.0f;
      for (std::int64_t k0 = 0; k0 < K; k0 += chunk) {
        float part = 0.0f;
        for (std::int64_t k = k0; k < std::min(K, k0 + chunk); ++k) part = std::fma(fa[m * K + k], fb[k * N + n], part);
        total += part;
      }
      if (float_bits(total) != float_bits(c.data<float>()[m * N + n])) ++differ;
    }
  CHECK(differ == 0);
  const Tensor empty_a(DType::kBF16, {3, 0}), empty_b(DType::kBF16, {0, 4});
  for (const auto& red : {ops::gemm::fp32_chunked(), ops::gemm::bf16_tree(32)}) {
    const Tensor z = ops::gemm::gemm(ops::gemm::matrix(empty_a), ops::gemm::matrix(empty_b), DType::kF32, red, {});
    for (std::int64_t i = 0; i < z.numel(); ++i) CHECK(float_bits(z.data<float>()[i]) == 0u);
  }
}

// ---- Planted defect ---------------------------------------------------------------------------

TEST_CASE("det_gemm planted defects: rounded TP partials, a split chosen by M; TF32 cannot change bf16 products", "[ops][det_gemm][planted]") {
  const OpContext ctx = declared_context();
  const Tensor a = randn_bf16({59, 4096}, 61), b = randn_bf16({4096, 128}, 62);
  const Tensor full = get(op().cpu_forward(inputs(a, b), ctx), "c");
  SECTION("TP partials rounded to bf16 before the sum: the tp identity fails, the faithful twin holds") {
    const BitwiseTensor bad = judge_bitwise("c", full, all_reduce(rank_partials(a, b, ctx.k_shards, planted_rounded_partials)), NanPolicy::kFail);
    const BitwiseTensor good = judge_bitwise("c", full, all_reduce(rank_partials(a, b, ctx.k_shards, candidate_forward)), NanPolicy::kFail);
    CHECK_FALSE(passed(bad));
    CHECK(bad.mismatches > 59 * 128 / 4);
    CHECK(passed(good));
    // TP=1 ignoring the declared split (one FP32 sum over K) is not the ranks' all-reduce either.
    OpContext one = ctx;
    one.k_shards = 1;
    const BitwiseTensor unsplit = judge_bitwise("c", get(op().cpu_forward(inputs(a, b), one), "c"),
                                                all_reduce(rank_partials(a, b, ctx.k_shards, candidate_forward)), NanPolicy::kFail);
    CHECK_FALSE(passed(unsplit));
  }
  SECTION("a split chosen by M: rows of a small call differ from the same rows of a large one") {
    // Near-cancelling inputs (the second half of K is the first's terms permuted and negated):
    // c is the FP32 rounding left over, so another association changes most of its bf16 bits.
    // On plain normal inputs a reassociated FP32 sum rounds to the same bf16 almost always.
    const std::int64_t M = 96, K = 2048, N = 64, h = K / 2;
    const Tensor ah = randn_bf16({M, h}, 63), bh = randn_bf16({h, N}, 64);
    Tensor ca(DType::kBF16, {M, K}), cb(DType::kBF16, {K, N});
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t k = 0; k < K; ++k)
        ca.data<std::uint16_t>()[i * K + k] = ah.data<std::uint16_t>()[i * h + (k < h ? k : (k - h) * 7 % h)];
    for (std::int64_t k = 0; k < K; ++k)
      for (std::int64_t n = 0; n < N; ++n)
        cb.data<std::uint16_t>()[k * N + n] = k < h ? bh.data<std::uint16_t>()[k * N + n]
                                                    : static_cast<std::uint16_t>(bh.data<std::uint16_t>()[((k - h) * 7 % h) * N + n] ^ 0x8000u);
    const Tensor rows7 = get(planted_split_by_m(inputs(ca.slice(0, 0, 7), cb), ctx), "c");
    const Tensor rows96 = get(planted_split_by_m(inputs(ca, cb), ctx), "c");
    const BitwiseTensor split = judge_bitwise("c", rows7, rows96.slice(0, 0, 7), NanPolicy::kFail);
    CHECK(split.mismatches * 2 > 7 * N);
    const Tensor good96 = get(op().cpu_forward(inputs(ca, cb), ctx), "c");
    CHECK(bits_equal(get(op().cpu_forward(inputs(ca.slice(0, 0, 7), cb), ctx), "c"), good96.slice(0, 0, 7)));
    const Tensor rows59 = get(planted_split_by_m(inputs(a, b), ctx), "c");
    // Both are FP32 sums: accuracy cannot tell them apart, which is why batch invariance is checked.
    const auto tol = tolerance(Judgment::kForwardAccuracy, "det_gemm", ContractDType::kBFloat16);
    const Tensor ref = get(op().reference_forward(inputs(a, b), ctx), "c");
    const auto j = judge_accuracy(contract(), "det_gemm", "c", rows59, ref, tol);
    REQUIRE(j.ok());
    CHECK(passed(*j));
  }
  SECTION("TF32: every bf16 value is a TF32 value, so TF32 operands give the same bits") {
    // No det_gemm cell can show TF32 on bf16 operands; the audit's tf32 row (cuBLAS math mode,
    // SASS scan for TF32 MMA) is where TF32 is caught (docs/decisions.md D11).
    CHECK(bits_equal(get(tf32_operands(inputs(a, b), ctx), "c"), full));
  }
}

// Timing at the primary shape (M = 59, K = 4096, N = 12288, standard normal inputs as the
// accuracy fixture), with the bf16-row verdicts of that run; not part of the suite:
//   test_ops "[det_gemm_bench]"
TEST_CASE("det_gemm bench at the primary shape", "[.][bench][det_gemm_bench]") {
  const std::int64_t M = 59, K = 4096, N = 12288;
  const Tensors in = {{"a", randn_bf16({M, K}, 81)}, {"b", randn_bf16({K, N}, 82)}, {"dy.c", randn_bf16({M, N}, 83)}};
  const OpContext ctx = declared_context();
  auto time = [&](const char* what, auto&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    auto r = fn();
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    REQUIRE(r.ok());
    WARN(what << ": wall " << s << " s, cpu " << cpu << " s");
    return std::move(r).value();
  };
  const Tensors rf = time("reference forward", [&] { return op().reference_forward(in, ctx); });
  const Tensors cf = time("candidate forward", [&] { return op().cpu_forward(in, ctx); });
  const Tensors rb = time("reference backward", [&] { return op().reference_backward(in, ctx); });
  const Tensors cb = time("candidate backward", [&] { return op().cpu_backward(in, ctx); });
  const auto fwd_tol = tolerance(Judgment::kForwardAccuracy, "det_gemm", ContractDType::kBFloat16);
  const auto grad_tol = tolerance(Judgment::kGradientAccuracy, "det_gemm", ContractDType::kBFloat16);
  for (const auto& [name, c, r, tol] :
       {std::tuple{"c", find_tensor(cf, "c"), find_tensor(rf, "c"), fwd_tol},
        std::tuple{"da", find_tensor(cb, "da"), find_tensor(rb, "da"), grad_tol},
        std::tuple{"db", find_tensor(cb, "db"), find_tensor(rb, "db"), grad_tol}}) {
    const auto j = judge_accuracy(contract(), "det_gemm", name, *c, *r, tol);
    REQUIRE(j.ok());
    WARN(name << ": " << j->violations << " of " << j->numel << " outside the bf16 row, max abs "
              << j->abs_error.max);
  }
}

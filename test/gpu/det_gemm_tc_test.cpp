// det_gemm's tensor-core variant (ws1cuda/det_gemm_tc.hpp): the declared tree with leaves summed
// by mma.sync. Bit for bit: a row of c (and of da) does not depend on how many rows the call
// has, and the full-K result is the bf16 merge of the two half-K results (TP2). Within the
// contract's bf16 reduction rows: against the FP32 reference, and against the naive kernels (the
// two differ only in the order inside a leaf). Reduction lengths whose tree is not regular fall
// back to the naive kernels' bits. Inputs at the fixtures' scale (D11): a and dy unit normal,
// b normal x 2^-round(log2 sqrt K).
// The kernel's packed bf16 arithmetic (cvt.rn.bf16x2.f32, add.rn.bf16x2, a fix-up for NaNs)
// equals det_gemm's per-element definition on every input (exhaustive device checks), and the
// op's outputs equal those of the kernel's per-element formulation bit for bit, NaN, inf and
// subnormal inputs included.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "bf16_patterns.hpp"
#include "gpu_test_support.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"
#include "ws1cuda/det_gemm_tc.hpp"

using namespace ws1;

namespace {

// Normal values (Box-Muller over a xorshift stream) times `scale`, rounded to bf16.
Tensor normal_bf16(const Shape& shape, std::uint32_t seed, double scale) {
  Tensor t(DType::kBF16, shape);
  auto* p = t.data<std::uint16_t>();
  ws1_test::Xorshift32 g(seed);
  auto uniform = [&] { return (static_cast<double>(g.next() >> 8) + 0.5) / 16777216.0; };  // in (0, 1)
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double z = std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
    p[i] = to_bf16(static_cast<float>(scale * z)).bits;
  }
  return t;
}

// 2^-round(log2 sqrt(k)): a trained projection weight's scale, exact in bf16 (as the fixtures).
double weight_scale(std::int64_t k) {
  const int log2k = std::bit_width(static_cast<std::uint64_t>(k)) - 1;
  return std::ldexp(1.0, -((log2k + 1) / 2));
}

Tensor first_rows(const Tensor& t, std::int64_t m) { return t.slice(0, 0, m).contiguous(); }

const Tensor& output(const Result<Tensors>& r, std::string_view name) {
  REQUIRE(r.ok());
  const Tensor* t = find_tensor(*r, name);
  REQUIRE(t != nullptr);
  return *t;
}

// A bf16 tensor widened to float32 (exact), to serve as the other side of an accuracy judge.
Tensor widened(const Tensor& t) {
  const Tensor c = t.contiguous();
  Tensor w(DType::kF32, c.shape());
  for (std::int64_t i = 0; i < c.numel(); ++i) w.data<float>()[i] = from_bf16(bf16{c.data<std::uint16_t>()[i]});
  return w;
}

std::int64_t differing_elements(const Tensor& x, const Tensor& y) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) n += x.data<std::uint16_t>()[i] != y.data<std::uint16_t>()[i];
  return n;
}

// The contract's bf16 row of det_gemm's op class for judgment `j`.
Tolerance bf16_row(const test::Workload& w, const RunContext& run, Judgment j) {
  auto row = w.contract.threshold(j, op_class_for(run, *find_op_impl("det_gemm")), ContractDType::kBFloat16, run.arch);
  REQUIRE(row.ok());
  REQUIRE(row->tolerance.has_value());
  return *row->tolerance;
}

struct Shape3 {
  std::int64_t K, N;
};

// bf16 bit patterns planted among the normal values: NaNs with payloads (quiet, signaling,
// negative), infinities, the largest finite value, subnormals, a negative zero.
constexpr std::uint16_t kQuietNaN = 0x7FC1, kNegSignalingNaN = 0xFFA5, kSignalingNaN = 0x7F81;
constexpr std::uint16_t kInf = 0x7F80, kNegInf = 0xFF80, kMaxFinite = 0x7F7F;
constexpr std::uint16_t kMinSubnormal = 0x0001, kNegSubnormal = 0x8050, kNegZero = 0x8000;

// Plants special values in a row-major [rows][cols] bf16 tensor, by line: lines are rows
// (along_rows) or columns. Line l: l % 11 == 1: one NaN (of three kinds); == 2: +inf in the
// first leaf-sized block, -inf further on (inf + -inf in a merge, or a single inf); == 3: the
// whole line times 2^-128 (subnormal bf16 and subnormal FP32 leaf sums); == 4: a few largest
// finite values and scattered signed subnormals and -0. Other lines stay normal.
void plant_specials(Tensor& t, bool along_rows) {
  const std::int64_t rows = t.shape()[0], cols = t.shape()[1];
  const std::int64_t lines = along_rows ? rows : cols, length = along_rows ? cols : rows;
  auto* p = t.data<std::uint16_t>();
  auto at = [&](std::int64_t line, std::int64_t i) -> std::uint16_t& {
    return along_rows ? p[line * cols + i] : p[i * cols + line];
  };
  for (std::int64_t l = 0; l < lines; ++l) {
    const std::int64_t i = (l * 37) % length;  // some position along the line
    switch (l % 11) {
      case 1:
        at(l, i) = (l / 11) % 3 == 0 ? kQuietNaN : (l / 11) % 3 == 1 ? kNegSignalingNaN : kSignalingNaN;
        break;
      case 2:
        at(l, i % 32) = kInf;
        at(l, length - 1 - i % 32) = kNegInf;
        break;
      case 3:
        for (std::int64_t k = 0; k < length; ++k) at(l, k) = to_bf16(std::ldexp(from_bf16(bf16{at(l, k)}), -128)).bits;
        break;
      case 4:
        at(l, i) = kMaxFinite;
        for (std::int64_t k = i % 5; k < length; k += 5) at(l, k) = k % 2 == 0 ? kMinSubnormal : kNegSubnormal;
        at(l, length / 2) = kNegZero;
        break;
      default:
        break;
    }
  }
}

// Counts of the kinds of bf16 values in t, to show that planted inputs reach the outputs.
struct Kinds {
  std::int64_t nan = 0, inf = 0, subnormal = 0, normal = 0;
};
Kinds kinds_of(const Tensor& t) {
  Kinds k;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const std::uint16_t h = t.data<std::uint16_t>()[i], mag = h & 0x7FFF;
    if (mag > kInf) ++k.nan;
    else if (mag == kInf) ++k.inf;
    else if (mag != 0 && mag < 0x0080) ++k.subnormal;
    else if (mag != 0) ++k.normal;
  }
  return k;
}

}  // namespace

TEST_CASE("det_gemm_tc applies exactly to regular trees", "[gpu][det_gemm_tc]") {
  const std::int64_t leaf = test::cuda_run_context(test::workload(test::gpu_workload_name())).op_context.k_tree_leaf;
  REQUIRE(leaf == 32);  // the widths below are this leaf's regular trees
  for (std::int64_t r : {8, 16, 24, 32, 256, 1024, 2048, 4096, 12288, 32768}) {
    INFO("R " << r);
    CHECK(ws1cuda::det_gemm_tc_applies(r, leaf));
  }
  // Ragged leaves (33, 100, 4000), a width not a multiple of 8 (12, 20 * 2^k), a tree deeper
  // than the kernel's 10 levels (65536), nothing to reduce (0).
  for (std::int64_t r : {0, 12, 33, 100, 160, 4000, 5120, 65536}) {
    INFO("R " << r);
    CHECK_FALSE(ws1cuda::det_gemm_tc_applies(r, leaf));
  }
}

TEST_CASE("det_gemm_tc forward: rows of c do not depend on M, bit for bit", "[gpu][det_gemm_tc]") {
  const RunContext run = test::cuda_run_context(test::workload(test::gpu_workload_name()));
  const std::int64_t kRows = 300;
  for (const Shape3 s : {Shape3{4096, 1024}, Shape3{12288, 256}}) {
    REQUIRE(ws1cuda::det_gemm_tc_applies(s.K, run.op_context.k_tree_leaf));
    const Tensor a = normal_bf16({kRows, s.K}, static_cast<std::uint32_t>(s.K + 1), 1.0);
    const Tensor b = normal_bf16({s.K, s.N}, static_cast<std::uint32_t>(s.K + 2), weight_scale(s.K));
    const auto full = ws1cuda::det_gemm_tensor_core_forward({{"a", a}, {"b", b}}, run.op_context);
    const Tensor& c_full = output(full, "c");
    for (std::int64_t m : {1, 3, 17, 64, 200}) {
      INFO("K " << s.K << " N " << s.N << " M " << m);
      const auto part = ws1cuda::det_gemm_tensor_core_forward({{"a", first_rows(a, m)}, {"b", b}}, run.op_context);
      const Tensor& c = output(part, "c");
      REQUIRE(c.shape() == Shape{m, s.N});
      CHECK(std::memcmp(c.raw(), c_full.raw(), c.nbytes()) == 0);
    }
  }
}

TEST_CASE("det_gemm_tc forward: two half-K products merged in bf16 give the full-K bits (TP2)",
          "[gpu][det_gemm_tc]") {
  const RunContext run = test::cuda_run_context(test::workload(test::gpu_workload_name()));
  const std::int64_t M = 64, K = 4096, N = 1024;
  const Tensor a = normal_bf16({M, K}, 11, 1.0);
  const Tensor b = normal_bf16({K, N}, 12, weight_scale(K));
  auto fwd = [&](const Tensor& x, const Tensor& y) {
    return ws1cuda::det_gemm_tensor_core_forward({{"a", x}, {"b", y}}, run.op_context);
  };
  const auto full = fwd(a, b);
  const auto left = fwd(a.slice(1, 0, K / 2).contiguous(), b.slice(0, 0, K / 2).contiguous());
  const auto right = fwd(a.slice(1, K / 2, K).contiguous(), b.slice(0, K / 2, K).contiguous());
  const Tensor& c = output(full, "c");
  const Tensor& l = output(left, "c");
  const Tensor& r = output(right, "c");
  Tensor merged(DType::kBF16, {M, N});
  for (std::int64_t i = 0; i < M * N; ++i) {
    const float sum = from_bf16(bf16{l.data<std::uint16_t>()[i]}) + from_bf16(bf16{r.data<std::uint16_t>()[i]});
    merged.data<std::uint16_t>()[i] = to_bf16(sum).bits;
  }
  INFO("elements differing from the merged halves: " << differing_elements(c, merged));
  CHECK(std::memcmp(c.raw(), merged.raw(), c.nbytes()) == 0);
}

TEST_CASE("det_gemm_tc forward: within the bf16 reduction row of the FP32 reference and of the naive kernels",
          "[gpu][det_gemm_tc]") {
  const test::Workload& w = test::workload(test::gpu_workload_name());
  const RunContext run = test::cuda_run_context(w);
  const Op& op = *find_op_impl("det_gemm");
  const Tolerance tol = bf16_row(w, run, Judgment::kForwardAccuracy);
  // The real widths, a shallow tree with ragged N (odd: no 16-byte rows of b, single stores),
  // and M below one mma tile.
  struct Case {
    std::int64_t M, K, N;
  };
  for (const Case s : {Case{300, 4096, 1024}, Case{300, 12288, 256}, Case{5, 1024, 199}, Case{2, 256, 1000}}) {
    INFO("M " << s.M << " K " << s.K << " N " << s.N);
    REQUIRE(ws1cuda::det_gemm_tc_applies(s.K, run.op_context.k_tree_leaf));
    const Tensors in{{"a", normal_bf16({s.M, s.K}, static_cast<std::uint32_t>(s.K + s.N), 1.0)},
                     {"b", normal_bf16({s.K, s.N}, static_cast<std::uint32_t>(s.K + s.N + 1), weight_scale(s.K))}};
    const auto tc = ws1cuda::det_gemm_tensor_core_forward(in, run.op_context);
    const auto naive = test::cuda_backend().forward(op, in, run.op_context);
    const auto ref = op.reference_forward(in, run.op_context);
    const Tensor& c = output(tc, "c");
    REQUIRE(c.shape() == Shape{s.M, s.N});
    auto vs_ref = judge_accuracy(w.contract, op.name(), "c", c, output(ref, "c"), tol);
    REQUIRE(vs_ref.ok());
    INFO("vs FP32: violations " << vs_ref->violations << ", NaN " << vs_ref->nan_elements << ", worst |err|/allowed "
                                << (vs_ref->worst ? vs_ref->worst->margin : 0.0));
    CHECK(passed(*vs_ref));
    // The naive kernels (bit-equal to cpu_bf16) are green on the same inputs: the variant loses nothing.
    auto naive_vs_ref = judge_accuracy(w.contract, op.name(), "c", output(naive, "c"), output(ref, "c"), tol);
    REQUIRE(naive_vs_ref.ok());
    CHECK(passed(*naive_vs_ref));
    const AccuracyTensor vs_naive = judge_accuracy("c", c, widened(output(naive, "c")), tol);
    INFO("elements differing from the naive kernels: " << differing_elements(c, output(naive, "c")) << " of "
                                                        << c.numel() << ", worst |err|/allowed "
                                                        << (vs_naive.worst ? vs_naive.worst->margin : 0.0));
    CHECK(passed(vs_naive));
  }
}

TEST_CASE("det_gemm_tc forward falls back to the naive kernels' bits when the tree is not regular",
          "[gpu][det_gemm_tc]") {
  const RunContext run = test::cuda_run_context(test::workload(test::gpu_workload_name()));
  const Op& op = *find_op_impl("det_gemm");
  for (std::int64_t K : {33, 100, 4000}) {
    INFO("K " << K);
    REQUIRE_FALSE(ws1cuda::det_gemm_tc_applies(K, run.op_context.k_tree_leaf));
    const Tensors in{{"a", normal_bf16({7, K}, static_cast<std::uint32_t>(K), 1.0)},
                     {"b", normal_bf16({K, 96}, static_cast<std::uint32_t>(K + 1), weight_scale(K))}};
    const auto tc_out = ws1cuda::det_gemm_tensor_core_forward(in, run.op_context);
    const auto naive_out = test::cuda_backend().forward(op, in, run.op_context);
    const Tensor& tc = output(tc_out, "c");
    const Tensor& naive = output(naive_out, "c");
    REQUIRE(tc.shape() == naive.shape());
    CHECK(std::memcmp(tc.raw(), naive.raw(), tc.nbytes()) == 0);
  }
}

TEST_CASE("det_gemm_tc backward: rows of da do not depend on M; da within the bf16 row, db the naive bits",
          "[gpu][det_gemm_tc]") {
  const test::Workload& w = test::workload(test::gpu_workload_name());
  const RunContext run = test::cuda_run_context(w);
  const Op& op = *find_op_impl("det_gemm");
  const Tolerance tol = bf16_row(w, run, Judgment::kGradientAccuracy);
  const std::int64_t kRows = 300;
  // da reduces over N: 32 leaves of 32, and 512 leaves of 24 (the gate / up projections' dx).
  // b at the scale of a weight of the larger width keeps da near unit scale, as in the model
  // (where K = 4096 and N = 12288).
  for (const Shape3 s : {Shape3{4096, 1024}, Shape3{256, 12288}}) {
    REQUIRE(ws1cuda::det_gemm_tc_applies(s.N, run.op_context.k_tree_leaf));
    const Tensor a = normal_bf16({kRows, s.K}, static_cast<std::uint32_t>(s.N + 3), 1.0);
    const Tensor b = normal_bf16({s.K, s.N}, static_cast<std::uint32_t>(s.N + 4), weight_scale(std::max(s.K, s.N)));
    const Tensor dy = normal_bf16({kRows, s.N}, static_cast<std::uint32_t>(s.N + 5), 1.0);
    const Tensors in{{"a", a}, {"b", b}, {"dy.c", dy}};
    const auto full = ws1cuda::det_gemm_tensor_core_backward(in, run.op_context);
    const Tensor& da_full = output(full, "da");
    REQUIRE(da_full.shape() == Shape{kRows, s.K});
    for (std::int64_t m : {1, 3, 17, 64, 200}) {
      INFO("K " << s.K << " N " << s.N << " M " << m);
      const auto part = ws1cuda::det_gemm_tensor_core_backward(
          {{"a", first_rows(a, m)}, {"b", b}, {"dy.c", first_rows(dy, m)}}, run.op_context);
      const Tensor& da = output(part, "da");
      REQUIRE(da.shape() == Shape{m, s.K});
      CHECK(std::memcmp(da.raw(), da_full.raw(), da.nbytes()) == 0);
    }
    INFO("K " << s.K << " N " << s.N << " M " << kRows);
    // db stays on the naive kernel: the default backend's bits.
    const auto naive = test::cuda_backend().backward(op, in, run.op_context);
    const Tensor& db = output(full, "db");
    const Tensor& db_naive = output(naive, "db");
    REQUIRE(db.shape() == db_naive.shape());
    CHECK(std::memcmp(db.raw(), db_naive.raw(), db.nbytes()) == 0);
    // da against the FP32 reference and the naive kernel.
    const auto ref = op.reference_backward(in, run.op_context);
    auto vs_ref = judge_accuracy(w.contract, op.name(), "da", da_full, output(ref, "da"), tol);
    REQUIRE(vs_ref.ok());
    INFO("da vs FP32: violations " << vs_ref->violations << ", worst |err|/allowed "
                                   << (vs_ref->worst ? vs_ref->worst->margin : 0.0));
    CHECK(passed(*vs_ref));
    const AccuracyTensor vs_naive = judge_accuracy("da", da_full, widened(output(naive, "da")), tol);
    INFO("da elements differing from the naive kernel: " << differing_elements(da_full, output(naive, "da")));
    CHECK(passed(vs_naive));
  }
}

TEST_CASE("det_gemm_tc refuses bad inputs with the op's one-line errors", "[gpu][det_gemm_tc]") {
  const RunContext run = test::cuda_run_context(test::workload(test::gpu_workload_name()));
  const Tensors in{{"a", normal_bf16({4, 64}, 1, 1.0)}, {"b", normal_bf16({32, 8}, 2, 1.0)}};  // b's K is wrong
  const auto fwd = ws1cuda::det_gemm_tensor_core_forward(in, run.op_context);
  REQUIRE_FALSE(fwd.ok());
  CHECK(fwd.error().message().find("det_gemm: b:") != std::string::npos);
  const auto bwd = ws1cuda::det_gemm_tensor_core_backward(in, run.op_context);  // and no dy.c
  REQUIRE_FALSE(bwd.ok());
}

TEST_CASE("det_gemm_tc packed leaf rounding equals round_bf16 on all 2^32 floats", "[gpu][det_gemm_tc]") {
  const auto check = ws1cuda::det_gemm_tc_check_leaf_rounding();
  REQUIRE(check.ok());
  // Every float once in each half; the NaN floats (2 signs x 2^23 - 1 mantissas) reach the fix-up.
  const std::uint64_t nan_floats = 2 * ((std::uint64_t{1} << 23) - 1);
  CHECK(check->lanes == 2 * (std::uint64_t{1} << 32));
  CHECK(check->nan_lanes == 2 * nan_floats);
  INFO("hardware lanes wrong outside the fix-up " << check->fast_mismatches << ", helper lanes wrong "
                                                   << check->helper_mismatches);
  CHECK(check->fast_mismatches == 0);
  CHECK(check->helper_mismatches == 0);
}

TEST_CASE("det_gemm_tc packed merge equals bf16(float + float) on all 2^32 bf16 pairs", "[gpu][det_gemm_tc]") {
  const auto check = ws1cuda::det_gemm_tc_check_merge();
  REQUIRE(check.ok());
  // NaN results: pairs with a NaN operand (254 NaN patterns of 65536) and inf + (-inf) both ways.
  const std::uint64_t all = std::uint64_t{65536} * 65536, no_nan = std::uint64_t{65536 - 254} * (65536 - 254);
  CHECK(check->lanes == 2 * all);
  CHECK(check->nan_lanes == 2 * (all - no_nan + 2));
  INFO("hardware lanes wrong outside the fix-up " << check->fast_mismatches << ", helper lanes wrong "
                                                   << check->helper_mismatches);
  CHECK(check->fast_mismatches == 0);
  CHECK(check->helper_mismatches == 0);
}

TEST_CASE("det_gemm_tc forward: the packed arithmetic gives the per-element kernel's bits, specials planted",
          "[gpu][det_gemm_tc]") {
  const RunContext run = test::cuda_run_context(test::workload(test::gpu_workload_name()));
  const std::int64_t N = 256;
  for (const std::int64_t K : {4096, 12288}) {
    REQUIRE(ws1cuda::det_gemm_tc_applies(K, run.op_context.k_tree_leaf));
    for (const std::int64_t M : {1, 77, 300}) {
      INFO("M " << M << " K " << K << " N " << N);
      Tensor a = normal_bf16({M, K}, static_cast<std::uint32_t>(K + M), 1.0);
      Tensor b = normal_bf16({K, N}, static_cast<std::uint32_t>(K + M + 1), weight_scale(K));
      plant_specials(a, /*along_rows=*/true);  // rows of c (M = 1: only row 0, which stays normal)
      plant_specials(b, /*along_rows=*/false);  // columns of c
      const Tensors in{{"a", a}, {"b", b}};
      const auto packed = ws1cuda::det_gemm_tensor_core_forward(in, run.op_context);
      const auto per_element = ws1cuda::det_gemm_tensor_core_forward_per_element(in, run.op_context);
      const Tensor& c = output(packed, "c");
      const Tensor& c_ref = output(per_element, "c");
      REQUIRE(c.shape() == Shape{M, N});
      REQUIRE(c_ref.shape() == c.shape());
      const Kinds k = kinds_of(c);
      INFO("outputs: NaN " << k.nan << ", inf " << k.inf << ", subnormal " << k.subnormal << ", normal " << k.normal
                           << "; differing from the per-element kernel " << differing_elements(c, c_ref));
      // The planted values reach the outputs (subnormal outputs are reported, not required:
      // whether they appear is the MMA's subnormal handling, the same in both kernels).
      CHECK(k.nan > 0);
      CHECK(k.inf > 0);
      CHECK(k.normal > 0);
      CHECK(std::memcmp(c.raw(), c_ref.raw(), c.nbytes()) == 0);
    }
  }
}

TEST_CASE("det_gemm_tc backward: the packed arithmetic gives the per-element kernel's da bits, specials planted",
          "[gpu][det_gemm_tc]") {
  const RunContext run = test::cuda_run_context(test::workload(test::gpu_workload_name()));
  const std::int64_t M = 77, K = 256;
  for (const std::int64_t N : {4096, 12288}) {  // da reduces over N
    INFO("M " << M << " K " << K << " N " << N);
    REQUIRE(ws1cuda::det_gemm_tc_applies(N, run.op_context.k_tree_leaf));
    const Tensor a = normal_bf16({M, K}, static_cast<std::uint32_t>(N + 7), 1.0);
    Tensor b = normal_bf16({K, N}, static_cast<std::uint32_t>(N + 8), weight_scale(N));
    Tensor dy = normal_bf16({M, N}, static_cast<std::uint32_t>(N + 9), 1.0);
    plant_specials(dy, /*along_rows=*/true);  // rows of da
    plant_specials(b, /*along_rows=*/true);   // b [K][N]: row k of b is column k of da
    const Tensors in{{"a", a}, {"b", b}, {"dy.c", dy}};
    const auto packed = ws1cuda::det_gemm_tensor_core_backward(in, run.op_context);
    const auto per_element = ws1cuda::det_gemm_tensor_core_backward_per_element(in, run.op_context);
    for (const char* name : {"da", "db"}) {
      INFO(name);
      const Tensor& x = output(packed, name);
      const Tensor& x_ref = output(per_element, name);
      REQUIRE(x.shape() == x_ref.shape());
      INFO("differing from the per-element kernel: " << differing_elements(x, x_ref));
      CHECK(std::memcmp(x.raw(), x_ref.raw(), x.nbytes()) == 0);
    }
    const Kinds k = kinds_of(output(packed, "da"));
    INFO("da: NaN " << k.nan << ", inf " << k.inf << ", subnormal " << k.subnormal << ", normal " << k.normal);
    CHECK(k.nan > 0);
    CHECK(k.inf > 0);
    CHECK(k.normal > 0);
  }
}

// GPU twins of the CPU planted defects (test/run/planted_defects_test.cpp, declared_order_test.cpp,
// invariance_test.cpp): the cuda_bf16 kernels themselves, run with a defect's setting — no eps,
// the other rounding order, det_gemm partials rounded to bf16, a det_gemm K split chosen by the
// batch size, an FP32 output — must turn the same judges red, while the plain cuda_bf16 backend
// is green on the same cells.
#include "gpu_test_support.hpp"
#include "planted_backend.hpp"
#include "ws1/declared_order.hpp"
#include "ws1/invariance.hpp"
#include "ws1/numeric.hpp"
#include "ws1/tensor.hpp"

using namespace ws1;

namespace {

using test::PlantedBackend;

const test::Workload& real() { return test::workload("ws1-qwen3-8b-dense"); }

// The cuda kernel of `op` under a changed op context.
test::OpKernel cuda_with(std::function<void(const Tensors&, OpContext&)> change) {
  return [change](const Op& op, const Tensors& in, const OpContext& ctx) {
    OpContext c = ctx;
    change(in, c);
    return test::cuda_backend().forward(op, in, c);
  };
}

Cell accuracy_cell(Backend& backend, const std::string& op, const std::string& fixture) {
  RunContext run = test::cuda_run_context(real());
  FixtureGenerator gen;
  auto cell = run_accuracy_cell(run, gen, backend, *find_op_impl(op), Judgment::kForwardAccuracy,
                                real().spec(fixture));
  REQUIRE(cell.ok());
  INFO(cell->id << ": " << cell->reason);
  return std::move(cell).value();
}

DeclaredOrderResult probe(Backend& backend, const std::string& op) {
  const RunContext run = test::cuda_run_context(real());
  // det_gemm on cuda_bf16 is Option A (FP32 throughout, one rounding): its probe.
  auto r = op == "det_gemm" ? probe_det_gemm_option_a(run, backend, *find_op_impl(op))
                            : probe_rms_norm_order(run, backend, *find_op_impl(op));
  REQUIRE(r.ok());
  INFO(r->op << ": declared " << r->declared << ", observed " << r->observed << "; " << r->reason);
  return std::move(r).value();
}

// bf16(float(x) + float(y)) element-wise: a bf16 merge of two rounded partials (Option B's).
Tensor bf16_merge(const Tensor& x, const Tensor& y) {
  const Tensor cx = x.contiguous(), cy = y.contiguous();
  Tensor out(DType::kBF16, cx.shape());
  for (std::int64_t i = 0; i < cx.numel(); ++i) {
    const auto value = [i](const Tensor& t) {
      return t.dtype() == DType::kF32 ? t.data<float>()[i] : from_bf16(bf16{t.data<std::uint16_t>()[i]});
    };
    out.data<std::uint16_t>()[i] = to_bf16(round_bf16(value(cx)) + round_bf16(value(cy))).bits;
  }
  return out;
}

// The cuda det_gemm with each reduction cut in two halves whose partials are rounded to bf16
// before they are added (and the sum rounded): the defect Option A forbids, built from the
// real kernels (forward: two k_partial calls on the K halves; backward: da from the N halves
// of dy and b, db from the M halves of a and dy, each rounded by the kernel).
Result<Tensors> halves_forward(const Op& op, const Tensors& in, const OpContext& ctx) {
  const Tensor& a = *find_tensor(in, "a");
  const Tensor& b = *find_tensor(in, "b");
  const std::int64_t K = a.shape()[1], h = K / 2;
  OpContext part = ctx;
  part.k_partial = true;
  auto lo = test::cuda_backend().forward(op, {{"a", a.slice(1, 0, h).contiguous()}, {"b", b.slice(0, 0, h).contiguous()}}, part);
  auto hi = test::cuda_backend().forward(op, {{"a", a.slice(1, h, K).contiguous()}, {"b", b.slice(0, h, K).contiguous()}}, part);
  if (!lo) return lo;
  if (!hi) return hi;
  return Tensors{{"c", bf16_merge(*find_tensor(*lo, "c"), *find_tensor(*hi, "c"))}};
}
Result<Tensors> halves_backward(const Op& op, const Tensors& in, const OpContext& ctx) {
  const Tensor& a = *find_tensor(in, "a");
  const Tensor& b = *find_tensor(in, "b");
  const Tensor& dy = *find_tensor(in, "dy.c");
  const std::int64_t M = a.shape()[0], N = b.shape()[1], hn = N / 2, hm = M / 2;
  const auto run = [&](const Tensor& x, const Tensor& y, const Tensor& g) {
    return test::cuda_backend().backward(op, {{"a", x.contiguous()}, {"b", y.contiguous()}, {"dy.c", g.contiguous()}}, ctx);
  };
  auto n0 = run(a, b.slice(1, 0, hn), dy.slice(1, 0, hn)), n1 = run(a, b.slice(1, hn, N), dy.slice(1, hn, N));
  auto m0 = run(a.slice(0, 0, hm), b, dy.slice(0, 0, hm)), m1 = run(a.slice(0, hm, M), b, dy.slice(0, hm, M));
  for (const auto* r : {&n0, &n1, &m0, &m1})
    if (!*r) return *r;
  return Tensors{{"da", bf16_merge(*find_tensor(*n0, "da"), *find_tensor(*n1, "da"))},
                 {"db", bf16_merge(*find_tensor(*m0, "db"), *find_tensor(*m1, "db"))}};
}

}  // namespace

TEST_CASE("GPU twin: rms_norm without eps is red on the near-zero cell", "[gpu][planted]") {
  const Cell clean = accuracy_cell(test::cuda_backend(), "rms_norm", "rms_norm/primary/near_zero");
  CHECK(clean.verdict == Verdict::kGreen);
  PlantedBackend no_eps(test::cuda_backend(), "rms_norm", cuda_with([](const Tensors&, OpContext& c) {
                          c.rms_norm_eps = 0.0;
                        }));
  CHECK(accuracy_cell(no_eps, "rms_norm", "rms_norm/primary/near_zero").verdict == Verdict::kRed);
}

TEST_CASE("GPU twin: an FP32 output where bf16 is declared is red", "[gpu][planted]") {
  PlantedBackend fp32(test::cuda_backend(), "rms_norm", [](const Op& op, const Tensors& in, const OpContext& ctx) {
    auto r = test::cuda_backend().forward(op, in, ctx);
    if (!r) return r;
    const Tensor& y = r->front().tensor;
    Tensor wide(DType::kF32, y.shape());
    for (std::int64_t i = 0; i < y.numel(); ++i) wide.data<float>()[i] = from_bf16(bf16{y.data<std::uint16_t>()[i]});
    return Result<Tensors>(Tensors{{"y", wide}});
  });
  CHECK(accuracy_cell(fp32, "rms_norm", "rms_norm/primary/normal").verdict == Verdict::kRed);
}

TEST_CASE("GPU twin: rms_norm / qk_norm kernels in the hf order are red and named hf", "[gpu][planted][declared_order]") {
  for (const char* name : {"rms_norm", "qk_norm"}) {
    CHECK(probe(test::cuda_backend(), name).verdict == Verdict::kGreen);
    PlantedBackend hf(test::cuda_backend(), name, cuda_with([](const Tensors&, OpContext& c) {
                        c.rms_norm_order = RmsNormOrder::kHf;
                      }));
    const DeclaredOrderResult r = probe(hf, name);
    CHECK(r.verdict == Verdict::kRed);
    CHECK(r.observed == "hf");
  }
}

TEST_CASE("GPU twin: det_gemm kernels rounding their half-reduction partials to bf16 are red", "[gpu][planted][declared_order]") {
  CHECK(probe(test::cuda_backend(), "det_gemm").verdict == Verdict::kGreen);
  PlantedBackend halves(test::cuda_backend(), "det_gemm", halves_forward, halves_backward);
  const DeclaredOrderResult r = probe(halves, "det_gemm");
  CHECK(r.verdict == Verdict::kRed);
  CHECK(r.observed == "neither");
}

TEST_CASE("GPU twin: a det_gemm K split picked by the batch size is red in the Option A probe's batch rows", "[gpu][planted][declared_order]") {
  // Upstream's invariance pattern makes every FP32 sum exact, so no association can show under
  // BN/chunked; the probe's batch rows (near-cancelling inputs, M = 1, 7, 59, 512 against 8192)
  // show it. As a kernel that tunes its K split to M would: calls below 1024 rows sum K in twice
  // the declared number of shards (a different FP32 fold).
  PlantedBackend by_batch(test::cuda_backend(), "det_gemm", cuda_with([](const Tensors& in, OpContext& c) {
                            if (find_tensor(in, "a")->shape()[0] < 1024) c.k_shards *= 2;
                          }));
  const DeclaredOrderResult r = probe(by_batch, "det_gemm");
  CHECK(r.verdict == Verdict::kRed);
  int red_rows = 0;
  for (const auto& t : r.tensors)
    if (t.name.find("c rows") == 0 && !passed(t)) ++red_rows;
  CHECK(red_rows == 4);  // M = 1, 7, 59, 512
}

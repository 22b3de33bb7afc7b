// GPU twins of the CPU planted defects (test/run/planted_defects_test.cpp, declared_order_test.cpp,
// invariance_test.cpp): the cuda_bf16 kernels themselves, run with a defect's setting — no eps,
// the other rounding order, a wider tree, a tree chosen by the batch size, an FP32 output — must
// turn the same judges red, while the plain cuda_bf16 backend is green on the same cells.
#include "gpu_test_support.hpp"
#include "planted_backend.hpp"
#include "ws1/declared_order.hpp"
#include "ws1/invariance.hpp"
#include "ws1/numeric.hpp"

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
test::OpKernel cuda_backward_with(std::function<void(const Tensors&, OpContext&)> change) {
  return [change](const Op& op, const Tensors& in, const OpContext& ctx) {
    OpContext c = ctx;
    change(in, c);
    return test::cuda_backend().backward(op, in, c);
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
  auto r = op == "det_gemm" ? probe_det_gemm_tree(run, backend, *find_op_impl(op))
                            : probe_rms_norm_order(run, backend, *find_op_impl(op));
  REQUIRE(r.ok());
  INFO(r->op << ": declared " << r->declared << ", observed " << r->observed << "; " << r->reason);
  return std::move(r).value();
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

TEST_CASE("GPU twin: det_gemm kernels over leaves of twice the declared width are red", "[gpu][planted][declared_order]") {
  CHECK(probe(test::cuda_backend(), "det_gemm").verdict == Verdict::kGreen);
  const auto wider = [](const Tensors&, OpContext& c) { c.k_tree_leaf *= 2; };
  PlantedBackend wide(test::cuda_backend(), "det_gemm", cuda_with(wider), cuda_backward_with(wider));
  const DeclaredOrderResult r = probe(wide, "det_gemm");
  CHECK(r.verdict == Verdict::kRed);
  CHECK(r.observed == "neither");
}

TEST_CASE("GPU twin: a det_gemm tree picked by the batch size is red under BN/chunked", "[gpu][planted][invariance]") {
  const test::Workload& w = real();
  const Op& op = *find_op_impl("det_gemm");
  const auto run_cells = [&](Backend& b) {
    RunContext run = test::cuda_run_context(w);
    FixtureGenerator gen;
    const std::vector<Transform> transforms{Transform::kBnChunked};
    auto cells = run_invariance_cells(run, gen, b, op, Judgment::kForwardInvariance, transforms,
                                      w.spec("det_gemm/invariance/pattern"));
    REQUIRE(cells.ok());
    REQUIRE_FALSE(cells->empty());
    return cells->front();
  };
  CHECK(run_cells(test::cuda_backend()).verdict == Verdict::kGreen);
  // As a kernel that tunes its reduction to M would: the packed call (all rows) takes leaves of
  // 64, the chunks the declared 32.
  const std::int64_t all = w.manifest.total_tokens();
  PlantedBackend by_batch(test::cuda_backend(), "det_gemm", cuda_with([all](const Tensors& in, OpContext& c) {
                            if (find_tensor(in, "a")->shape()[0] >= all) c.k_tree_leaf *= 2;
                          }));
  const Cell red = run_cells(by_batch);
  INFO(red.reason);
  CHECK(red.verdict == Verdict::kRed);
}

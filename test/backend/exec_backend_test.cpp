// The exec backend against ws1check's own worker (`ws1check worker --backend cpu_bf16`, path
// from meson): every accuracy cell of the smoke workload, and the invariance cells of every op,
// give cpu_bf16's verdicts and reasons, and the candidate's bits are cpu_bf16's. Planted faulty
// workers run end to end in exec_cli_test.py.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>

#include "run_test_support.hpp"
#include "ws1/exec_backend.hpp"
#include "ws1/invariance.hpp"

using namespace ws1;

namespace {

const test::Workload& smoke() { return test::workload("ws1-smoke"); }

// One worker for the whole test binary, as one run has.
Backend& through_protocol() {
  static std::unique_ptr<Backend> backend = [] {
    auto b = make_exec_backend({std::string("'") + WS1CHECK_EXE + "' worker --backend cpu_bf16", "",
                                std::chrono::seconds(300)});
    if (!b) FAIL(b.error().message());
    return std::move(b).value();
  }();
  return *backend;
}

Backend& direct() {
  static std::unique_ptr<Backend> backend = make_cpu_bf16_backend();
  return *backend;
}

void require_same_bits(const Tensors& a, const Tensors& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].name);
    CHECK(a[i].name == b[i].name);
    REQUIRE(a[i].tensor.dtype() == b[i].tensor.dtype());
    REQUIRE(a[i].tensor.shape() == b[i].tensor.shape());
    const Tensor x = a[i].tensor.contiguous(), y = b[i].tensor.contiguous();
    CHECK(std::memcmp(x.data<std::byte>(), y.data<std::byte>(), x.nbytes()) == 0);
  }
}

void require_same_cell(const Cell& a, const Cell& b) {
  INFO(a.id << ": " << a.reason);
  CHECK(a.id == b.id);
  CHECK(a.verdict == b.verdict);
  CHECK(a.reason == b.reason);
  REQUIRE(a.accuracy.size() == b.accuracy.size());
  for (std::size_t i = 0; i < a.accuracy.size(); ++i) {
    CHECK(a.accuracy[i].violations == b.accuracy[i].violations);
    CHECK(a.accuracy[i].abs_error.max == b.accuracy[i].abs_error.max);
  }
  REQUIRE(a.bitwise.size() == b.bitwise.size());
  for (std::size_t i = 0; i < a.bitwise.size(); ++i) CHECK(a.bitwise[i].mismatches == b.bitwise[i].mismatches);
}

}  // namespace

TEST_CASE("exec: ws1check's worker announces cpu_bf16 with its kernel ids", "[exec]") {
  Backend& exec = through_protocol();
  CHECK(exec.name() == "cpu_bf16");
  for (const Op* op : all_ops()) {
    CHECK_THAT(exec.kernel_id(*op, Direction::kForward),
               Catch::StartsWith(direct().kernel_id(*op, Direction::kForward) + " on cpu: "));
  }
  CHECK_FALSE(exec.readback().tf32_enabled.has_value());
  CHECK_FALSE(exec.readback().cublas_math_mode.has_value());
}

TEST_CASE("exec: every accuracy cell through the protocol equals cpu_bf16's, bit for bit", "[exec]") {
  const test::Workload& w = smoke();
  const RunContext run = w.run_context();
  FixtureGenerator generator;
  int cells = 0;
  for (const FixtureSpec& spec : w.catalogue) {
    if (spec.tier == Tier::kInvariance) continue;
    const Op* op = find_op_impl(spec.op);
    REQUIRE(op != nullptr);
    auto in = generated_inputs(run, generator, spec);
    REQUIRE(in.ok());
    for (Judgment j : {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy}) {
      CellTensors ours, theirs;
      auto a = run_accuracy_cell_on(run, direct(), *op, j, *in, &ours);
      auto b = run_accuracy_cell_on(run, through_protocol(), *op, j, *in, &theirs);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      require_same_cell(*a, *b);
      require_same_bits(ours.candidate, theirs.candidate);
      ++cells;
    }
  }
  CHECK(cells > 40);
}

TEST_CASE("exec: every invariance cell through the protocol equals cpu_bf16's", "[exec]") {
  const test::Workload& w = smoke();
  const RunContext run = w.run_context();
  FixtureGenerator generator;
  for (const Op* op : all_ops()) {
    const std::string id = std::string(op->name()) + "/invariance/pattern";
    const FixtureSpec* spec = nullptr;
    for (const FixtureSpec& s : w.catalogue)
      if (s.id == id) spec = &s;
    if (spec == nullptr) continue;
    for (Judgment j : {Judgment::kForwardInvariance, Judgment::kGradientInvariance}) {
      auto a = run_invariance_cells(run, generator, direct(), *op, j, all_transforms(), *spec);
      auto b = run_invariance_cells(run, generator, through_protocol(), *op, j, all_transforms(), *spec);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      REQUIRE(a->size() == b->size());
      for (std::size_t i = 0; i < a->size(); ++i) require_same_cell((*a)[i], (*b)[i]);
    }
  }
}

TEST_CASE("exec: bad names, bad time-outs and a worker that cannot start", "[exec]") {
  auto empty = make_backend("exec:  ");
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().code == ExitCode::kBadInput);

  setenv("WS1CHECK_EXEC_TIMEOUT", "soon", 1);
  auto bad = exec_timeout_from_env();
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "WS1CHECK_EXEC_TIMEOUT: soon: expected a positive number of seconds");
  setenv("WS1CHECK_EXEC_TIMEOUT", "0.25", 1);
  REQUIRE(exec_timeout_from_env().ok());
  CHECK(exec_timeout_from_env()->count() == 250);
  unsetenv("WS1CHECK_EXEC_TIMEOUT");
  CHECK(*exec_timeout_from_env() == kExecDefaultTimeout);

  auto missing = make_exec_backend({"/nonexistent/ws1-worker --serve", "", std::chrono::seconds(30)});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ExitCode::kEnvironment);
  CHECK_THAT(missing.error().message(),
             Catch::StartsWith("--backend: exec:/nonexistent/ws1-worker --serve: handshake failed: ") &&
                 Catch::Contains("exited with status 127") && Catch::Contains("/nonexistent/ws1-worker: not found"));

  auto wrong_profile = make_exec_backend({std::string("'") + WS1CHECK_EXE + "' worker --backend cpu_bf16",
                                          "triton_cuda_bf16", std::chrono::seconds(60), "--backend"});
  REQUIRE_FALSE(wrong_profile.ok());
  CHECK_THAT(wrong_profile.error().message(),
             Catch::Contains(R"(it announces backend "cpu_bf16", expected "triton_cuda_bf16")"));
}

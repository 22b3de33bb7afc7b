// The exec backend against ws1check's own worker (`ws1check worker --backend cpu_bf16`, path
// from meson): every accuracy cell of the smoke workload, and the invariance cells of every op,
// give cpu_bf16's verdicts and reasons, and the candidate's bits are cpu_bf16's — with every
// input in the request's file, and with the worker's input cache in use. Planted faulty
// workers run end to end in exec_cli_test.py.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "run_test_support.hpp"
#include "ws1/exec_backend.hpp"
#include "ws1/invariance.hpp"

using namespace ws1;

namespace {

const test::Workload& smoke() { return test::workload("ws1-smoke"); }

std::unique_ptr<Backend> start_worker(const std::string& flags, std::uint64_t cache_min_bytes) {
  ExecOptions o{std::string("'") + WS1CHECK_EXE + "' worker --backend cpu_bf16 " + flags, "",
                std::chrono::seconds(300)};
  o.input_cache_min_bytes = cache_min_bytes;
  auto b = make_exec_backend(o);
  if (!b) FAIL(b.error().message());
  return std::move(b).value();
}

// One worker for the whole test binary, as one run has: the smoke tensors stay below the input
// cache's threshold, so every input travels in the file.
Backend& through_protocol() {
  static std::unique_ptr<Backend> backend = start_worker("", 1 << 20);
  return *backend;
}

// The same worker with a small input cache and every tensor of 256 bytes or more kept: most
// inputs are named by key, and the cache is full most of the time (evictions on most calls).
Backend& through_cache() {
  static std::unique_ptr<Backend> backend = start_worker("--input-cache-bytes 300000", 256);
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
      CellTensors ours, theirs, kept;
      auto a = run_accuracy_cell_on(run, direct(), *op, j, *in, &ours);
      auto b = run_accuracy_cell_on(run, through_protocol(), *op, j, *in, &theirs);
      auto c = run_accuracy_cell_on(run, through_cache(), *op, j, *in, &kept);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      REQUIRE(c.ok());
      require_same_cell(*a, *b);
      require_same_bits(ours.candidate, theirs.candidate);
      require_same_cell(*a, *c);
      require_same_bits(ours.candidate, kept.candidate);
      ++cells;
    }
  }
  CHECK(cells > 40);
  CHECK(exec_cache_stats(through_protocol()).hits == 0);  // a cache announced, every input below the threshold
  const ExecCacheStats kept = exec_cache_stats(through_cache());
  CHECK(kept.enabled);
  CHECK(kept.hits > 40);  // the backward calls reuse their forward's inputs, at least
  CHECK(kept.bytes_not_sent > 0);
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
      auto c = run_invariance_cells(run, generator, through_cache(), *op, j, all_transforms(), *spec);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      REQUIRE(c.ok());
      // Every transform's cells equal the direct run's, but an applicable layout's: the worker
      // gets contiguous copies, so that cell is N/A with the reason (one cell, no /parameters).
      std::vector<Cell> expected, direct_layout;
      for (const Cell& cell : *a) (cell.transform == "layout" ? direct_layout : expected).push_back(cell);
      REQUIRE_FALSE(direct_layout.empty());
      const bool applicable = direct_layout[0].verdict != Verdict::kNa;
      if (!applicable) expected.insert(expected.end(), direct_layout.begin(), direct_layout.end());
      for (const Cell& cell : direct_layout)
        if (applicable) CHECK(cell.verdict == Verdict::kGreen);  // in process the views reach cpu_bf16
      for (const std::vector<Cell>* over : {&*b, &*c}) {
        std::vector<Cell> same, layout;
        for (const Cell& cell : *over)
          (applicable && cell.transform == "layout" ? layout : same).push_back(cell);
        const auto by_id = [](const Cell& x, const Cell& y) { return x.id < y.id; };
        std::sort(same.begin(), same.end(), by_id);
        std::sort(expected.begin(), expected.end(), by_id);
        REQUIRE(same.size() == expected.size());
        for (std::size_t i = 0; i < same.size(); ++i) require_same_cell(expected[i], same[i]);
        if (!applicable) continue;
        REQUIRE(layout.size() == 1);
        INFO(layout[0].reason);
        CHECK(layout[0].verdict == Verdict::kNa);
        CHECK_THAT(layout[0].reason, Catch::Contains("carries no strides") && Catch::Contains("cpu_bf16"));
      }
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

// Fixtures that can show faults (docs/fixtures.md §3, issue 19): for each input condition a
// planted candidate that mishandles it is green on the fixtures without the condition and red
// on the fixture that holds it, and cpu_bf16 (the faithful twin) is green on both. Smoke
// workload; tolerances from the shipped contract.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <memory>

#include "run_test_support.hpp"
#include "ws1/invariance.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;
using test::Kernel;
using test::OpKernel;
using test::PlantedBackend;

namespace {

const test::Workload& smoke() { return test::workload("ws1-smoke"); }

Cell accuracy_cell(Backend& backend, const std::string& op, Judgment j, const std::string& fixture) {
  RunContext run = smoke().run_context();
  FixtureGenerator gen;
  auto cell = run_accuracy_cell(run, gen, backend, *find_op_impl(op), j, smoke().spec(fixture));
  REQUIRE(cell.ok());
  return std::move(cell).value();
}

Verdict forward(Backend& b, const std::string& op, const std::string& fixture) {
  const Cell c = accuracy_cell(b, op, Judgment::kForwardAccuracy, fixture);
  INFO(c.id << ": " << c.reason);
  return c.verdict;
}

Verdict gradient(Backend& b, const std::string& op, const std::string& fixture) {
  const Cell c = accuracy_cell(b, op, Judgment::kGradientAccuracy, fixture);
  INFO(c.id << ": " << c.reason);
  return c.verdict;
}

// The verdict of one invariance transform's token cell (or, with `parameters`, its parameter
// cell) on the op's invariance fixture of `family`.
Verdict invariance(Backend& b, const std::string& op, Judgment j, Transform t, const std::string& family,
                   bool parameters = false) {
  RunContext run = smoke().run_context();
  FixtureGenerator gen;
  auto cells = run_invariance_cells(run, gen, b, *find_op_impl(op), j, std::vector<Transform>{t},
                                    smoke().spec(op + "/invariance/" + family));
  REQUIRE(cells.ok());
  for (const Cell& c : *cells) {
    if (c.id.ends_with("/parameters") != parameters) continue;
    INFO(c.id << ": " << c.reason);
    CHECK(c.fixture->id == op + "/invariance/" + family);
    return c.verdict;
  }
  FAIL("no such cell");
  throw;
}

// `in` with tensor `name` replaced by `edit` of a copy of it.
Tensors edited(const Tensors& in, const std::string& name, const std::function<void(Tensor&)>& edit) {
  Tensors out;
  for (const NamedTensor& t : in) {
    if (t.name != name) {
      out.push_back(t);
      continue;
    }
    Tensor c = t.tensor.contiguous();  // a copy
    edit(c);
    out.push_back({t.name, std::move(c)});
  }
  return out;
}

// The faithful kernel of `op` (forward or backward) on inputs changed by `change`: a candidate
// that mishandles one input condition and is otherwise cpu_bf16.
OpKernel on_changed_inputs(bool backward, std::function<Tensors(const Tensors&)> change) {
  return [=](const Op& op, const Tensors& in, const OpContext& ctx) {
    const Tensors c = change(in);
    return backward ? op.cpu_backward(c, ctx) : op.cpu_forward(c, ctx);
  };
}

}  // namespace

TEST_CASE("ignore_index targets: a candidate that gathers target 0 for them is red only on the "
          "ignore_index fixture", "[run][planted][fixtures]") {
  // A gather that clamps (or wraps) an ignored target instead of skipping the row: logp of
  // token 0 where the definition gives +0, and a softmax gradient row where it gives zeros.
  const auto clamp = [](const Tensors& in) {
    return edited(in, "targets", [](Tensor& t) {
      for (std::int64_t i = 0; i < t.numel(); ++i)
        if (t.data<std::int64_t>()[i] < 0) t.data<std::int64_t>()[i] = 0;
    });
  };
  PlantedBackend bad("batch_invariant_logp", on_changed_inputs(false, clamp), on_changed_inputs(true, clamp));
  auto cpu = make_cpu_bf16_backend();
  const std::string op = "batch_invariant_logp";
  for (const char* f : {"batch_invariant_logp/primary/normal", "batch_invariant_logp/primary/scaled_logit"}) {
    CHECK(forward(bad, op, f) == Verdict::kGreen);  // no ignored target: the defect cannot show
    CHECK(gradient(bad, op, f) == Verdict::kGreen);
  }
  CHECK(forward(bad, op, "batch_invariant_logp/primary/ignore_index") == Verdict::kRed);
  CHECK(gradient(bad, op, "batch_invariant_logp/primary/ignore_index") == Verdict::kRed);
  CHECK(forward(*cpu, op, "batch_invariant_logp/primary/ignore_index") == Verdict::kGreen);
  CHECK(gradient(*cpu, op, "batch_invariant_logp/primary/ignore_index") == Verdict::kGreen);
}

TEST_CASE("key masks: an attention candidate that ignores key_mask is red only on the key_mask "
          "fixture", "[run][planted][fixtures]") {
  const auto drop_mask = [](const Tensors& in) {
    Tensors out;
    for (const NamedTensor& t : in)
      if (t.name != "key_mask") out.push_back(t);
    return out;
  };
  PlantedBackend bad("attention", on_changed_inputs(false, drop_mask), on_changed_inputs(true, drop_mask));
  auto cpu = make_cpu_bf16_backend();
  CHECK(forward(bad, "attention", "attention/primary/normal") == Verdict::kGreen);
  CHECK(gradient(bad, "attention", "attention/primary/normal") == Verdict::kGreen);
  CHECK(forward(bad, "attention", "attention/primary/key_mask") == Verdict::kRed);
  CHECK(gradient(bad, "attention", "attention/primary/key_mask") == Verdict::kRed);
  CHECK(forward(*cpu, "attention", "attention/primary/key_mask") == Verdict::kGreen);
  CHECK(gradient(*cpu, "attention", "attention/primary/key_mask") == Verdict::kGreen);
}

namespace {

// PLANTED embedding backward: dtable rows accumulated in bf16 (each partial rounded), in token
// order, or in reverse token order on every second call (as an atomic scatter may pick).
Kernel bf16_scatter(bool alternate_order) {
  auto calls = std::make_shared<int>(0);
  return [=](const Tensors& in, const OpContext&) -> Result<Tensors> {
    const Tensor ids = find_tensor(in, "ids")->contiguous();
    const Tensor& table = *find_tensor(in, "table");
    const Tensor dy = find_tensor(in, "dy.y")->contiguous();
    const std::int64_t h = table.shape()[1], n = ids.numel();
    const bool reverse = alternate_order && (*calls)++ % 2 == 1;
    Tensor d(DType::kBF16, table.shape());  // zero-filled
    auto* out = d.data<bf16>();
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t t = reverse ? n - 1 - k : k;
      const std::int64_t row = ids.data<std::int64_t>()[t];
      for (std::int64_t i = 0; i < h; ++i)
        out[row * h + i] = to_bf16(from_bf16(out[row * h + i]) + from_bf16(dy.data<bf16>()[t * h + i]));
    }
    return Tensors{{"dtable", std::move(d)}};
  };
}

}  // namespace

TEST_CASE("repeated ids: a bf16 scatter-add of embedding's dtable is red only where ids repeat",
          "[run][planted][fixtures]") {
  PlantedBackend bad("embedding", nullptr, bf16_scatter(false));
  auto cpu = make_cpu_bf16_backend();
  CHECK(gradient(bad, "embedding", "embedding/primary/normal") == Verdict::kGreen);
  CHECK(gradient(bad, "embedding", "embedding/primary/repeated_ids") == Verdict::kRed);
  CHECK(gradient(*cpu, "embedding", "embedding/primary/repeated_ids") == Verdict::kGreen);
}

TEST_CASE("repeated ids: a scatter whose order changes between calls is red under repeat on the "
          "inexact family, whose ids repeat", "[run][planted][fixtures][invariance]") {
  const Judgment j = Judgment::kGradientInvariance;
  PlantedBackend bad("embedding", nullptr, bf16_scatter(true));
  // Upstream's pattern: the ids are the fixture's distinct token ids, so no order can show.
  CHECK(invariance(bad, "embedding", j, Transform::kRepeat, "pattern", true) == Verdict::kGreen);
  PlantedBackend bad_again("embedding", nullptr, bf16_scatter(true));
  CHECK(invariance(bad_again, "embedding", j, Transform::kRepeat, "inexact", true) == Verdict::kRed);
  auto cpu = make_cpu_bf16_backend();
  CHECK(invariance(*cpu, "embedding", j, Transform::kRepeat, "inexact", true) == Verdict::kGreen);
}

namespace {

// `t` [.., W] (a 2-byte dtype) with its last dimension reversed (a copy).
Tensor reversed_last(const Tensor& t) {
  const Tensor c = t.contiguous();
  Tensor out(c.dtype(), c.shape());
  const std::int64_t w = c.shape().back(), rows = c.numel() / w;
  const auto* src = c.data<std::uint16_t>();
  auto* dst = out.data<std::uint16_t>();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < w; ++i) dst[r * w + i] = src[r * w + (w - 1 - i)];
  return out;
}

}  // namespace

TEST_CASE("inexact invariance family: a linear_logp whose GEMM order depends on the batch size is "
          "red on it and green on upstream's pattern", "[run][planted][fixtures][invariance]") {
  // Calls of more than 32 rows reduce the logits' K in reverse order (hidden and weight reversed
  // along H: the same products in another order), as a kernel that picks its split by batch
  // size. BN/chunked compares the 59-row call with calls of at most 7 rows; logp is FP32, so a
  // logit that moves by one FP32 ulp shows.
  PlantedBackend bad("linear_logp", [](const Op& op, const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    if (find_tensor(in, "hidden")->shape()[0] <= 32) return op.cpu_forward(in, ctx);
    Tensors r;
    for (const NamedTensor& t : in)
      r.push_back({t.name, t.name == "hidden" || t.name == "weight" ? reversed_last(t.tensor) : t.tensor});
    return op.cpu_forward(r, ctx);
  });
  const Judgment j = Judgment::kForwardInvariance;
  // At the smoke widths every FP32 sum of products over the pattern is exact (multiples of
  // 2^-20 below 1), so the order cannot show there.
  CHECK(invariance(bad, "linear_logp", j, Transform::kBnChunked, "pattern") == Verdict::kGreen);
  CHECK(invariance(bad, "linear_logp", j, Transform::kBnChunked, "inexact") == Verdict::kRed);
  auto cpu = make_cpu_bf16_backend();
  CHECK(invariance(*cpu, "linear_logp", j, Transform::kBnChunked, "inexact") == Verdict::kGreen);
}

TEST_CASE("cpu_bf16 is invariant on the inexact family under every transform", "[run][invariance][fixtures]") {
  const test::Workload& w = smoke();
  auto cpu = make_cpu_bf16_backend();
  std::int64_t green = 0;
  for (const auto& info : op_catalogue()) {
    const Op& op = *find_op_impl(info.name);
    const auto specs = invariance_fixtures(w.catalogue, info.name);
    if (specs.size() < 2) continue;
    REQUIRE(specs[1]->distribution == Distribution::kInexact);
    for (Judgment j : {Judgment::kForwardInvariance, Judgment::kGradientInvariance}) {
      std::vector<Transform> ts;
      for (Transform t : all_transforms()) {
        auto na = transform_not_applicable(op, t, direction_of(j));
        if (!na || na->listed) ts.push_back(t);
      }
      RunContext run = w.run_context();
      FixtureGenerator gen;
      auto cells = run_invariance_cells(run, gen, *cpu, op, j, ts, *specs[1]);
      REQUIRE(cells.ok());
      for (const Cell& c : *cells) {
        INFO(c.id << ": " << c.reason);
        CHECK(c.id.find("/invariance/inexact/") != std::string::npos);
        CHECK(c.verdict != Verdict::kRed);
        green += c.verdict == Verdict::kGreen;
      }
    }
  }
  CHECK(green > 100);
}

namespace {

// `t` [B, H, S, D] with head h moved to slot to[h] (a copy).
Tensor heads_moved(const Tensor& t, const std::vector<std::int64_t>& to) {
  const Tensor c = t.contiguous();
  Tensor out(c.dtype(), c.shape());
  const std::int64_t b = c.shape()[0], h = c.shape()[1];
  const std::size_t row = static_cast<std::size_t>(c.shape()[2] * c.shape()[3]) * dtype_size(c.dtype());
  for (std::int64_t i = 0; i < b; ++i)
    for (std::int64_t j = 0; j < h; ++j)
      std::memcpy(out.data<std::byte>() + static_cast<std::size_t>(i * h + to[static_cast<std::size_t>(j)]) * row,
                  c.data<std::byte>() + static_cast<std::size_t>(i * h + j) * row, row);
  return out;
}

// PLANTED attention: query head h reads kv head h % Hkv (interleaved) instead of h / (Hq / Hkv).
// Head h runs in slot (h % Hkv) * group + h / Hkv of the faithful kernel, whose kv head for that
// slot is h % Hkv; results move back. With one kv head both maps are the identity.
OpKernel interleaved_gqa(bool backward) {
  return [=](const Op& op, const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    const std::int64_t hq = find_tensor(in, "q")->shape()[1], hkv = find_tensor(in, "k")->shape()[1];
    std::vector<std::int64_t> to(static_cast<std::size_t>(hq)), back(static_cast<std::size_t>(hq));
    for (std::int64_t h = 0; h < hq; ++h) {
      to[static_cast<std::size_t>(h)] = (h % hkv) * (hq / hkv) + h / hkv;
      back[static_cast<std::size_t>(to[static_cast<std::size_t>(h)])] = h;
    }
    Tensors moved;
    for (const NamedTensor& t : in)
      moved.push_back({t.name, t.name == "q" || t.name == "dy.o" ? heads_moved(t.tensor, to) : t.tensor});
    auto out = backward ? op.cpu_backward(moved, ctx) : op.cpu_forward(moved, ctx);
    if (!out) return out;
    for (NamedTensor& t : *out)
      if (t.name == "o" || t.name == "dq") t.tensor = heads_moved(t.tensor, back);
    return out;
  };
}

Verdict gqa_verdict(Backend& b, const std::string& workload, Judgment j) {
  const test::Workload& w = test::workload(workload);
  RunContext run = w.run_context();
  FixtureGenerator gen;
  auto cell = run_accuracy_cell(run, gen, b, *find_op_impl("attention"), j, w.spec("attention/primary/normal"));
  REQUIRE(cell.ok());
  INFO(workload << " " << cell->id << ": " << cell->reason);
  return cell->verdict;
}

}  // namespace

TEST_CASE("ws1-smoke-gqa: a wrong GQA head map is red with two kv heads, and cannot show with one",
          "[run][planted][fixtures]") {
  PlantedBackend bad("attention", interleaved_gqa(false), interleaved_gqa(true));
  auto cpu = make_cpu_bf16_backend();
  REQUIRE(test::workload("ws1-smoke-gqa").manifest.model.config.num_key_value_heads == 2);
  REQUIRE(test::workload("ws1-smoke-gqa").manifest.model.config.num_attention_heads == 8);
  for (Judgment j : {Judgment::kForwardAccuracy, Judgment::kGradientAccuracy}) {
    CHECK(gqa_verdict(bad, "ws1-smoke", j) == Verdict::kGreen);  // Hkv = 1: the same map
    CHECK(gqa_verdict(bad, "ws1-smoke-gqa", j) == Verdict::kRed);
    CHECK(gqa_verdict(*cpu, "ws1-smoke-gqa", j) == Verdict::kGreen);
  }
}

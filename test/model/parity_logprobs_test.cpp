// Logprobs measured elsewhere (parity --logprobs): the three file forms read back to the same
// pairs, each bad file refused naming the file and the field, and the cell's verdict from the
// shipped contract's thresholds — a faithful pair green, a planted divergence, a NaN and a
// strict mismatch red, the same statistics as dlogp_stats.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "model_test_support.hpp"
#include "temp_dir.hpp"
#include "ws1/parity.hpp"
#include "ws1/safetensors.hpp"

using namespace ws1;
namespace fs = std::filesystem;

namespace {

using test::TempDir;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// A version 1.0 .npy file: magic, version, header length, the dict padded to 64 bytes, data.
std::string npy(const std::vector<float>& v, const std::string& descr = "<f4", const std::string& order = "False",
                const std::string& shape = "") {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + order +
                     ", 'shape': " + (shape.empty() ? "(" + std::to_string(v.size()) + ",)" : shape) + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string out = std::string("\x93NUMPY", 6) + '\x01' + '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return out;
}

Tensor f32(const std::vector<float>& v) {
  Tensor t(DType::kF32, {static_cast<std::int64_t>(v.size())});
  std::memcpy(t.data<float>(), v.data(), v.size() * sizeof(float));
  return t;
}

Tensor i64(const std::vector<std::int64_t>& v) {
  Tensor t(DType::kI64, {static_cast<std::int64_t>(v.size())});
  std::memcpy(t.data<std::int64_t>(), v.data(), v.size() * sizeof(std::int64_t));
  return t;
}

Status write_tensors(const std::string& path, const std::vector<NamedTensor>& tensors) {
  return write_safetensors(path, tensors);
}

std::string error_of(const Result<LogprobPairs>& r) {
  REQUIRE(!r.ok());
  return r.error().message();
}

const Contract& contract() {
  static const Contract c = [] {
    auto r = load_contract(test::source_root() / "contracts" / "ws1-c1-v2.json");
    REQUIRE(r.ok());
    return std::move(r).value();
  }();
  return c;
}

double threshold(std::string_view name) {
  for (ChainMetric m : contract().chain.gated_metrics)
    if (contract_name(m) == name) return *contract().chain_threshold(m, contract().policy.execution_dtype);
  FAIL("no gated metric " << name);
  return 0;
}

const MetricResult& metric(const Cell& c, std::string_view name) {
  for (const MetricResult& m : c.metrics)
    if (m.name == name) return m;
  FAIL("no metric " << name);
  return c.metrics.front();
}

}  // namespace

TEST_CASE("logprob files: safetensors, JSONL and an .npy pair read to the same pairs", "[parity][logprobs]") {
  TempDir d("ws1-logprobs");
  const std::vector<float> lhs = {-1.0f, -2.5f, -0.125f, -7.75f}, rhs = {-1.0f, -2.5f, -0.25f, -7.5f};
  REQUIRE(write_tensors(d.file("p.safetensors"),
                            {{"lhs", f32(lhs)}, {"rhs", f32(rhs)}, {"sequence", i64({0, 0, 1, 1})},
                             {"position", i64({4, 5, 2, 3})}})
              .ok());
  write_bytes(d.file("p.jsonl"),
              "{\"lhs\": -1.0, \"rhs\": -1.0, \"sequence\": 0, \"position\": 4}\n"
              "{\"lhs\": -2.5, \"rhs\": -2.5, \"sequence\": 0, \"position\": 5}\n\n"
              "{\"lhs\": -0.125, \"rhs\": -0.25, \"sequence\": 1, \"position\": 2}\r\n"
              "{\"lhs\": -7.75, \"rhs\": -7.5, \"sequence\": 1, \"position\": 3}");
  write_bytes(d.file("l.npy"), npy(lhs));
  write_bytes(d.file("r.npy"), npy(rhs));
  for (const std::string& spec : {d.file("p.safetensors"), d.file("p.jsonl"), d.file("l.npy") + "," + d.file("r.npy")}) {
    INFO(spec);
    auto p = read_logprob_pairs(spec);
    REQUIRE(p.ok());
    CHECK(p->source == spec);
    CHECK(p->lhs == lhs);
    CHECK(p->rhs == rhs);
    if (spec.find(".npy") == std::string::npos) {
      CHECK(p->sequence == std::vector<std::int64_t>{0, 0, 1, 1});
      CHECK(p->position == std::vector<std::int64_t>{4, 5, 2, 3});
    } else {
      CHECK(p->sequence.empty());
    }
  }
}

TEST_CASE("logprob files: bad input names the file and the field", "[parity][logprobs]") {
  TempDir d("ws1-logprobs");
  const std::vector<float> two = {-1.0f, -2.0f};
  REQUIRE(write_tensors(d.file("no_rhs.safetensors"), {{"lhs", f32(two)}}).ok());
  REQUIRE(write_tensors(d.file("bf16.safetensors"), {{"lhs", f32(two)}, {"rhs", Tensor(DType::kBF16, {2})}}).ok());
  REQUIRE(write_tensors(d.file("extra.safetensors"), {{"lhs", f32(two)}, {"rhs", f32(two)}, {"token", i64({1, 2})}}).ok());
  REQUIRE(write_tensors(d.file("short.safetensors"), {{"lhs", f32(two)}, {"rhs", f32({-1.0f})}}).ok());
  REQUIRE(write_tensors(d.file("seq.safetensors"), {{"lhs", f32(two)}, {"rhs", f32(two)}, {"sequence", i64({0})}}).ok());
  CHECK_THAT(error_of(read_logprob_pairs(d.file("no_rhs.safetensors"))), Catch::Contains("no_rhs.safetensors: rhs: missing"));
  CHECK_THAT(error_of(read_logprob_pairs(d.file("bf16.safetensors"))), Catch::Contains("rhs: BF16 [2]: expected F32 [N]"));
  CHECK_THAT(error_of(read_logprob_pairs(d.file("extra.safetensors"))), Catch::Contains("token: not a tensor of a logprob file"));
  CHECK_THAT(error_of(read_logprob_pairs(d.file("short.safetensors"))), Catch::Contains("rhs: 1 values; lhs has 2"));
  CHECK_THAT(error_of(read_logprob_pairs(d.file("seq.safetensors"))), Catch::Contains("sequence: 1 values; lhs has 2"));

  write_bytes(d.file("key.jsonl"), "{\"lhs\": -1.0, \"rhs\": -1.0}\n{\"lhs\": -1.0, \"rsh\": -1.0}\n");
  write_bytes(d.file("missing.jsonl"), "{\"lhs\": -1.0}\n");
  write_bytes(d.file("mixed.jsonl"), "{\"lhs\": -1.0, \"rhs\": -1.0, \"sequence\": 0}\n{\"lhs\": -1.0, \"rhs\": -1.0}\n");
  write_bytes(d.file("text.jsonl"), "{\"lhs\": -1.0, \"rhs\": -1.0}\nstep 3 logprobs\n");
  write_bytes(d.file("string.jsonl"), "{\"lhs\": \"-1.0\", \"rhs\": -1.0}\n");
  CHECK_THAT(error_of(read_logprob_pairs(d.file("key.jsonl"))), Catch::Contains("key.jsonl:2") && Catch::Contains("rsh"));
  CHECK_THAT(error_of(read_logprob_pairs(d.file("missing.jsonl"))), Catch::Contains("missing.jsonl:1") && Catch::Contains("rhs"));
  CHECK_THAT(error_of(read_logprob_pairs(d.file("mixed.jsonl"))),
             Catch::Contains("mixed.jsonl:2") && Catch::Contains("on every line or on none"));
  CHECK_THAT(error_of(read_logprob_pairs(d.file("text.jsonl"))), Catch::Contains("text.jsonl:2"));
  CHECK_THAT(error_of(read_logprob_pairs(d.file("string.jsonl"))), Catch::Contains("string.jsonl:1") && Catch::Contains("lhs"));

  write_bytes(d.file("l.npy"), npy(two));
  write_bytes(d.file("f8.npy"), npy(two, "<f8"));
  write_bytes(d.file("fortran.npy"), npy(two, "<f4", "True"));
  write_bytes(d.file("matrix.npy"), npy(two, "<f4", "False", "(1, 2)"));
  write_bytes(d.file("three.npy"), npy({-1.0f, -2.0f, -3.0f}));
  std::string cut = npy(two);
  cut.resize(cut.size() - 2);
  write_bytes(d.file("cut.npy"), cut);
  write_bytes(d.file("text.npy"), "not numpy at all");
  const std::string l = d.file("l.npy");
  CHECK_THAT(error_of(read_logprob_pairs(l + "," + d.file("f8.npy"))), Catch::Contains("f8.npy: descr: '<f8'"));
  CHECK_THAT(error_of(read_logprob_pairs(l + "," + d.file("fortran.npy"))), Catch::Contains("fortran_order: True"));
  CHECK_THAT(error_of(read_logprob_pairs(l + "," + d.file("matrix.npy"))), Catch::Contains("matrix.npy: shape: (1, 2)"));
  CHECK_THAT(error_of(read_logprob_pairs(l + "," + d.file("three.npy"))), Catch::Contains("three.npy: shape: (3,)"));
  CHECK_THAT(error_of(read_logprob_pairs(l + "," + d.file("cut.npy"))), Catch::Contains("cut.npy: data: 6 bytes"));
  CHECK_THAT(error_of(read_logprob_pairs(l + "," + d.file("text.npy"))), Catch::Contains("text.npy: magic"));
  CHECK_THAT(error_of(read_logprob_pairs(d.file("p.csv"))), Catch::Contains("expected FILE.safetensors, FILE.jsonl"));
  CHECK_THAT(error_of(read_logprob_pairs(l + "," + d.file("p.csv"))), Catch::Contains("expected FILE.safetensors"));
  const Result<LogprobPairs> absent = read_logprob_pairs(d.file("absent.jsonl"));
  CHECK_THAT(error_of(absent), Catch::Contains("absent.jsonl"));
  CHECK(absent.error().code == ExitCode::kBadInput);
}

TEST_CASE("logprob pairs: the contract's verdict — a faithful pair green, planted divergences red", "[parity][logprobs]") {
  const double max_abs = threshold("max_abs_dlogp");
  LogprobPairs faithful;
  faithful.source = "faithful.jsonl";
  for (int i = 0; i < 200; ++i) {
    const float l = -0.01f * static_cast<float>(i + 1);
    faithful.lhs.push_back(l);
    faithful.rhs.push_back(i % 3 == 0 ? l : l + 1.0f / 1024);  // |d| <= 2^-10, well inside every threshold
  }
  auto green = logprob_pairs_cell(contract(), faithful, false);
  REQUIRE(green.ok());
  INFO(green->reason);
  CHECK(green->verdict == Verdict::kGreen);
  CHECK(green->judgment == Judgment::kChainParity);
  CHECK(green->backend.actual == kLogprobsBackend);
  const DlogpStats s = dlogp_stats(faithful.lhs, faithful.rhs, contract().clip_interval());
  CHECK(metric(*green, "max_abs_dlogp").value == s.max_abs);
  CHECK(metric(*green, "max_abs_dlogp").threshold == max_abs);
  CHECK(metric(*green, "approx_kl0").value == s.approx_kl0);
  CHECK(metric(*green, "mean_abs_dlogp").value == s.mean_abs);
  CHECK(metric(*green, "active_tokens").value == 200);
  CHECK(metric(*green, "exact_zero_dlogp_tokens").value == 67);
  CHECK(metric(*green, "abs_dlogp_tokens0").value == 67);
  CHECK(metric(*green, "abs_dlogp_tokens(1e-04,1e-03]").value == 133);
  REQUIRE(green->fixture.has_value());
  CHECK(green->fixture->hash.size() == 32);

  SECTION("one token past max_abs_dlogp") {
    LogprobPairs p = faithful;
    p.rhs[17] = p.lhs[17] - static_cast<float>(2 * max_abs);
    auto red = logprob_pairs_cell(contract(), p, false);
    REQUIRE(red.ok());
    CHECK(red->verdict == Verdict::kRed);
    CHECK_THAT(red->reason, Catch::Contains("max_abs_dlogp"));
  }
  SECTION("a NaN logprob, named by its sequence and position") {
    LogprobPairs p = faithful;
    p.sequence.assign(200, 3);
    p.position.assign(200, 0);
    p.position[41] = 12;
    p.rhs[41] = std::numeric_limits<float>::quiet_NaN();
    auto red = logprob_pairs_cell(contract(), p, false);
    REQUIRE(red.ok());
    CHECK(red->verdict == Verdict::kRed);
    CHECK_THAT(red->reason, Catch::Contains("NaN/Inf") && Catch::Contains("token 41 (sequence 3, position 12)"));
    CHECK(metric(*red, "abs_dlogp_tokensnan/inf").value == 1);
  }
  SECTION("strict: any d != 0 is red, the same pair green without it") {
    auto strict = logprob_pairs_cell(contract(), faithful, true);
    REQUIRE(strict.ok());
    CHECK(strict->verdict == Verdict::kRed);
    CHECK_THAT(strict->reason, Catch::Contains("strict: d is not exactly 0 at 133 of 200 tokens"));
    LogprobPairs same = faithful;
    same.rhs = same.lhs;
    auto equal = logprob_pairs_cell(contract(), same, true);
    REQUIRE(equal.ok());
    CHECK(equal->verdict == Verdict::kGreen);
  }
  SECTION("no tokens") {
    auto empty = logprob_pairs_cell(contract(), LogprobPairs{"empty.jsonl", {}, {}, {}, {}}, false);
    REQUIRE(empty.ok());
    CHECK(empty->verdict == Verdict::kRed);
    CHECK_THAT(empty->reason, Catch::Contains("empty active token set"));
  }
}

TEST_CASE("abs_dlogp_histogram: zero, decades, above one, non-finite", "[parity][logprobs]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> lhs = {0, 0, 0, 0, 0, 0, 0, 0};
  const std::vector<float> rhs = {0, 1e-9f, 5e-7f, 1e-3f, 0.5f, 1.0f, 3.0f, nan};
  std::map<std::string, std::int64_t> h;
  for (const auto& [bin, n] : abs_dlogp_histogram(lhs, rhs)) h[bin] = n;
  CHECK(h["0"] == 1);
  CHECK(h["(0,1e-08]"] == 1);
  CHECK(h["(1e-07,1e-06]"] == 1);
  CHECK(h["(1e-04,1e-03]"] + h["(1e-03,1e-02]"] == 1);  // 1e-3f sits on the edge, either side of it in float32
  CHECK(h["(1e-01,1]"] == 2);
  CHECK(h["(1,inf)"] == 1);
  CHECK(h["nan/inf"] == 1);
  std::int64_t total = 0;
  for (const auto& [bin, n] : h) total += n;
  CHECK(total == 8);
}

TEST_CASE("logprob pairs under ws1-c1-v3: a uniform drift inside v2's max_abs_dlogp is red by mean_abs_dlogp "
          "and approx_kl0; its faithful twin stays green", "[parity][logprobs][contract_v3]") {
  auto loaded = load_contract(test::source_root() / "contracts" / "ws1-c1-v3.json");
  REQUIRE(loaded.ok());
  const Contract& v3 = *loaded;
  const auto bf16 = v3.policy.execution_dtype;
  const double max_abs = *v3.chain_threshold(ChainMetric::kMaxAbsDlogp, bf16);
  const double mean_abs = *v3.chain_threshold(ChainMetric::kMeanAbsDlogp, bf16);
  const double kl = *v3.chain_threshold(ChainMetric::kApproxKl0, bf16);
  // Every token off by 3/4 of max_abs_dlogp: the v2 gate (max only, kl at 5e-2) passes it;
  // mean |d| = 0.75 max_abs and approx_kl0 ~ d^2 / 2 exceed v3's thresholds.
  const float d = static_cast<float>(0.75 * max_abs);
  REQUIRE(d > mean_abs);
  REQUIRE(0.5 * d * d > kl);
  LogprobPairs drift, twin;
  drift.source = "drift.jsonl";
  twin.source = "twin.jsonl";
  for (int i = 0; i < 1000; ++i) {
    const float l = -0.5f - 0.001f * static_cast<float>(i);
    drift.lhs.push_back(l);
    drift.rhs.push_back(l - d);
    twin.lhs.push_back(l);
    twin.rhs.push_back(i % 8 == 0 ? l - 1.0f / 1024 : l);  // a few tokens at 2^-10
  }
  auto old = logprob_pairs_cell(contract(), drift, false);
  REQUIRE(old.ok());
  CHECK(old->verdict == Verdict::kGreen);
  auto red = logprob_pairs_cell(v3, drift, false);
  REQUIRE(red.ok());
  CHECK(red->verdict == Verdict::kRed);
  CHECK_THAT(red->reason, Catch::Contains("mean_abs_dlogp") && Catch::Contains("approx_kl0"));
  CHECK(metric(*red, "mean_abs_dlogp").threshold == mean_abs);
  auto green = logprob_pairs_cell(v3, twin, false);
  REQUIRE(green.ok());
  INFO(green->reason);
  CHECK(green->verdict == Verdict::kGreen);
}

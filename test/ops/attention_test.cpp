// attention: the FP32 reference against PyTorch float64 (causal GQA prefill) and against a
// float64 evaluation of the definition written here (key_mask, decode, chunked prefill); the
// cpu_bf16 candidate's accuracy, determinism and invariances (decode vs prefill, chunked
// prefill, padding, batch composition, thread count: all bitwise); bad inputs; and planted
// defects (causal mask off by one, GQA mapping h % Hkv) that the accuracy judge must catch.
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <random>

#include "op_test_support.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"

using namespace ws1;
using namespace ws1::test;

namespace {

const Op& op() {
  const Op* o = find_op_impl("attention");
  REQUIRE(o != nullptr);
  return *o;
}

const std::map<std::string, std::string> kRename = {
    {"in.q", "q"}, {"in.k", "k"}, {"in.v", "v"}, {"dy.o", "dy.o"}};

// Standard normal values rounded to bf16, from a fixed seed.
Tensor random_bf16(const Shape& shape, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  Tensor t(DType::kBF16, shape);
  auto* p = t.data<std::uint16_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = to_bf16(dist(gen)).bits;
  return t;
}

Tensor bool_tensor(const Shape& shape, const std::vector<std::uint8_t>& values) {
  Tensor t(DType::kBool, shape);
  REQUIRE(static_cast<std::int64_t>(values.size()) == t.numel());
  std::memcpy(t.raw(), values.data(), values.size());
  return t;
}

struct Shapes {
  std::int64_t b, hq, hkv, sq, skv, d;
};

Tensors random_inputs(const Shapes& s, std::uint32_t seed) {
  return {{"q", random_bf16({s.b, s.hq, s.sq, s.d}, seed)},
          {"k", random_bf16({s.b, s.hkv, s.skv, s.d}, seed + 1)},
          {"v", random_bf16({s.b, s.hkv, s.skv, s.d}, seed + 2)},
          {"dy.o", random_bf16({s.b, s.hq, s.sq, s.d}, seed + 3)}};
}

Tensors with(Tensors in, std::string name, Tensor t) {
  for (auto& nt : in)
    if (nt.name == name) {
      nt.tensor = std::move(t);
      return in;
    }
  in.push_back({std::move(name), std::move(t)});
  return in;
}

Tensors without(Tensors in, std::string_view name) {
  std::erase_if(in, [&](const NamedTensor& t) { return t.name == name; });
  return in;
}

// Raw bits of two tensors (any layout) equal, shapes and dtypes equal.
bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.raw(), cb.raw(), ca.nbytes()) == 0;
}

// ---- the definition in float64, written independently of lib/ops/attention.cpp ----

struct Float64Result {
  Tensor o, dq, dk, dv;
};

double at(const Tensor& t, std::initializer_list<std::int64_t> idx) {
  return from_bf16(bf16{*reinterpret_cast<const std::uint16_t*>(t.element(idx))});
}

Float64Result attention_f64(const Tensors& in) {
  const Tensor& q = *find_tensor(in, "q");
  const Tensor& k = *find_tensor(in, "k");
  const Tensor& v = *find_tensor(in, "v");
  const Tensor& dy = *find_tensor(in, "dy.o");
  const Tensor* mask = find_tensor(in, "key_mask");
  const std::int64_t B = q.shape()[0], Hq = q.shape()[1], Sq = q.shape()[2], D = q.shape()[3];
  const std::int64_t Hkv = k.shape()[1], Skv = k.shape()[2];
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Float64Result r{Tensor(DType::kF64, q.shape()), Tensor(DType::kF64, q.shape()),
                  Tensor(DType::kF64, k.shape()), Tensor(DType::kF64, k.shape())};
  auto ref = [](Tensor& t, std::initializer_list<std::int64_t> idx) -> double& {
    return *reinterpret_cast<double*>(t.element(idx));
  };
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hq; ++h) {
      const std::int64_t kv = h / (Hq / Hkv);
      for (std::int64_t i = 0; i < Sq; ++i) {
        std::vector<double> p(static_cast<std::size_t>(Skv), 0.0), dp(p.size(), 0.0);
        std::vector<bool> vis(p.size());
        double m = -INFINITY;
        for (std::int64_t j = 0; j < Skv; ++j) {
          const bool valid = mask == nullptr || *reinterpret_cast<const std::uint8_t*>(mask->element({b, j})) != 0;
          vis[static_cast<std::size_t>(j)] = valid && j <= i + Skv - Sq;
          if (!vis[static_cast<std::size_t>(j)]) continue;
          double s = 0;
          for (std::int64_t e = 0; e < D; ++e) s += at(q, {b, h, i, e}) * at(k, {b, kv, j, e});
          p[static_cast<std::size_t>(j)] = s * scale;
          m = std::max(m, s * scale);
        }
        double sum = 0;
        for (std::int64_t j = 0; j < Skv; ++j)
          if (vis[static_cast<std::size_t>(j)]) sum += (p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - m));
        double dsum = 0;
        for (std::int64_t j = 0; j < Skv; ++j) {
          if (!vis[static_cast<std::size_t>(j)]) continue;
          double& pj = p[static_cast<std::size_t>(j)];
          pj /= sum;
          for (std::int64_t e = 0; e < D; ++e) {
            ref(r.o, {b, h, i, e}) += pj * at(v, {b, kv, j, e});
            dp[static_cast<std::size_t>(j)] += at(dy, {b, h, i, e}) * at(v, {b, kv, j, e});
          }
          dsum += pj * dp[static_cast<std::size_t>(j)];
        }
        for (std::int64_t j = 0; j < Skv; ++j) {
          if (!vis[static_cast<std::size_t>(j)]) continue;
          const double pj = p[static_cast<std::size_t>(j)];
          const double ds = pj * (dp[static_cast<std::size_t>(j)] - dsum);
          for (std::int64_t e = 0; e < D; ++e) {
            ref(r.dq, {b, h, i, e}) += scale * ds * at(k, {b, kv, j, e});
            ref(r.dk, {b, kv, j, e}) += scale * ds * at(q, {b, h, i, e});
            ref(r.dv, {b, kv, j, e}) += pj * at(dy, {b, h, i, e});
          }
        }
      }
    }
  return r;
}

// ---- planted defects: a naive bf16 attention with a seeded bug ----

enum class Defect { kNone, kCausalOffByOne, kGqaModulo };

// FP32 scores and softmax per row, output rounded to bf16 once. kCausalOffByOne lets query i
// also see key i + 1 (past the bottom-right diagonal); kGqaModulo maps query head h to kv head
// h % Hkv instead of h / (Hq / Hkv).
Tensor naive_candidate(const Tensors& in, Defect defect) {
  const Tensor& q = *find_tensor(in, "q");
  const Tensor& k = *find_tensor(in, "k");
  const Tensor& v = *find_tensor(in, "v");
  const std::int64_t B = q.shape()[0], Hq = q.shape()[1], Sq = q.shape()[2], D = q.shape()[3];
  const std::int64_t Hkv = k.shape()[1], Skv = k.shape()[2];
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  Tensor o(DType::kBF16, q.shape());
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t h = 0; h < Hq; ++h) {
      const std::int64_t kv = defect == Defect::kGqaModulo ? h % Hkv : h / (Hq / Hkv);
      const std::int64_t reach = defect == Defect::kCausalOffByOne ? 1 : 0;
      for (std::int64_t i = 0; i < Sq; ++i) {
        const std::int64_t last = std::min(Skv - 1, i + Skv - Sq + reach);
        std::vector<float> p(static_cast<std::size_t>(last + 1));
        float m = -INFINITY, sum = 0;
        for (std::int64_t j = 0; j <= last; ++j) {
          float s = 0;
          for (std::int64_t e = 0; e < D; ++e) s += static_cast<float>(at(q, {b, h, i, e}) * at(k, {b, kv, j, e}));
          p[static_cast<std::size_t>(j)] = s * scale;
          m = std::max(m, s * scale);
        }
        for (auto& x : p) sum += (x = std::exp(x - m));
        for (std::int64_t e = 0; e < D; ++e) {
          float acc = 0;
          for (std::int64_t j = 0; j <= last; ++j) acc += p[static_cast<std::size_t>(j)] / sum * static_cast<float>(at(v, {b, kv, j, e}));
          *reinterpret_cast<std::uint16_t*>(o.element({b, h, i, e})) = to_bf16(acc).bits;
        }
      }
    }
  return o;
}

AccuracyTensor judge_bf16(Judgment j, std::string name, const Tensor& candidate, const Tensor& reference) {
  return judge_accuracy(std::move(name), candidate, reference,
                        tolerance(j, "attention", ContractDType::kBFloat16));
}

}  // namespace

// ---- the reference ----------------------------------------------------------------------------

TEST_CASE("attention reference agrees with PyTorch float64 within the float32 rows", "[ops][attention]") {
  auto f = oracle("attention");
  const Tensors in = oracle_inputs(*f, kRename);
  const OpContext ctx = default_context();
  auto fwd = op().reference_forward(in, ctx);
  const Tensor& o = get(fwd, "o");
  CHECK(o.dtype() == DType::kF32);  // spec §3.1 condition 4
  const auto fa = agree(o, *f->find("ref64.o"),
                        tolerance(Judgment::kForwardAccuracy, "attention", ContractDType::kFloat32));
  CHECK(fa.violations == 0);
  // The reference's own error stays below 1% of the bf16 atol (DESIGN §4).
  CHECK(fa.max_abs < tolerance(Judgment::kForwardAccuracy, "attention", ContractDType::kBFloat16).atol / 100);

  auto bwd = op().reference_backward(in, ctx);
  const auto grad_tol = tolerance(Judgment::kGradientAccuracy, "attention", ContractDType::kFloat32);
  const double bf16_atol = tolerance(Judgment::kGradientAccuracy, "attention", ContractDType::kBFloat16).atol;
  for (const char* name : {"q", "k", "v"}) {
    INFO("d" << name);
    const Tensor& g = get(bwd, std::string("d") + name);
    CHECK(g.dtype() == DType::kF32);
    const auto ga = agree(g, *f->find(std::string("gref64.") + name), grad_tol);
    CHECK(ga.violations == 0);
    CHECK(ga.max_abs < bf16_atol / 100);
  }
}

TEST_CASE("attention reference follows the float64 definition with key_mask, decode and chunked prefill", "[ops][attention]") {
  const OpContext ctx = default_context();
  const auto fwd_tol = tolerance(Judgment::kForwardAccuracy, "attention", ContractDType::kFloat32);
  const auto grad_tol = tolerance(Judgment::kGradientAccuracy, "attention", ContractDType::kFloat32);
  struct Case {
    const char* what;
    Shapes s;
    std::vector<std::uint8_t> mask;  // empty: no key_mask
  };
  // Every query row keeps at least one visible key (fully masked rows are tested below).
  const std::vector<Case> cases = {
      {"prefill, GQA 4 -> 2, two tiles", {1, 4, 2, 70, 70, 128}, {}},
      {"decode against a cache of 70", {2, 4, 2, 1, 70, 64}, {}},
      {"chunked prefill: 5 queries after 20 cached keys", {1, 4, 1, 5, 25, 32}, {}},
      {"key_mask: right and left padding, a hole", {3, 2, 1, 6, 8, 16},
       {1, 1, 1, 1, 1, 1, 0, 0,  0, 0, 1, 1, 1, 1, 1, 1,  1, 0, 1, 1, 0, 1, 1, 1}},
      {"decode with key_mask", {2, 2, 2, 1, 9, 16}, {1, 1, 0, 1, 1, 1, 0, 0, 1,  0, 0, 0, 0, 0, 0, 0, 0, 1}},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    Tensors in = random_inputs(c.s, 7);
    if (!c.mask.empty()) in = with(in, "key_mask", bool_tensor({c.s.b, c.s.skv}, c.mask));
    const Float64Result want = attention_f64(in);
    auto fwd = op().reference_forward(in, ctx);
    CHECK(agree(get(fwd, "o"), want.o, fwd_tol).violations == 0);
    auto bwd = op().reference_backward(in, ctx);
    CHECK(agree(get(bwd, "dq"), want.dq, grad_tol).violations == 0);
    CHECK(agree(get(bwd, "dk"), want.dk, grad_tol).violations == 0);
    CHECK(agree(get(bwd, "dv"), want.dv, grad_tol).violations == 0);
    // The candidate on the same masks and shapes: green under the bf16 rows.
    CHECK(passed(judge_bf16(Judgment::kForwardAccuracy, "o", get(op().cpu_forward(in, ctx), "o"), get(fwd, "o"))));
    auto cand = op().cpu_backward(in, ctx);
    for (const char* g : {"dq", "dk", "dv"})
      CHECK(passed(judge_bf16(Judgment::kGradientAccuracy, g, get(cand, g), get(bwd, g))));
  }
}

TEST_CASE("attention: a row without a visible key is NaN in the reference and 0 in the candidate", "[ops][attention]") {
  const OpContext ctx = default_context();
  // Left padding of 2 with Sq == Skv: query rows 0 and 1 see only padding keys.
  const Shapes s{1, 2, 1, 4, 4, 16};
  const Tensors in = with(random_inputs(s, 11), "key_mask", bool_tensor({1, 4}, {0, 0, 1, 1}));
  const Tensor ref = get(op().reference_forward(in, ctx), "o").contiguous();
  const Tensor cand = get(op().cpu_forward(in, ctx), "o").contiguous();
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 4; ++i)
      for (std::int64_t e = 0; e < 16; ++e) {
        const float r = *reinterpret_cast<const float*>(ref.element({0, h, i, e}));
        const auto c = *reinterpret_cast<const std::uint16_t*>(cand.element({0, h, i, e}));
        CHECK(std::isnan(r) == (i < 2));
        if (i < 2) CHECK(c == 0);  // +0 exactly
      }
  // Backward: the candidate's gradients stay finite (PyTorch-like NaN in the reference).
  auto cb = op().cpu_backward(in, ctx);
  for (const char* g : {"dq", "dk", "dv"}) {
    const Tensor t = get(cb, g).contiguous();
    for (std::int64_t i = 0; i < t.numel(); ++i) CHECK_FALSE(is_nan(bf16{t.data<std::uint16_t>()[i]}));
  }
  auto rb = op().reference_backward(in, ctx);
  CHECK(std::isnan(get(rb, "dq").contiguous().data<float>()[0]));
  CHECK(std::isnan(get(rb, "dk").contiguous().data<float>()[0]));
}

// ---- the cpu_bf16 candidate -------------------------------------------------------------------

TEST_CASE("attention candidate: bf16 outputs, accurate, deterministic, thread-count independent", "[ops][attention]") {
  const Tensors in = oracle_inputs(*oracle("attention"), kRename);
  OpContext ctx = default_context();
  ctx.threads = 2;
  auto fwd = op().cpu_forward(in, ctx);
  auto bwd = op().cpu_backward(in, ctx);
  auto ref_fwd = op().reference_forward(in, ctx);
  auto ref_bwd = op().reference_backward(in, ctx);
  CHECK(get(fwd, "o").dtype() == DType::kBF16);
  const auto o = judge_bf16(Judgment::kForwardAccuracy, "o", get(fwd, "o"), get(ref_fwd, "o"));
  CHECK(passed(o));
  for (const char* g : {"dq", "dk", "dv"}) {
    INFO(g);
    CHECK(get(bwd, g).dtype() == DType::kBF16);
    CHECK(passed(judge_bf16(Judgment::kGradientAccuracy, g, get(bwd, g), get(ref_bwd, g))));
  }
  // Two runs, and other thread counts, give the same bits.
  for (unsigned threads : {2u, 1u, 3u, 7u}) {
    INFO("threads " << threads);
    ctx.threads = threads;
    CHECK(same_bits(get(op().cpu_forward(in, ctx), "o"), get(fwd, "o")));
    auto again = op().cpu_backward(in, ctx);
    for (const char* g : {"dq", "dk", "dv"}) CHECK(same_bits(get(again, g), get(bwd, g)));
  }
}

TEST_CASE("attention candidate: decode and chunked prefill give the prefill's bits", "[ops][attention]") {
  // 150 keys: three 64-key tiles, the last one partial.
  const std::int64_t S = 150;
  const Tensors in = random_inputs({1, 32, 8, S, S, 128}, 21);
  const Tensor& q = *find_tensor(in, "q");
  const Tensor& k = *find_tensor(in, "k");
  const Tensor& v = *find_tensor(in, "v");
  const OpContext ctx = default_context();
  const Tensor prefill = get(op().cpu_forward(in, ctx), "o");

  SECTION("decode: one query against a KV cache of its prefix") {
    for (std::int64_t i : {0, 1, 62, 63, 64, 65, 127, 128, 149}) {
      INFO("row " << i);
      const Tensors step = {{"q", q.slice(2, i, i + 1)}, {"k", k.slice(2, 0, i + 1)}, {"v", v.slice(2, 0, i + 1)}};
      CHECK(same_bits(get(op().cpu_forward(step, ctx), "o"), prefill.slice(2, i, i + 1)));
    }
  }
  SECTION("decode: one query against the whole cache, later keys masked out") {
    for (std::int64_t i : {5, 64, 100}) {
      INFO("row " << i);
      std::vector<std::uint8_t> mask(S, 0);
      std::fill(mask.begin(), mask.begin() + i + 1, 1);
      const Tensors step = {{"q", q.slice(2, i, i + 1)}, {"k", k}, {"v", v},
                            {"key_mask", bool_tensor({1, S}, mask)}};
      CHECK(same_bits(get(op().cpu_forward(step, ctx), "o"), prefill.slice(2, i, i + 1)));
    }
  }
  SECTION("chunked prefill: query chunks against the keys up to the chunk's end") {
    const std::vector<std::int64_t> bounds = {0, 7, 64, 100, 101, 150};
    for (std::size_t c = 0; c + 1 < bounds.size(); ++c) {
      const std::int64_t a = bounds[c], b = bounds[c + 1];
      INFO("chunk [" << a << ", " << b << ")");
      const Tensors chunk = {{"q", q.slice(2, a, b)}, {"k", k.slice(2, 0, b)}, {"v", v.slice(2, 0, b)}};
      CHECK(same_bits(get(op().cpu_forward(chunk, ctx), "o"), prefill.slice(2, a, b)));
    }
  }
}

TEST_CASE("attention candidate: padding and batch composition do not change the bits", "[ops][attention]") {
  // Two samples of 70 and 40 tokens; the batch pads both to 75: sample 0 left by 5, sample 1
  // right by 35. Pad query rows get dy = 0 (the runner compares active keys only).
  const OpContext ctx = default_context();
  const std::int64_t H = 4, KV = 2, D = 128, L = 75;
  const std::int64_t len[2] = {70, 40}, left[2] = {5, 0};
  Tensors alone[2];
  for (int s = 0; s < 2; ++s) alone[s] = random_inputs({1, H, KV, len[s], len[s], D}, 40 + 10 * static_cast<std::uint32_t>(s));
  Tensors batch = random_inputs({2, H, KV, L, L, D}, 99);  // pads keep random q/k/v
  std::vector<std::uint8_t> mask(2 * L, 0);
  for (int s = 0; s < 2; ++s) {
    std::fill(mask.begin() + s * L + left[s], mask.begin() + s * L + left[s] + len[s], 1);
    for (auto& nt : batch) {
      Tensor dst = nt.tensor.select(0, s).slice(1, left[s], left[s] + len[s]);
      const Tensor src = find_tensor(alone[s], nt.name)->select(0, 0).contiguous();
      for (std::int64_t h = 0; h < dst.shape()[0]; ++h)
        for (std::int64_t t = 0; t < len[s]; ++t)
          std::memcpy(dst.element({h, t, 0}), src.element({h, t, 0}), static_cast<std::size_t>(D) * 2);
    }
    // dy = 0 on pad rows
    Tensor& dy = batch[3].tensor;
    REQUIRE(batch[3].name == "dy.o");
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t t = 0; t < L; ++t)
        if (t < left[s] || t >= left[s] + len[s])
          std::memset(dy.element({s, h, t, 0}), 0, static_cast<std::size_t>(D) * 2);
  }
  batch.push_back({"key_mask", bool_tensor({2, L}, mask)});
  auto bf = op().cpu_forward(batch, ctx);
  auto bb = op().cpu_backward(batch, ctx);
  for (int s = 0; s < 2; ++s) {
    INFO("sample " << s);
    auto af = op().cpu_forward(alone[s], ctx);
    auto ab = op().cpu_backward(alone[s], ctx);
    const auto rows = [&](const Tensor& t) { return t.slice(0, s, s + 1).slice(2, left[s], left[s] + len[s]); };
    CHECK(same_bits(rows(get(bf, "o")), get(af, "o")));
    for (const char* g : {"dq", "dk", "dv"}) {
      INFO(g);
      CHECK(same_bits(rows(get(bb, g)), get(ab, g)));
    }
  }
}

// ---- bad inputs -------------------------------------------------------------------------------

TEST_CASE("attention refuses inputs that do not fit", "[ops][attention]") {
  const OpContext ctx = default_context();
  const Tensors good = random_inputs({1, 4, 2, 3, 3, 16}, 5);
  const auto fails_with = [&](const Tensors& in, const std::string& text, bool backward = false) {
    INFO(text);
    auto r = backward ? op().cpu_backward(in, ctx) : op().cpu_forward(in, ctx);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message(), Catch::Contains(text));
    // The reference (lib/ref) refuses the same inputs in its own words, naming the same tensor.
    auto rr = backward ? op().reference_backward(in, ctx) : op().reference_forward(in, ctx);
    REQUIRE_FALSE(rr.ok());
    const auto named = [](const std::string& m) { return m.substr(0, m.find(':', m.find(':') + 1) + 1); };
    CHECK(named(rr.error().message()) == named(r.error().message()));
  };
  fails_with(without(good, "k"), "attention: k: missing input");
  fails_with(with(good, "v", Tensor(DType::kF32, {1, 2, 3, 16})), "attention: v: dtype F32");
  fails_with(with(good, "q", Tensor(DType::kBF16, {3, 4, 16})), "attention: q: shape [3, 4, 16] is the token-major");
  fails_with(with(good, "q", Tensor(DType::kBF16, {4, 3, 16, 1, 1})), "attention: q: shape [4, 3, 16, 1, 1] (expected rank 4");
  fails_with(with(good, "q", Tensor(DType::kBF16, {1, 3, 3, 16})), "attention: k: 2 kv heads for 3 query heads");
  fails_with(with(good, "q", Tensor(DType::kBF16, {1, 4, 3, 8})), "attention: k: shape [1, 2, 3, 16] does not fit q");
  fails_with(with(good, "q", Tensor(DType::kBF16, {2, 4, 3, 16})), "attention: k: shape [1, 2, 3, 16] does not fit q");
  fails_with(with(good, "v", Tensor(DType::kBF16, {1, 2, 4, 16})), "attention: v: shape [1, 2, 4, 16] differs from k");
  fails_with(with(good, "key_mask", Tensor(DType::kBool, {1, 4})), "attention: key_mask: shape [1, 4] (expected [B, Skv] = [1, 3])");
  fails_with(with(good, "key_mask", Tensor(DType::kU8, {1, 3})), "attention: key_mask: dtype U8");
  fails_with(with(good, "key_mask", bool_tensor({1, 3}, {1, 2, 1})), "attention: key_mask: element 1 holds byte 2");
  fails_with(without(good, "dy.o"), "attention: dy.o: missing input", true);
  fails_with(with(good, "dy.o", Tensor(DType::kBF16, {1, 4, 2, 16})), "attention: dy.o: shape [1, 4, 2, 16] differs from q", true);
  // Empty batches and sequences are valid and give empty results.
  const Tensors empty = random_inputs({0, 4, 2, 3, 3, 16}, 5);
  auto r = op().cpu_backward(empty, ctx);
  REQUIRE(r.ok());
  CHECK(get(r, "dk").numel() == 0);
}

// ---- planted defects --------------------------------------------------------------------------

TEST_CASE("attention planted defects go red under the bf16 forward row; the candidate stays green", "[ops][attention]") {
  const Tensors in = oracle_inputs(*oracle("attention"), kRename);
  const OpContext ctx = default_context();
  const Tensor ref = get(op().reference_forward(in, ctx), "o");
  const auto judge = [&](const Tensor& candidate) {
    return judge_bf16(Judgment::kForwardAccuracy, "o", candidate, ref);
  };
  // The real candidate and the naive one without a defect: green (so the red below comes from
  // the defect, not from the naive implementation).
  CHECK(judge(get(op().cpu_forward(in, ctx), "o")).violations == 0);
  CHECK(judge(naive_candidate(in, Defect::kNone)).violations == 0);
  const AccuracyTensor off_by_one = judge(naive_candidate(in, Defect::kCausalOffByOne));
  CHECK(off_by_one.violations > 0);
  CHECK_FALSE(passed(off_by_one));
  const AccuracyTensor gqa = judge(naive_candidate(in, Defect::kGqaModulo));
  CHECK(gqa.violations > 0);
  CHECK_FALSE(passed(gqa));
  const AccuracyTensor verdicts[] = {off_by_one};
  CHECK(accuracy_verdict(verdicts) == Verdict::kRed);
}

// ---- timing (hidden: ./test_ops "[attention_bench]") -------------------------------------------

TEST_CASE("attention CPU times at the primary and long shapes", "[.][attention_bench]") {
  // Wall time with 2 threads, and the process CPU time (both threads), per call.
  OpContext ctx = default_context();
  ctx.threads = 2;
  for (const Shapes s : {Shapes{4, 32, 8, 19, 19, 128}, Shapes{1, 32, 8, 512, 512, 128},
                         Shapes{4, 32, 8, 512, 512, 128}, Shapes{4, 32, 8, 1, 512, 128}}) {
    const Tensors in = random_inputs(s, 1);
    const auto time = [&](const char* what, auto&& fn) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::clock_t c0 = std::clock();
      REQUIRE(fn().ok());
      const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      WARN("B=" << s.b << " Hq=" << s.hq << " Hkv=" << s.hkv << " Sq=" << s.sq << " Skv=" << s.skv << " D=" << s.d
                << " " << what << ": wall " << wall << " s, cpu " << cpu << " s");
    };
    time("cpu_bf16 forward", [&] { return op().cpu_forward(in, ctx); });
    time("cpu_bf16 backward", [&] { return op().cpu_backward(in, ctx); });
    time("reference forward", [&] { return op().reference_forward(in, ctx); });
    time("reference backward", [&] { return op().reference_backward(in, ctx); });
  }
}

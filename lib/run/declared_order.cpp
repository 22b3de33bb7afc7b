// Declared-order probes (ws1/declared_order.hpp): the backend's bits against an implementation
// of the contract's declared order, and against the alternative order to name what it does.
//
// Probe inputs come from the fixture generator (seed of the manifest, keys
// "probe/<op>/declared_order/<tensor>"), so they are the same bytes everywhere and carry a
// fixture hash; they are not in the lock (they are not fixtures of the workload).
#include "ws1/declared_order.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "rms_norm.hpp"
#include "ws1/fixture.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"

namespace ws1 {
namespace {

constexpr std::string_view kOptionB = "option_b";
constexpr std::string_view kOptionA = "option_a";
constexpr std::int64_t kGemmProbeRows = 64;  // M, and N: both reductions of the backward
                                             // (over N for da, over M for db) span two leaves

std::string probe_id(const Op& op) { return fmt::format("probe/{}/declared_order", op.name()); }

// Standard normal bf16 tensors from the fixture generator, hashed like a fixture.
Result<Tensors> probe_inputs(const RunContext& run, const Op& op,
                             const std::vector<std::pair<std::string, Shape>>& shapes,
                             FixtureRef& ref) {
  const auto seed = static_cast<std::uint64_t>(run.manifest->seed);
  Tensors out;
  for (const auto& [name, shape] : shapes) {
    TensorSpec spec;
    spec.name = name;
    spec.dtype = DType::kBF16;
    spec.shape = shape;
    spec.gen.kind = GenKind::kNormal;
    spec.gen.seed = seed;
    spec.gen.key = probe_id(op) + "/" + name;
    auto t = generate_tensor(spec, run.op_context.threads);
    if (!t) return t.error();
    out.push_back({name, std::move(t).value()});
  }
  ref.id = probe_id(op);
  ref.seed = seed;
  ref.hash = fixture_hash(ref.id, seed, out);
  ref.tensors.clear();
  for (const auto& t : out) ref.tensors.push_back({t.name, t.tensor.dtype(), t.tensor.shape()});
  return out;
}

bool same_bits(const Tensor& x, const Tensor& y) {
  return passed(judge_bitwise("t", x, y, NanPolicy::kCompareBits, 0));
}

// Elements whose bits differ between two tensors of the same shape and dtype.
std::int64_t differing(const Tensor& x, const Tensor& y) {
  return judge_bitwise("t", x, y, NanPolicy::kCompareBits, 0).mismatches;
}

Status need_manifest(const RunContext& run, const Op& op) {
  if (run.manifest == nullptr || run.contract == nullptr)
    return Error{"declared_order", std::string(op.name()),
                 "the run context has no contract or manifest (the probe takes its widths and "
                 "seed from them)",
                 ExitCode::kBadInput};
  return {};
}

void finish(DeclaredOrderResult& r, const std::vector<std::string>& failures) {
  std::vector<std::string> parts = failures;
  if (!r.tensors.empty()) {
    const std::string bits = bitwise_reason(r.tensors);
    if (!bits.empty()) parts.push_back(bits);
  }
  const bool green = parts.empty() && bitwise_verdict(r.tensors) == Verdict::kGreen;
  r.verdict = green ? Verdict::kGreen : Verdict::kRed;
  if (!green)
    r.reason = fmt::format("{}: the contract declares the {} order ({}); the backend's bits are {}: {}",
                           r.op, r.declared, r.declaration,
                           r.observed == kOrderNeither ? std::string("neither order")
                                                       : "the " + r.observed + " order",
                           fmt::join(parts, "; "));
}

// ---- det_gemm: a literal implementation of the mid-split tree (spec §9.2 k_tree_naive) ----

// sum over i in [lo, hi) of x[i * xs] * y[i * ys]: a leaf is an FP32 fma chain from 0 in index
// order, a node adds its children in FP32; with bf16_merges both are rounded to bf16.
float tree_dot(const float* x, std::int64_t xs, const float* y, std::int64_t ys, std::int64_t lo,
               std::int64_t hi, std::int64_t leaf, bool bf16_merges) {
  if (hi - lo <= leaf) {
    float acc = 0.0f;
    for (std::int64_t i = lo; i < hi; ++i) acc = std::fma(x[i * xs], y[i * ys], acc);
    return bf16_merges ? round_bf16(acc) : acc;
  }
  const std::int64_t mid = lo + (hi - lo) / 2;
  const float left = tree_dot(x, xs, y, ys, lo, mid, leaf, bf16_merges);
  const float right = tree_dot(x, xs, y, ys, mid, hi, leaf, bf16_merges);
  const float sum = left + right;
  return bf16_merges ? round_bf16(sum) : sum;
}

struct FloatMatrix {
  std::vector<float> v;
  std::int64_t rows = 0, cols = 0;
  const float* at(std::int64_t r, std::int64_t c) const { return v.data() + r * cols + c; }
};

FloatMatrix floats(const Tensor& t) {
  const Tensor c = t.contiguous();
  FloatMatrix m{std::vector<float>(static_cast<std::size_t>(c.numel())), c.shape()[0], c.shape()[1]};
  const auto* p = c.data<std::uint16_t>();
  for (std::size_t i = 0; i < m.v.size(); ++i) m.v[i] = from_bf16(bf16{p[i]});
  return m;
}

// out[i, j] = tree over k < len of x(i, k) * y(k, j), rounded to bf16 at the end; x(i, k) at
// x_at(i) + k * x_step, y(k, j) at y_at(j) + k * y_step.
template <class XAt, class YAt>
Tensor tree_product(std::int64_t rows, std::int64_t cols, std::int64_t len, XAt x_at,
                    std::int64_t x_step, YAt y_at, std::int64_t y_step, std::int64_t leaf,
                    bool bf16_merges) {
  Tensor out(DType::kBF16, {rows, cols});
  auto* o = out.data<std::uint16_t>();
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      o[i * cols + j] =
          to_bf16(tree_dot(x_at(i), x_step, y_at(j), y_step, 0, len, leaf, bf16_merges)).bits;
  return out;
}

// c = a @ b, da = dy @ b^T, db = a^T @ dy, each with the tree over its reduction dimension.
Tensors tree_gemm_all(const Tensor& at, const Tensor& bt, const Tensor& dyt, std::int64_t leaf,
                      bool bf16_merges) {
  const FloatMatrix a = floats(at), b = floats(bt), dy = floats(dyt);
  const std::int64_t M = a.rows, K = a.cols, N = b.cols;
  Tensor c = tree_product(
      M, N, K, [&](std::int64_t m) { return a.at(m, 0); }, 1,
      [&](std::int64_t n) { return b.at(0, n); }, N, leaf, bf16_merges);
  Tensor da = tree_product(
      M, K, N, [&](std::int64_t m) { return dy.at(m, 0); }, 1,
      [&](std::int64_t k) { return b.at(k, 0); }, 1, leaf, bf16_merges);
  Tensor db = tree_product(
      K, N, M, [&](std::int64_t k) { return a.at(0, k); }, K,
      [&](std::int64_t n) { return dy.at(0, n); }, N, leaf, bf16_merges);
  return {{"c", std::move(c)}, {"da", std::move(da)}, {"db", std::move(db)}};
}

// ---- det_gemm Option A: the cancellation probe and the batch rows ---------------------------

// splitmix64: the probe's integers (deterministic from the manifest seed and a stream key).
struct Mix {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // A nonzero integer in [-r, r].
  int nonzero(int r) {
    const int v = 1 + static_cast<int>(next() % static_cast<std::uint64_t>(r));
    return (next() & 1u) != 0 ? v : -v;
  }
};

constexpr int kCancelRange = 15;   // |x|, |y| of the paired terms
constexpr int kRemainder = 3;      // |e|: the one unpaired difference per column
constexpr std::int64_t kCancelRows = 64, kCancelCols = 64;

// X [rows, L] and Y [L, cols] of small integers whose product sums cancel: term half + l
// repeats term pi(l) of the first half with y negated (pi a random permutation of [1, half),
// pi(0) = 0), except that y at half is -Y[0][j] + e_j. So sum_l X[i][l] Y[l][j] = X[i][0] e_j
// (|.| <= 45, exact in bf16), while the partial sums over any run of k are large integers that
// bf16 cannot hold (8 significant bits) and FP32 holds exactly (|X Y| L < 2^24): an FP32 sum in
// any order gives the exact result, a sum that rounds a partial to bf16 almost never does.
struct Cancelling {
  std::vector<int> x, y, exact;  // row-major [rows][L], [L][cols], [rows][cols]
  std::int64_t rows = 0, len = 0, cols = 0;
};

Cancelling cancelling(std::uint64_t seed, std::int64_t rows, std::int64_t len, std::int64_t cols) {
  Cancelling c;
  c.rows = rows, c.len = len, c.cols = cols;
  c.x.assign(static_cast<std::size_t>(rows * len), 0);
  c.y.assign(static_cast<std::size_t>(len * cols), 0);
  Mix mix{seed};
  const std::int64_t half = len / 2;
  std::vector<std::int64_t> pi(static_cast<std::size_t>(half));
  for (std::int64_t l = 0; l < half; ++l) pi[static_cast<std::size_t>(l)] = l;
  for (std::int64_t l = half - 1; l > 1; --l)  // Fisher-Yates over [1, half)
    std::swap(pi[static_cast<std::size_t>(l)],
              pi[static_cast<std::size_t>(1 + static_cast<std::int64_t>(mix.next() % static_cast<std::uint64_t>(l)))]);
  auto X = [&](std::int64_t i, std::int64_t l) -> int& { return c.x[static_cast<std::size_t>(i * len + l)]; };
  auto Y = [&](std::int64_t l, std::int64_t j) -> int& { return c.y[static_cast<std::size_t>(l * cols + j)]; };
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t l = 0; l < half; ++l) X(i, l) = mix.nonzero(kCancelRange);
  for (std::int64_t l = 0; l < half; ++l)
    for (std::int64_t j = 0; j < cols; ++j) Y(l, j) = mix.nonzero(kCancelRange);
  for (std::int64_t l = 0; l < half; ++l) {
    const std::int64_t src = pi[static_cast<std::size_t>(l)];
    for (std::int64_t i = 0; i < rows; ++i) X(i, half + l) = X(i, src);
    for (std::int64_t j = 0; j < cols; ++j) Y(half + l, j) = -Y(src, j);
  }
  for (std::int64_t j = 0; j < cols; ++j) Y(half, j) += mix.nonzero(kRemainder);
  c.exact.assign(static_cast<std::size_t>(rows * cols), 0);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      std::int64_t acc = 0;
      for (std::int64_t l = 0; l < len; ++l) acc += static_cast<std::int64_t>(X(i, l)) * Y(l, j);
      c.exact[static_cast<std::size_t>(i * cols + j)] = static_cast<int>(acc);
    }
  return c;
}

// A bf16 tensor [r, c] whose element (i, j) is at(i, j) (small integers: exact in bf16).
template <class At>
Tensor int_tensor(std::int64_t r, std::int64_t c, At at) {
  Tensor t(DType::kBF16, {r, c});
  auto* p = t.data<std::uint16_t>();
  for (std::int64_t i = 0; i < r; ++i)
    for (std::int64_t j = 0; j < c; ++j) p[i * c + j] = to_bf16(static_cast<float>(at(i, j))).bits;
  return t;
}

// Rows [0, m) of a row-major 2-D tensor, as a new contiguous tensor.
Tensor first_rows(const Tensor& t, std::int64_t m) { return t.slice(0, 0, m).contiguous(); }

FixtureRef probe_ref(const RunContext& run, const Op& op, const char* what, const Tensors& in) {
  FixtureRef ref;
  ref.id = fmt::format("{}/{}", probe_id(op), what);
  ref.seed = static_cast<std::uint64_t>(run.manifest->seed);
  ref.hash = fixture_hash(ref.id, ref.seed, in);
  for (const auto& t : in) ref.tensors.push_back({t.name, t.tensor.dtype(), t.tensor.shape()});
  return ref;
}

}  // namespace

Result<DeclaredOrderResult> probe_rms_norm_order(const RunContext& run, Backend& backend,
                                                 const Op& op) {
  if (op.name() != "rms_norm" && op.name() != "qk_norm")
    return bad_input("declared_order", std::string(op.name()),
                     "the RMSNorm rounding-order probe applies to rms_norm and qk_norm only");
  if (Status st = need_manifest(run, op); !st) return st.error();
  const Contract& contract = *run.contract;
  const ModelConfig& cfg = run.manifest->model.config;

  DeclaredOrderResult r;
  r.op = std::string(op.name());
  const RmsNormOrder declared = run.op_context.rms_norm_order;
  const RmsNormOrder other = declared == RmsNormOrder::kKernel ? RmsNormOrder::kHf
                                                               : RmsNormOrder::kKernel;
  r.declared = std::string(contract_name(declared));
  if (const auto& d = contract.declarations.rms_norm_rounding) {
    r.declaration = "ws1check_declarations.rms_norm_rounding.order";
    if (!d->applies_to.empty() &&
        std::find(d->applies_to.begin(), d->applies_to.end(), r.op) == d->applies_to.end()) {
      r.observed = kOrderNeither;
      r.verdict = Verdict::kNa;
      r.reason = fmt::format("ws1check_declarations.rms_norm_rounding.applies_to does not list {}",
                             r.op);
      return r;
    }
  } else {
    r.declaration = fmt::format("undeclared in {}; the run assumes the {} order", contract.file,
                                r.declared);
  }
  r.kernel_id = backend.kernel_id(op, Direction::kForward);

  // Two rows at the model's width: rms_norm over hidden, qk_norm over head_dim for every head.
  const Shape x_shape = op.name() == "qk_norm"
                            ? Shape{2, cfg.num_attention_heads, cfg.head_dim}
                            : Shape{2, cfg.hidden_size};
  auto in = probe_inputs(run, op, {{"x", x_shape}, {"weight", {x_shape.back()}}}, r.probe);
  if (!in) return in.error();

  OpContext ctx = run.op_context;
  ctx.rms_norm_order = declared;
  auto want = ops::rms_norm_forward(op.name(), *in, ctx);
  ctx.rms_norm_order = other;
  auto alt = ops::rms_norm_forward(op.name(), *in, ctx);
  if (!want) return want.error();
  if (!alt) return alt.error();
  const Tensor& y_want = *find_tensor(*want, "y");
  const Tensor& y_alt = *find_tensor(*alt, "y");
  r.discriminating = differing(y_want, y_alt);
  r.probed = y_want.numel();
  if (r.discriminating == 0)
    return Error{"declared_order", r.probe.id,
                 "the probe does not tell the kernel and hf orders apart (no element differs)",
                 ExitCode::kBadInput};

  std::vector<std::string> failures;
  r.observed = kOrderNeither;
  auto got = backend.forward(op, *in, run.op_context);
  if (!got) {
    failures.push_back("candidate failed: " + got.error().message());
  } else if (const Tensor* y = find_tensor(*got, "y"); y == nullptr) {
    failures.push_back("y: the candidate produced no such tensor");
  } else {
    r.tensors.push_back(judge_bitwise("y", *y, y_want, NanPolicy::kFail));
    if (same_bits(*y, y_want))
      r.observed = r.declared;
    else if (same_bits(*y, y_alt))
      r.observed = std::string(contract_name(other));
  }
  finish(r, failures);
  return r;
}

Result<DeclaredOrderResult> probe_det_gemm_tree(const RunContext& run, Backend& backend,
                                                const Op& op) {
  if (op.name() != "det_gemm")
    return bad_input("declared_order", std::string(op.name()),
                     "the declared-tree probe applies to det_gemm only");
  if (Status st = need_manifest(run, op); !st) return st.error();
  const Contract& contract = *run.contract;
  constexpr std::string_view kPath = "ws1check_declarations.accumulation_exceptions.det_gemm";

  DeclaredOrderResult r;
  r.op = "det_gemm";
  r.declaration = std::string(kPath);
  const std::optional<AccumulationException> ex = contract.accumulation_exception("det_gemm");
  if (!ex) {
    r.declared = std::string(kOptionA);
    r.observed = kOrderNeither;
    r.verdict = Verdict::kNa;
    r.reason = fmt::format("{} declares no det_gemm accumulation exception ({}): no tree is "
                           "declared, so there is no order to probe",
                           contract.file, kPath);
    return r;
  }
  if (ex->leaf_accumulation_dtype != ContractDType::kFloat32 || ex->k_tree_leaf < 1 ||
      (ex->merge_dtype != ContractDType::kBFloat16 && ex->merge_dtype != ContractDType::kFloat32))
    return bad_input(contract.file, std::string(kPath),
                     fmt::format("leaves in {}, k_tree_leaf {}, merges in {}: the probe "
                                 "implements FP32 leaves (k_tree_leaf >= 1) with bfloat16 or "
                                 "float32 merges",
                                 contract_name(ex->leaf_accumulation_dtype), ex->k_tree_leaf,
                                 contract_name(ex->merge_dtype)));
  const bool bf16_merges = ex->merge_dtype == ContractDType::kBFloat16;
  r.declared = std::string(bf16_merges ? kOptionB : kOptionA);
  const std::string other(bf16_merges ? kOptionA : kOptionB);
  r.kernel_id = fmt::format("{} + {}", backend.kernel_id(op, Direction::kForward),
                            backend.kernel_id(op, Direction::kBackward));

  const std::int64_t M = kGemmProbeRows, N = kGemmProbeRows;
  const std::int64_t K = run.manifest->model.config.hidden_size;
  auto in = probe_inputs(run, op, {{"a", {M, K}}, {"b", {K, N}}, {"dy.c", {M, N}}}, r.probe);
  if (!in) return in.error();
  const Tensors want = tree_gemm_all(*find_tensor(*in, "a"), *find_tensor(*in, "b"),
                                     *find_tensor(*in, "dy.c"), ex->k_tree_leaf, bf16_merges);
  const Tensors alt = tree_gemm_all(*find_tensor(*in, "a"), *find_tensor(*in, "b"),
                                    *find_tensor(*in, "dy.c"), ex->k_tree_leaf, !bf16_merges);
  for (const auto& w : want) {
    r.discriminating += differing(w.tensor, *find_tensor(alt, w.name));
    r.probed += w.tensor.numel();
  }
  if (r.discriminating == 0)
    return Error{"declared_order", r.probe.id,
                 "the probe does not tell bf16 and FP32 merges apart (no element differs)",
                 ExitCode::kBadInput};

  std::vector<std::string> failures;
  auto fwd = backend.forward(op, *in, run.op_context);
  auto bwd = backend.backward(op, *in, run.op_context);
  if (!fwd) failures.push_back("candidate forward failed: " + fwd.error().message());
  if (!bwd) failures.push_back("candidate backward failed: " + bwd.error().message());
  bool all_declared = true, all_other = true;
  for (const auto& w : want) {
    const Result<Tensors>& from = w.name == "c" ? fwd : bwd;
    if (!from) {
      all_declared = all_other = false;
      continue;
    }
    const Tensor* got = find_tensor(*from, w.name);
    if (got == nullptr) {
      failures.push_back(w.name + ": the candidate produced no such tensor");
      all_declared = all_other = false;
      continue;
    }
    r.tensors.push_back(judge_bitwise(w.name, *got, w.tensor, NanPolicy::kFail));
    all_declared = all_declared && same_bits(*got, w.tensor);
    all_other = all_other && same_bits(*got, *find_tensor(alt, w.name));
  }
  r.observed = all_declared ? r.declared : all_other ? other : std::string(kOrderNeither);
  finish(r, failures);
  return r;
}

Result<DeclaredOrderResult> probe_det_gemm_option_a(const RunContext& run, Backend& backend,
                                                    const Op& op) {
  if (op.name() != "det_gemm")
    return bad_input("declared_order", std::string(op.name()),
                     "the Option A probe applies to det_gemm only");
  if (Status st = need_manifest(run, op); !st) return st.error();
  DeclaredOrderResult r;
  r.op = "det_gemm";
  r.declared = std::string(kOptionA);
  r.declaration = "policy.accumulation_dtype with no det_gemm accumulation exception";
  r.kernel_id = fmt::format("{} + {}", backend.kernel_id(op, Direction::kForward),
                            backend.kernel_id(op, Direction::kBackward));
  const std::int64_t L = std::max<std::int64_t>(4, run.manifest->model.config.hidden_size);
  const auto seed = static_cast<std::uint64_t>(run.manifest->seed);
  const std::int64_t R = kCancelRows, C = kCancelCols;
  // Reduction over K (c), over N (da) and over M (db), each of length L.
  const Cancelling fk = cancelling(seed ^ 0x6b, R, L, C), fn = cancelling(seed ^ 0x6e, R, L, C),
                   fm = cancelling(seed ^ 0x6d, R, L, C);
  auto at = [](const std::vector<int>& v, std::int64_t cols) {
    return [&v, cols](std::int64_t i, std::int64_t j) { return v[static_cast<std::size_t>(i * cols + j)]; };
  };
  auto filler = [](std::int64_t i, std::int64_t j) { return static_cast<int>((i * 7 + j * 3) % 9) - 4; };
  // c = a b: a = X [R, L], b = Y [L, C].
  const Tensors in_c{{"a", int_tensor(R, L, at(fk.x, L))}, {"b", int_tensor(L, C, at(fk.y, C))}};
  // da = dy b^T: dy = X [R, L] (N = L), b^T = Y, so b [K = C, N = L] = Y^T.
  const Tensors in_da{{"a", int_tensor(R, C, filler)},
                      {"b", int_tensor(C, L, [&](std::int64_t k, std::int64_t n) { return fn.y[static_cast<std::size_t>(n * C + k)]; })},
                      {"dy.c", int_tensor(R, L, at(fn.x, L))}};
  // db = a^T dy: a^T = X [K = R, M = L], so a [L, R] = X^T; dy = Y [M = L, N = C].
  const Tensors in_db{{"a", int_tensor(L, R, [&](std::int64_t m, std::int64_t k) { return fm.x[static_cast<std::size_t>(k * L + m)]; })},
                      {"b", int_tensor(R, C, filler)},
                      {"dy.c", int_tensor(L, C, at(fm.y, C))}};
  const Tensor want_c = int_tensor(R, C, at(fk.exact, C));
  const Tensor want_da = int_tensor(R, C, at(fn.exact, C));
  const Tensor want_db = int_tensor(R, C, at(fm.exact, C));
  r.probe = probe_ref(run, op, "cancellation", in_c);

  // What the old Option B tree (FP32 leaves of 32, bf16 merges) gives on the same inputs: how
  // many elements the probe tells apart from an exact FP32 sum.
  const Tensors tree_c = tree_gemm_all(*find_tensor(in_c, "a"), *find_tensor(in_c, "b"),
                                       int_tensor(R, C, filler), 32, true);
  r.discriminating = differing(*find_tensor(tree_c, "c"), want_c);
  r.probed = 3 * R * C;
  if (r.discriminating == 0)
    return Error{"declared_order", r.probe.id,
                 "the cancellation probe does not tell a bf16-rounding tree from the exact sum",
                 ExitCode::kBadInput};

  std::vector<std::string> failures;
  bool exact = true;
  auto judge = [&](const std::string& name, const Result<Tensors>& got, const char* tensor,
                   const Tensor& want) {
    if (!got) {
      failures.push_back(name + ": candidate failed: " + got.error().message());
      exact = false;
      return;
    }
    const Tensor* t = find_tensor(*got, tensor);
    if (t == nullptr) {
      failures.push_back(name + ": the candidate produced no " + tensor);
      exact = false;
      return;
    }
    r.tensors.push_back(judge_bitwise(name, *t, want, NanPolicy::kFail));
    exact = exact && same_bits(*t, want);
  };
  judge("c (cancellation over K)", backend.forward(op, in_c, run.op_context), "c", want_c);
  judge("da (cancellation over N)", backend.backward(op, in_da, run.op_context), "da", want_da);
  judge("db (cancellation over M)", backend.backward(op, in_db, run.op_context), "db", want_db);
  r.observed = exact ? r.declared : std::string(kOrderNeither);

  // Batch invariance: rows of calls with M = 1, 7, 59, 512 against the same rows of M = 8192
  // (c, and da = dy b^T whose rows are independent too). c's inputs nearly cancel: standard
  // normal halves, the second the first's terms permuted and negated, so c is the FP32 rounding
  // left over from large partial sums and any change of association (a split chosen by M)
  // changes its bf16 bits on most elements, not on one in a thousand.
  constexpr std::int64_t kRowsFull = 8192;
  FixtureRef batch_ref;
  const std::int64_t half = L / 2;
  auto batch = probe_inputs(run, op,
                            {{"a", {kRowsFull, half}}, {"b", {half, kCancelCols}}, {"dy.c", {kRowsFull, kCancelCols}}},
                            batch_ref);
  if (!batch) return batch.error();
  {
    Mix mix{seed ^ 0x62};
    std::vector<std::int64_t> pi(static_cast<std::size_t>(half));
    for (std::int64_t l = 0; l < half; ++l) pi[static_cast<std::size_t>(l)] = l;
    for (std::int64_t l = half - 1; l > 0; --l)
      std::swap(pi[static_cast<std::size_t>(l)], pi[static_cast<std::size_t>(mix.next() % static_cast<std::uint64_t>(l + 1))]);
    const Tensor ah = (*batch)[0].tensor.contiguous(), bh = (*batch)[1].tensor.contiguous();
    const auto* pa = ah.data<std::uint16_t>();
    const auto* pb = bh.data<std::uint16_t>();
    Tensor a(DType::kBF16, {kRowsFull, L}), b(DType::kBF16, {L, kCancelCols});
    auto* qa = a.data<std::uint16_t>();
    auto* qb = b.data<std::uint16_t>();
    for (std::int64_t i = 0; i < kRowsFull; ++i)
      for (std::int64_t l = 0; l < L; ++l)
        qa[i * L + l] = l < half ? pa[i * half + l]
                        : l - half < half ? pa[i * half + pi[static_cast<std::size_t>(l - half)]]
                                          : std::uint16_t{0};
    for (std::int64_t l = 0; l < L; ++l)
      for (std::int64_t j = 0; j < kCancelCols; ++j)
        qb[l * kCancelCols + j] =
            l < half ? pb[l * kCancelCols + j]
            : l - half < half ? static_cast<std::uint16_t>(pb[pi[static_cast<std::size_t>(l - half)] * kCancelCols + j] ^ 0x8000u)
                              : std::uint16_t{0};
    (*batch)[0].tensor = std::move(a);
    (*batch)[1].tensor = std::move(b);
  }
  auto full_f = backend.forward(op, {(*batch)[0], (*batch)[1]}, run.op_context);
  auto full_b = backend.backward(op, *batch, run.op_context);
  if (!full_f || !full_b) {
    failures.push_back("batch rows: the M = 8192 call failed: " +
                       (!full_f ? full_f.error().message() : full_b.error().message()));
  } else {
    for (std::int64_t m : {1, 7, 59, 512}) {
      Tensors part = *batch;
      for (auto& nt : part)
        if (nt.name != "b") nt.tensor = first_rows(nt.tensor, m);
      auto f = backend.forward(op, {part[0], part[1]}, run.op_context);
      auto b = backend.backward(op, part, run.op_context);
      const Tensor* cf = find_tensor(*full_f, "c");
      const Tensor* df = find_tensor(*full_b, "da");
      if (cf == nullptr || df == nullptr) {
        failures.push_back("batch rows: the M = 8192 call gave no c or da");
        break;
      }
      const Tensor c_rows = first_rows(*cf, m), da_rows = first_rows(*df, m);
      judge(fmt::format("c rows at M = {} vs M = {}", m, kRowsFull), f, "c", c_rows);
      judge(fmt::format("da rows at M = {} vs M = {}", m, kRowsFull), b, "da", da_rows);
    }
  }
  if (!exact && r.observed == r.declared) r.observed = std::string(kOrderNeither);
  finish(r, failures);
  return r;
}

}  // namespace ws1

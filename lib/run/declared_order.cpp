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
  auto want = ops::rms_norm_forward(op.name(), *in, ctx, ops::NormPath::kCandidate);
  ctx.rms_norm_order = other;
  auto alt = ops::rms_norm_forward(op.name(), *in, ctx, ops::NormPath::kCandidate);
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

}  // namespace ws1

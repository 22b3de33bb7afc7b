// Invariance cells (spec §4.2): the canonical configuration and each transform run on the
// candidate; token results compared bit for bit at the active logical tokens, parameter
// gradients whole (docs/decisions.md D13 says which transforms judge them).
#include "ws1/invariance.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstring>
#include <map>

#include "invariance_layout.hpp"
#include "invariance_plan.hpp"
#include "op_support.hpp"
#include "ws1/fixture_lock.hpp"
#include "ws1/judge.hpp"
#include "ws1/numeric.hpp"

namespace ws1 {
namespace {

using invariance::Axis;
using invariance::Call;
using invariance::LogicalTokens;
using invariance::OpLayout;
using invariance::Plan;

struct Named {
  Transform t;
  std::string_view name;
};
constexpr std::array<Named, 11> kTransforms = {{
    {Transform::kBnChunked, "BN/chunked"},
    {Transform::kB1Chunked, "B1/chunked"},
    {Transform::kB1Full, "B1/full"},
    {Transform::kBnPermuted, "BN/permuted"},
    {Transform::kBnPaddedRight, "BN/padded_right"},
    {Transform::kBnPaddedLeft, "BN/padded_left"},
    {Transform::kLayout, "layout"},
    {Transform::kTp2, "tp2"},
    {Transform::kTp4, "tp4"},
    {Transform::kTp8, "tp8"},
    {Transform::kRepeat, "repeat"},
}};

// One configuration's candidate results.
struct ConfigResult {
  std::vector<NamedTensor> tokens;  // [A, ...] at the active logical tokens
  std::vector<NamedTensor> whole;   // parameter gradients
  std::size_t calls = 0;
  std::optional<std::string> failure;  // the candidate failed or gave unusable tensors
  double seconds = 0;                  // the calls, their inputs and aggregates (timed by the caller)
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Result<Tensors> invoke(Backend& backend, const Op& op, bool backward, const Tensors& in,
                       const OpContext& ctx) {
  return backward ? backend.backward(op, in, ctx) : backend.forward(op, in, ctx);
}

// acc += t upcast to FP32, element by element. An undefined acc starts as 0 + t (a zeroed
// accumulator's bits, -0 included) or, with from_zero false, as t itself. V x H gradients pass
// here once per call, so the elements are split over the host's threads (each element's add is
// the same whatever the split).
void add_upcast(const Tensor& t, Tensor& acc, bool from_zero = true) {
  const Tensor c = t.is_contiguous() ? t : t.contiguous();
  const std::int64_t n = c.numel();
  const bool first = !acc.defined();
  if (first) acc = Tensor::uninitialized(DType::kF32, {n});
  float* a = acc.data<float>();
  const bool bf = c.dtype() == DType::kBF16;
  if (!bf && c.dtype() != DType::kF32) return;
  const auto* pb = bf ? c.data<std::uint16_t>() : nullptr;
  const float* pf = bf ? nullptr : c.data<float>();
  // One plain loop per case, so that each vectorises.
  auto run = [&](auto load) {
    ops::parallel_for(n, 0, [&](std::int64_t lo, std::int64_t hi) {
      if (!first)
        for (std::int64_t i = lo; i < hi; ++i) a[i] += load(i);
      else if (from_zero)
        for (std::int64_t i = lo; i < hi; ++i) a[i] = 0.0f + load(i);
      else
        for (std::int64_t i = lo; i < hi; ++i) a[i] = load(i);
    });
  };
  if (bf)  // bf16 -> float is the upper half of the bits (exact)
    run([pb](std::int64_t i) { return std::bit_cast<float>(static_cast<std::uint32_t>(pb[i]) << 16); });
  else
    run([pf](std::int64_t i) { return pf[i]; });
}

// `acc` (FP32) rounded once to `dtype` (bf16 or f32), as a tensor of `shape`.
Tensor rounded(DType dtype, const Shape& shape, const Tensor& acc) {
  if (dtype != DType::kBF16) return acc.view(shape);
  Tensor t = Tensor::uninitialized(dtype, shape);
  const float* a = acc.data<float>();
  bf16* o = t.data<bf16>();
  ops::parallel_for(acc.numel(), 0, [&](std::int64_t lo, std::int64_t hi) {
    to_bf16({a + lo, static_cast<std::size_t>(hi - lo)}, {o + lo, static_cast<std::size_t>(hi - lo)});
  });
  return t;
}

// How a tensor-parallel transform's ranks combine, from the contract (DESIGN §3.1).
enum class RankSum {
  kFp32Partials,  // det_gemm_k_split.shards == ranks: each rank's FP32 partial (k_partial), summed
  kBf16Outputs,   // an Option B tree declared (two ranks only): each rank's bf16 result, summed in FP32
};

// Why the `ranks`-rank transform has nothing to check under this contract, or nullopt with the
// ranks' sum.
std::optional<std::string> tp_undeclared(const RunContext& run, const Op& op, int ranks, RankSum* sum) {
  if (run.contract != nullptr && run.contract->accumulation_exception(op.name())) {
    if (ranks != 2)
      return fmt::format("the contract declares an accumulation exception for {} (Option B), whose "
                         "TP check is the two-rank one (tp2)",
                         op.name());
    if (sum != nullptr) *sum = RankSum::kBf16Outputs;
    return std::nullopt;
  }
  if (run.op_context.k_shards == ranks) {
    if (sum != nullptr) *sum = RankSum::kFp32Partials;
    return std::nullopt;
  }
  return fmt::format(
      "the contract declares {} (ws1check_declarations.det_gemm_k_split.shards): TP={} equals TP=1 "
      "bit for bit only where the kernel's declared split is the {} ranks' shards",
      run.op_context.k_shards == 1 ? std::string("no K split")
                                   : fmt::format("a {}-shard K split", run.op_context.k_shards),
      ranks, ranks);
}

// tp<t>: the call as t ranks holding the contiguous shards [r*K/t, (r+1)*K/t) of K. Forward: the
// ranks' partial outputs summed in FP32 in rank order and rounded once (the all-reduce); with
// FP32 partials (k_partial) a rank must return float32, since a rank that rounds its partial
// is the defect this checks. Backward: each rank's gradients of its shards, concatenated along
// K; other gradients must agree between the ranks.
Result<Tensors> invoke_k_split(const RunContext& run, Backend& backend, const Op& op, bool backward,
                               const Tensors& in, int ranks) {
  const KSplit split = *op.k_split();
  const std::string tname = fmt::format("tp{}", ranks);
  RankSum sum = RankSum::kFp32Partials;
  if (auto why = tp_undeclared(run, op, ranks, &sum)) return bad_input(std::string(op.name()), tname, *why);
  const Tensor* lhs = find_tensor(in, split.lhs);
  const Tensor* rhs = find_tensor(in, split.rhs);
  if (lhs == nullptr || rhs == nullptr || lhs->dim() != 2 || rhs->dim() != 2)
    return bad_input(std::string(op.name()), split.lhs, tname + " needs a rank-2 lhs and rhs");
  const std::int64_t kRanks = ranks;
  const std::int64_t k = lhs->shape()[1];
  OpContext rank_ctx = run.op_context;
  rank_ctx.k_partial = !backward && sum == RankSum::kFp32Partials;
  std::vector<Tensors> outs(static_cast<std::size_t>(kRanks));
  for (std::int64_t r = 0; r < kRanks; ++r) {
    const std::int64_t lo = r * k / kRanks, hi = (r + 1) * k / kRanks;
    Tensors part = in;
    for (NamedTensor& nt : part) {
      if (nt.name == split.lhs) nt.tensor = lhs->slice(1, lo, hi).contiguous();
      if (nt.name == split.rhs) nt.tensor = rhs->slice(0, lo, hi).contiguous();
    }
    auto o = invoke(backend, op, backward, part, rank_ctx);
    if (!o) return o.error();
    outs[static_cast<std::size_t>(r)] = std::move(o).value();
  }
  DType out_dtype = DType::kBF16;
  for (const TensorDecl& d : op.outputs())
    if (d.name == split.out) out_dtype = d.candidate_dtype;
  Tensors merged;
  for (const NamedTensor& a : outs[0]) {
    std::vector<const Tensor*> rank(static_cast<std::size_t>(kRanks), &a.tensor);
    for (std::size_t r = 1; r < rank.size(); ++r) rank[r] = find_tensor(outs[r], a.name);
    if (std::find(rank.begin(), rank.end(), nullptr) != rank.end()) continue;
    const int cat = a.name == "d" + split.lhs ? 1 : a.name == "d" + split.rhs ? 0 : -1;
    const auto same_kind = [&](bool shape_too) {
      for (const Tensor* t : rank)
        if (t->dtype() != a.tensor.dtype() || t->dim() != a.tensor.dim() || (shape_too && t->shape() != a.tensor.shape()))
          return false;
      return true;
    };
    if (!backward && a.name == split.out) {
      if (!same_kind(true))
        return bad_input(std::string(op.name()), a.name, "the ranks' outputs differ in shape or dtype");
      if (rank_ctx.k_partial && a.tensor.dtype() != DType::kF32)
        return bad_input(std::string(op.name()), a.name,
                         fmt::format("a rank's partial (k_partial) is {}: the declared split adds "
                                     "FP32 partials (det_gemm_k_split.partial_dtype float32), so a "
                                     "rank must not round it",
                                     dtype_contract_name(a.tensor.dtype())));
      Tensor sum;  // p0 + p1 + ... in rank order, FP32
      add_upcast(a.tensor, sum, false);
      for (std::size_t r = 1; r < rank.size(); ++r) add_upcast(*rank[r], sum);
      merged.push_back({a.name, rounded(out_dtype, a.tensor.shape(), sum)});
    } else if (backward && cat >= 0 && a.tensor.dim() == 2 && same_kind(false)) {
      Shape s = a.tensor.shape();
      for (std::size_t r = 1; r < rank.size(); ++r)
        s[static_cast<std::size_t>(cat)] += rank[r]->shape()[static_cast<std::size_t>(cat)];
      Tensor t(a.tensor.dtype(), s);
      std::int64_t at = 0;
      for (std::size_t r = 0; r < rank.size(); ++r) {
        const Tensor& src = *rank[r];
        const std::int64_t n = src.shape()[static_cast<std::size_t>(cat)];
        Tensor dst = t.slice(cat, at, at + n);
        at += n;
        const Tensor c = src.contiguous();
        // Row by row: dst is a view with the full tensor's row stride.
        const std::int64_t rows = c.shape()[0], cols = c.shape()[1];
        const std::size_t es = dtype_size(c.dtype());
        for (std::int64_t i = 0; i < rows; ++i)
          std::memcpy(dst.element({i, 0}), c.data<std::byte>() + static_cast<std::size_t>(i * cols) * es,
                      static_cast<std::size_t>(cols) * es);
      }
      merged.push_back({a.name, std::move(t)});
    } else {
      merged.push_back(a);  // a rank-local result the runner does not merge
    }
  }
  return merged;
}

ConfigResult run_config(const RunContext& run, Backend& backend, const Op& op, bool backward,
                        const OpLayout& layout, const Tensors& canonical,
                        const LogicalTokens& tokens, const Plan& plan) {
  ConfigResult res;
  res.calls = plan.calls.size();
  invariance::LogicalResult logical;
  struct Sum {
    DType dtype;
    Shape shape;
    Tensor acc;  // FP32, flat; undefined before the first call
  };
  std::map<std::string, Sum> sums;
  std::vector<std::string> sum_order;
  const std::vector<TensorDecl> decls = backward ? op.gradients() : op.outputs();
  for (std::size_t ci = 0; ci < plan.calls.size(); ++ci) {
    const Call& call = plan.calls[ci];
    const Tensors in = invariance::call_inputs(layout, canonical, tokens, call, plan.strided);
    auto out = plan.k_ranks > 0 ? invoke_k_split(run, backend, op, backward, in, plan.k_ranks)
                            : invoke(backend, op, backward, in, run.op_context);
    if (!out) {
      res.failure = fmt::format("candidate failed on call {} of {}: {}", ci + 1, plan.calls.size(),
                                out.error().message());
      return res;
    }
    const auto active = static_cast<std::int64_t>(invariance::active_slots(tokens, call).size());
    for (const TensorDecl& d : decls) {
      const Tensor* t = find_tensor(*out, d.name);
      if (t == nullptr) {
        res.failure = fmt::format("the candidate produced no {} on call {}", d.name, ci + 1);
      return res;
      }
      const Axis axis = layout.axis_of_result(d.name, *t, call.rows(), active);
      if (axis == Axis::kToken || axis == Axis::kActive) {
        if (auto err = logical.add(layout, d.name, axis, *t, tokens, call)) {
          res.failure = *err;
      return res;
        }
      } else if (axis == Axis::kWhole) {
        auto [it, fresh] = sums.try_emplace(d.name, Sum{t->dtype(), t->shape(), {}});
        if (fresh) sum_order.push_back(d.name);
        if (t->dtype() != it->second.dtype || t->shape() != it->second.shape) {
          res.failure = fmt::format("{} changes dtype or shape between calls", d.name);
      return res;
        }
        if (plan.calls.size() == 1) {
          res.whole.push_back({d.name, *t});
          continue;
        }
        // The singleton aggregate: FP32, in call order (sample order, then chunk order).
        add_upcast(*t, it->second.acc);
      }
    }
  }
  if (auto err = logical.finish(res.tokens)) res.failure = *err;
  if (plan.calls.size() > 1)
    for (const std::string& n : sum_order)
      res.whole.push_back({n, rounded(sums[n].dtype, sums[n].shape, sums[n].acc)});
  return res;
}

// lhs (the transform) against rhs (canonical), tensor by tensor, by name.
std::vector<BitwiseTensor> compare(const std::vector<NamedTensor>& lhs,
                                   const std::vector<NamedTensor>& rhs, NanPolicy policy,
                                   std::vector<std::string>& problems) {
  std::vector<BitwiseTensor> out;
  for (const NamedTensor& r : rhs) {
    const auto it = std::find_if(lhs.begin(), lhs.end(), [&](const NamedTensor& l) { return l.name == r.name; });
    if (it == lhs.end()) {
      problems.push_back(r.name + ": missing under the transform");
      continue;
    }
    out.push_back(judge_bitwise(r.name, it->tensor, r.tensor, policy));
  }
  return out;
}

Cell finish_cell(Cell cell, std::vector<BitwiseTensor> tensors, std::vector<std::string> problems) {
  cell.bitwise = std::move(tensors);
  const bool ok = problems.empty() && bitwise_verdict(cell.bitwise) == Verdict::kGreen;
  cell.verdict = ok ? Verdict::kGreen : Verdict::kRed;
  if (!ok) {
    std::string reason = cell.bitwise.empty() ? std::string() : bitwise_reason(cell.bitwise);
    for (const std::string& p : problems) reason += (reason.empty() ? "" : "; ") + p;
    cell.reason = reason.empty() ? "nothing was compared" : reason;
  }
  return cell;
}

Status check_matrix(const Manifest& m, const LogicalTokens& tokens) {
  if (m.chunk_size < 1)
    return bad_input(m.file, "primary_matrix.chunk.chunk_size_tokens", "must be at least 1");
  const std::int64_t longest = tokens.sample_len.empty()
                                   ? 0
                                   : *std::max_element(tokens.sample_len.begin(), tokens.sample_len.end());
  if (m.padded_len < longest)
    return bad_input(m.file, "fixtures.padding.primary_padded_len",
                     fmt::format("{} is shorter than the longest sample ({})", m.padded_len, longest));
  std::vector<std::int64_t> p = m.batch_permutation;
  std::sort(p.begin(), p.end());
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<std::int64_t>(i) || p.size() != tokens.sample_len.size())
      return bad_input(m.file, "primary_matrix.batch_permutation.permutation",
                       "is not a permutation of the samples");
  if (tokens.active_count() == 0)
    return bad_input(m.file, "fixtures.samples", "no active (completion) token to compare");
  return {};
}

}  // namespace

std::string_view transform_name(Transform t) {
  for (const Named& n : kTransforms)
    if (n.t == t) return n.name;
  return "?";
}

std::optional<Transform> transform_from_name(std::string_view name) {
  for (const Named& n : kTransforms)
    if (n.name == name) return n.t;
  return std::nullopt;
}

int tp_ranks(Transform t) {
  return t == Transform::kTp2 ? 2 : t == Transform::kTp4 ? 4 : t == Transform::kTp8 ? 8 : 0;
}

std::span<const Transform> all_transforms() {
  static const std::array<Transform, kTransforms.size()> all = [] {
    std::array<Transform, kTransforms.size()> a{};
    for (std::size_t i = 0; i < kTransforms.size(); ++i) a[i] = kTransforms[i].t;
    return a;
  }();
  return all;
}

bool transform_judges_parameters(Transform t) {
  return t == Transform::kLayout || tp_ranks(t) > 0 || t == Transform::kRepeat;
}

std::optional<NotApplicable> transform_not_applicable(const Op& op, Transform t,
                                                      Direction direction) {
  const bool backward = direction == Direction::kBackward;
  if ((backward ? op.gradients() : op.outputs()).empty())
    return NotApplicable{fmt::format("{} has no {}", op.name(), backward ? "backward" : "forward")};
  if (tp_ranks(t) > 0 && !op.k_split())
    return NotApplicable{fmt::format("{} splits a GEMM's K over {} ranks; {} has no K to split", transform_name(t),
                                     tp_ranks(t), op.name()),
                         false};
  if (backward && op.token_layout() == TokenLayout::kAttentionGrid &&
      (t == Transform::kBnChunked || t == Transform::kB1Chunked))
    return NotApplicable{
        "chunked prefill is an inference path: a key's dk and dv would be split over the chunks' "
        "calls; attention's gradient invariance is judged on the full-sequence configurations"};
  return std::nullopt;
}

Result<std::vector<Cell>> run_invariance_cells(const RunContext& run, FixtureGenerator& generator,
                                               Backend& backend, const Op& op, Judgment judgment,
                                               std::span<const Transform> transforms,
                                               const FixtureSpec& spec) {
  if (!is_invariance(judgment))
    return bad_input(std::string(op.name()), std::string(contract_name(judgment)),
                     "not an invariance judgment");
  const Manifest& m = *run.manifest;
  const LogicalTokens tokens = invariance::logical_tokens(m);
  if (Status st = check_matrix(m, tokens); !st) return st.error();
  if (spec.tier != Tier::kInvariance)
    return bad_input(m.file, spec.id, "not an invariance fixture");
  const auto generated_from = std::chrono::steady_clock::now();
  auto fixture = generator.generate(spec);
  if (!fixture) return fixture.error();
  if (Status st = verify_fixture(*run.lock, *fixture); !st) return st.error();
  const double generate_seconds = seconds_since(generated_from);

  const bool backward = judgment == Judgment::kGradientInvariance;
  const Direction direction = backward ? Direction::kBackward : Direction::kForward;
  const OpClass cls = op_class_for(run, op);
  auto row = run.contract->threshold(judgment, cls, run.contract->policy.execution_dtype, run.arch);
  if (!row) return row.error();
  auto threshold = cell_threshold(*row, run.contract->file);
  if (!threshold) return threshold.error();
  const NanPolicy nan_policy = run.contract->declarations.invariance
                                   ? run.contract->declarations.invariance->nan_policy
                                   : NanPolicy::kFail;  // DESIGN §3.3's default

  Cell base;
  base.op = std::string(op.name());
  base.op_class = std::string(contract_name(cls));
  base.judgment = judgment;
  base.tier = std::string(tier_name(Tier::kInvariance));
  base.backend = {run.expected_backend, backend.name()};
  base.kernel_id = backend.kernel_id(op, direction);
  FixtureRef ref{fixture->id, fixture_hash(*fixture), fixture->seed, {}};
  for (const auto& t : fixture->tensors) ref.tensors.push_back({t.name, t.tensor.dtype(), t.tensor.shape()});
  base.fixture = std::move(ref);
  base.readback = backend.readback();
  base.threshold = *threshold;
  base.timing.push_back({"shared:fixture", generate_seconds});
  const std::vector<TensorDecl> decls = backward ? op.gradients() : op.outputs();
  if (!decls.empty()) base.dtypes = {decls.front().candidate_dtype, decls.front().candidate_dtype};

  const std::int64_t vocab = std::max<std::int64_t>(1, m.model.config.vocab_size);
  const OpLayout layout = invariance::op_layout(op, spec, tokens, m.pad_token_id % vocab);
  std::optional<ConfigResult> canonical;
  std::optional<std::pair<Plan, ConfigResult>> previous;

  std::vector<Cell> cells;
  for (Transform t : transforms) {
    Cell cell = base;
    cell.transform = std::string(transform_name(t));
    cell.id = fmt::format("{}/{}/{}/invariance/{}{}", run.expected_backend, contract_name(judgment), op.name(),
                          invariance_family_prefix(spec), cell.transform);
    auto na = transform_not_applicable(op, t, direction);
    if (!na && tp_ranks(t) > 0)
      if (auto why = tp_undeclared(run, op, tp_ranks(t), nullptr)) na = NotApplicable{*why};
    if (!na && t == Transform::kBnPermuted && !m.permutation_enabled)
      na = NotApplicable{"the workload disables batch_permutation"};
    if (!na && t == Transform::kLayout && !backend.receives_views())
      na = NotApplicable{fmt::format("{} receives contiguous copies of its inputs (ws1-exec-v1 carries no strides): "
                                     "a strided view cannot reach its kernels",
                                     backend.name())};
    if (na) {
      cell.verdict = Verdict::kNa;
      cell.reason = na->reason;
      cells.push_back(std::move(cell));
      continue;
    }
    if (!canonical) {
      const auto t0 = std::chrono::steady_clock::now();
      canonical = run_config(run, backend, op, backward, layout, fixture->tensors, tokens,
                             invariance::make_plan(m, tokens, std::nullopt, op.token_layout()));
      canonical->seconds = seconds_since(t0);
    }
    cell.timing.push_back({"shared:canonical_calls", canonical->seconds});
    if (canonical->failure) {
      cell.verdict = Verdict::kRed;
      cell.reason = "canonical BN/full: " + *canonical->failure;
      cells.push_back(std::move(cell));
      continue;
    }
    // BN/chunked and B1/chunked make the same calls: the second reuses the first's results.
    Plan plan = invariance::make_plan(m, tokens, t, op.token_layout());
    if (!previous || !(previous->first == plan)) {
      previous.reset();  // results reach V x H: hold one configuration's at a time
      const auto t0 = std::chrono::steady_clock::now();
      ConfigResult r = run_config(run, backend, op, backward, layout, fixture->tensors, tokens, plan);
      r.seconds = seconds_since(t0);
      previous.emplace(std::move(plan), std::move(r));
    }
    const ConfigResult& got = previous->second;
    cell.timing.push_back({"calls", got.seconds});
    if (got.failure) {
      cell.verdict = Verdict::kRed;
      cell.reason = *got.failure;
      cells.push_back(std::move(cell));
      continue;
    }
    // Token results (an op whose only gradient is a parameter's, embedding, has none).
    if (!canonical->tokens.empty() || canonical->whole.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      std::vector<std::string> problems;
      auto token_tensors = compare(got.tokens, canonical->tokens, nan_policy, problems);
      Cell judged = cell;
      judged.timing.push_back({"judge", seconds_since(t0)});
      cells.push_back(finish_cell(std::move(judged), std::move(token_tensors), std::move(problems)));
    }
    if (canonical->whole.empty()) continue;

    Cell params = cell;
    params.id += "/parameters";
    std::vector<std::string> param_problems;
    const auto t0 = std::chrono::steady_clock::now();
    auto whole = compare(got.whole, canonical->whole, nan_policy, param_problems);
    params.timing.push_back({"judge", seconds_since(t0)});
    if (transform_judges_parameters(t)) {
      cells.push_back(finish_cell(std::move(params), std::move(whole), std::move(param_problems)));
      continue;
    }
    std::vector<std::string> measured;
    for (const BitwiseTensor& b : whole)
      measured.push_back(fmt::format("{} {} of {} elements differ", b.name, b.mismatches,
                                     numel(b.rhs_shape)));
    params.bitwise = std::move(whole);
    params.verdict = Verdict::kNa;
    params.reason = fmt::format(
        "{}; measured{}: {}", kParametersRegroupedReason,
        got.calls > 1 ? fmt::format(" on the FP32 sum of the {} calls in call order", got.calls) : "",
        measured.empty() ? "nothing" : fmt::format("{}", fmt::join(measured, ", ")));
    cells.push_back(std::move(params));
  }
  return cells;
}

}  // namespace ws1

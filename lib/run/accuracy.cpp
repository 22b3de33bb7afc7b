// Accuracy cells (spec §4.1): candidate vs FP32 reference on one fixture — generated, or the
// user's tensors (--inputs) — and what --dump writes of a cell.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "ws1/accuracy_parts.hpp"
#include "ws1/judge.hpp"
#include "ws1/naive.hpp"
#include "ws1/numeric.hpp"
#include "ws1/runner.hpp"

namespace ws1 {
namespace {

// Elements at which the reference rounded to `dtype` (round to nearest even) is outside the row:
// where a correctly rounded candidate would fail too, the row asks more than the dtype holds.
std::int64_t floor_violations(const Tensor& reference, DType dtype, const Tolerance& tol) {
  const Tensor r = reference.contiguous();
  Tensor rounded(DType::kF32, r.shape());
  const float* from = r.data<float>();
  float* to = rounded.data<float>();
  for (std::int64_t i = 0; i < r.numel(); ++i) to[i] = dtype == DType::kF16 ? round_fp16(from[i]) : round_bf16(from[i]);
  return judge_accuracy("floor", rounded, r, tol).violations;
}

std::string cell_id(const RunContext& run, const Op& op, Judgment j, const CellInputs& in) {
  // A generated fixture's id already says op/tier/distribution; a user fixture's id
  // ("user:<file>") says the tier.
  if (in.fixture_id.rfind(std::string(op.name()) + "/", 0) == 0)
    return fmt::format("{}/{}/{}", run.expected_backend, contract_name(j), in.fixture_id);
  if (in.tier == kUserTier)
    return fmt::format("{}/{}/{}/{}", run.expected_backend, contract_name(j), op.name(),
                       in.fixture_id);
  return fmt::format("{}/{}/{}/{}/{}", run.expected_backend, contract_name(j), op.name(),
                     in.tier, in.fixture_id);
}

// An op's complaint about the user's tensors names the file they came from.
Error against_source(Error e, const CellInputs& in, const Op& op) {
  if (in.source_file.empty() || e.file != op.name()) return e;
  return bad_input(in.source_file, e.where, fmt::format("{}: {}", op.name(), e.problem));
}

// A rule's number for the candidate's dtype, or nothing where the rule does not list it.
std::optional<double> for_dtype(const std::map<ContractDType, double>& by_dtype, DType candidate) {
  const auto t = contract_dtype(candidate);
  if (!t) return std::nullopt;
  const auto it = by_dtype.find(*t);
  if (it == by_dtype.end()) return std::nullopt;
  return it->second;
}

// ws1-c1-v3's scale-free gradient rule (judgment_rules.gradient_scale_free): for a gradient
// tensor of a dtype the rule lists, atol_rel times the tensor's peak |reference|, else nothing.
std::optional<double> scale_free_atol_rel(const Contract& contract, Judgment judgment, DType candidate) {
  if (judgment != Judgment::kGradientAccuracy || !contract.rules || !contract.rules->gradient_scale_free)
    return std::nullopt;
  return for_dtype(contract.rules->gradient_scale_free->atol_rel_by_dtype, candidate);
}

// The BF16 step at |x| (x finite, >= 0): the spacing of bf16 values in x's binade.
double bf16_step(double x) {
  if (!(x > 0)) return 0.0;
  int e = 0;
  std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0, std::max(e - 8, -133));
}

// ws1-c1-v3's relative criterion (judgment_rules.relative_to_naive): the factor for `judgment`,
// or nothing where the contract has no such rule for it.
std::optional<double> relative_factor(const Contract& contract, Judgment judgment) {
  if (!contract.rules || !contract.rules->relative_to_naive) return std::nullopt;
  const auto& f = contract.rules->relative_to_naive->factor_by_judgment;
  const auto it = f.find(judgment);
  if (it == f.end()) return std::nullopt;
  return it->second;
}

// ws1-c1-v3's bias rule (judgment_rules.bias): the largest mean sign for the candidate's dtype,
// or nothing where the rule does not list it.
std::optional<double> bias_max_mean(const Contract& contract, DType candidate) {
  if (!contract.rules || !contract.rules->bias) return std::nullopt;
  return for_dtype(contract.rules->bias->max_mean_by_dtype, candidate);
}

// The sign counts of an all-zero candidate against the same reference: 0 lies below each
// positive q, above each negative one, and nearer zero than both.
SignCounts zero_candidate_signs(const SignCounts& s) {
  SignCounts z = s;
  z.above = s.negative;
  z.below = s.positive;
  z.away = 0;
  z.toward = s.positive + s.negative;
  return z;
}

Cell red(Cell cell, std::string reason) {
  cell.verdict = Verdict::kRed;
  cell.reason = std::move(reason);
  return cell;
}

}  // namespace

Result<Cell> run_accuracy_cell_on(const RunContext& run, Backend& backend, const Op& op,
                                  Judgment judgment, const CellInputs& in, CellTensors* keep) {
  const Tensors& inputs = in.tensors;
  const Contract& contract = *run.contract;
  const bool backward = judgment == Judgment::kGradientAccuracy;
  const OpClass cls = op_class_for(run, op);

  Cell cell;
  cell.id = cell_id(run, op, judgment, in);
  cell.op = std::string(op.name());
  cell.op_class = std::string(contract_name(cls));
  cell.judgment = judgment;
  cell.tier = in.tier;
  cell.transform = "none";
  cell.backend = {run.expected_backend, backend.name()};
  cell.kernel_id = backend.kernel_id(op, backward ? Direction::kBackward : Direction::kForward);
  FixtureRef ref{in.fixture_id, in.hash, in.seed, {}};
  for (const auto& t : inputs) ref.tensors.push_back({t.name, t.tensor.dtype(), t.tensor.shape()});
  cell.fixture = std::move(ref);
  cell.readback = backend.readback();

  // The row: (judgment, op class, execution dtype) — the candidate executes in bf16 even where
  // its declared output is FP32 (logprob).
  auto row = contract.threshold(judgment, cls, contract.policy.execution_dtype, run.arch);
  if (!row) return row.error();
  auto threshold = cell_threshold(*row, contract.file);
  if (!threshold) return threshold.error();
  cell.threshold = *threshold;
  const Tolerance tol = *row->tolerance;

  const std::vector<TensorDecl> decls = backward ? op.gradients() : op.outputs();
  if (decls.empty()) {
    cell.verdict = Verdict::kNa;
    cell.reason = fmt::format("{} has no {} (nothing to differentiate)", op.name(),
                              backward ? "backward" : "forward");
    return cell;
  }
  cell.dtypes = {decls.front().candidate_dtype, DType::kF32};

  // Where a cell's time goes (the artifact's timing, and -v): the reference, the candidate, the
  // judges.
  using Clock = std::chrono::steady_clock;
  const auto seconds = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
  if (in.generate_seconds >= 0) cell.timing.push_back({"fixture", in.generate_seconds});
  const Clock::time_point t0 = Clock::now();
  // The reference first: a reference that fails or has the wrong dtype is our error, not the
  // candidate's (spec §9.3: provenance is checked on every path).
  Result<ReferenceResult> gold = [&]() -> Result<ReferenceResult> {
    if (run.reference == nullptr) {
      static const std::unique_ptr<ReferenceEngine> cpu = make_cpu_reference();
      return backward ? cpu->backward(op, inputs, run.op_context) : cpu->forward(op, inputs, run.op_context);
    }
    return backward ? run.reference->backward(op, inputs, run.op_context)
                    : run.reference->forward(op, inputs, run.op_context);
  }();
  if (!gold) return against_source(gold.error(), in, op);
  cell.reference = gold->provenance;
  const Result<Tensors> reference = std::move(gold->tensors);
  if (keep != nullptr) *keep = CellTensors{{}, *reference};
  const Clock::time_point t1 = Clock::now();
  auto candidate = backward ? backend.backward(op, inputs, run.op_context)
                            : backend.forward(op, inputs, run.op_context);
  const Clock::time_point t2 = Clock::now();
  cell.timing.push_back({"reference", seconds(t0, t1)});
  cell.timing.push_back({"candidate", seconds(t1, t2)});
  if (!candidate)
    return red(std::move(cell), "candidate failed: " + candidate.error().message());
  if (keep != nullptr) keep->candidate = *candidate;

  std::vector<std::string> problems;
  std::optional<Tensors> naive_outputs;  // the naive bf16 engine's, when a v3 rule asks for them
  double naive_seconds = 0;
  for (const TensorDecl& d : decls) {
    const Tensor* r = find_tensor(*reference, d.name);
    if (r == nullptr)
      return bad_input(std::string(op.name()), d.name, "the reference produced no such tensor");
    const Tensor* c = find_tensor(*candidate, d.name);
    if (c == nullptr) {
      problems.push_back(d.name + ": the candidate produced no such tensor");
      continue;
    }
    if (!dtype_is_float(d.candidate_dtype)) {
      // Integer outputs (pack's cu_seqlens) have one right answer: compared bit for bit, and
      // the reference must give the declared integer dtype (FP32 provenance is about floats).
      if (r->dtype() != d.candidate_dtype)
        return bad_input(std::string(op.name()), d.name,
                         fmt::format("the reference gives {}, the op declares {}",
                                     dtype_contract_name(r->dtype()),
                                     dtype_contract_name(d.candidate_dtype)));
      cell.bitwise.push_back(judge_bitwise(d.name, *c, *r, NanPolicy::kFail));
      continue;
    }
    auto judged = judge_accuracy(contract, op.name(), d.name, *c, *r, tol);
    if (!judged) return judged.error();
    Tolerance applied = tol;
    // The v3 rule needs the tensor's peak |reference|, which the row's judgement records; an
    // infinite peak cannot scale a bound, and the row stays.
    if (const auto rel = scale_free_atol_rel(contract, judgment, d.candidate_dtype);
        rel && judged->reference_max_abs && std::isfinite(*judged->reference_max_abs)) {
      applied.atol = *rel * *judged->reference_max_abs;
      judged = judge_accuracy(contract, op.name(), d.name, *c, *r, applied);
      if (!judged) return judged.error();
      judged->rule = AppliedRule{"judgment_rules.gradient_scale_free", applied.atol, applied.rtol};
    }
    AccuracyTensor t = std::move(judged).value();
    // Output dtype policy (spec §2.1, §9.5): the candidate must produce the declared dtype
    // (logprob outputs FP32); a value that passes in the wrong dtype is still red.
    if (c->dtype() != d.candidate_dtype) {
      t.comparable = false;
      t.reference_max_abs.reset();  // not compared: no null candidate either
      t.zeros_pass.reset();
      t.bias_ulp.reset();
      t.notes.push_back(fmt::format("candidate dtype {} but the policy requires {}",
                                    dtype_contract_name(c->dtype()),
                                    dtype_contract_name(d.candidate_dtype)));
    }
    // The relative criterion: the naive bf16 engine on the same inputs (once per cell), judged
    // against the same reference; a reference with an infinity, or an empty tensor, keeps the
    // row alone.
    if (const auto factor = relative_factor(contract, judgment);
        factor && t.comparable && t.numel > 0 && t.reference_max_abs && std::isfinite(*t.reference_max_abs)) {
      // The naive engine's error is the candidate's business only through this number, so runs
      // of other backends on the same fixture and reference reuse it (run.naive_errors).
      const std::string memo_key = fmt::format("{}|{}|{}|{}|{}|{}", in.hash, op.name(), backward ? "bwd" : "fwd",
                                               d.name, cell.reference ? cell.reference->engine : "",
                                               contract_name(run.op_context.rms_norm_order));
      std::optional<double> naive_max_abs = run.naive_errors ? run.naive_errors->find(memo_key) : std::nullopt;
      if (!naive_max_abs) {
        if (!naive_outputs) {
          const auto n0 = Clock::now();
          auto n = backward ? naive::backward(op.name(), inputs, run.op_context)
                            : naive::forward(op.name(), inputs, run.op_context);
          if (!n) return against_source(n.error(), in, op);
          naive_outputs = std::move(n).value();
          naive_seconds = seconds(n0, Clock::now());
        }
        const Tensor* nt = find_tensor(*naive_outputs, d.name);
        if (nt == nullptr)
          return bad_input(std::string(op.name()), d.name, "the naive bf16 engine produced no such tensor");
        if (auto why = accuracy_incomparable(*nt, *r, applied))
          return bad_input(std::string(op.name()), d.name, "the naive bf16 engine's tensor: " + *why);
        naive_max_abs = max_abs_error(*nt, *r);
        if (run.naive_errors) run.naive_errors->put(memo_key, *naive_max_abs);
      }
      RelativeCheck rc;
      rc.naive_max_abs = *naive_max_abs;
      rc.factor = *factor;
      rc.floor = contract.rules->relative_to_naive->floor_steps * bf16_step(*t.reference_max_abs);
      rc.bound = rc.factor * rc.naive_max_abs + rc.floor;
      rc.passed = t.abs_error.max <= rc.bound;  // false for a NaN on either side
      // An all-zero candidate's largest error is the peak: it passes the cell only if it passes
      // this bound as well (the row's vacuity alone no longer decides).
      if (t.zeros_pass && *t.zeros_pass) t.zeros_pass = *t.reference_max_abs <= rc.bound;
      t.relative = rc;
    }
    // The bias rule: whether the errors lean one way (ws1/contract.hpp BiasRule).
    if (const auto max_mean = bias_max_mean(contract, t.dtype); max_mean && t.comparable) {
      const double z = contract.rules->bias->z;
      t.bias = judge_bias(t.signs, *max_mean, z);
      // An all-zero candidate leans toward zero everywhere: it makes the cell vacuous only if it
      // passes this rule too.
      if (t.zeros_pass && *t.zeros_pass) t.zeros_pass = judge_bias(zero_candidate_signs(t.signs), *max_mean, z).passed;
    }
    if (!passed(t) && t.comparable && (t.dtype == DType::kBF16 || t.dtype == DType::kF16))
      t.floor_violations = floor_violations(*r, t.dtype, applied);
    cell.accuracy.push_back(std::move(t));
  }
  // The naive engine's run (v3's relative criterion) is its own stage, not the judge's.
  if (naive_outputs) cell.timing.push_back({"naive", naive_seconds});
  cell.timing.push_back({"judge", std::max(0.0, seconds(t2, Clock::now()) - naive_seconds)});
  spdlog::debug("{}: reference {:.2f} s ({}), candidate {:.2f} s, judges {:.2f} s", cell.id, seconds(t0, t1),
                cell.reference ? cell.reference->engine : "?", seconds(t1, t2), cell.timing.back().seconds);
  const bool bits_ok = bitwise_verdict(cell.bitwise) == Verdict::kGreen || cell.bitwise.empty();
  const Verdict values = accuracy_verdict(cell.accuracy);
  const bool values_ok = values != Verdict::kRed || (cell.accuracy.empty() && !cell.bitwise.empty());
  cell.verdict = problems.empty() && bits_ok && values_ok ? Verdict::kGreen : Verdict::kRed;
  if (cell.verdict == Verdict::kGreen && values == Verdict::kVacuous) {
    cell.verdict = Verdict::kVacuous;
    cell.reason = vacuity_reason(cell.accuracy);
  }
  if (cell.verdict == Verdict::kRed) {
    std::string reason = accuracy_reason(cell.accuracy);
    if (!cell.bitwise.empty()) {
      const std::string bits = bitwise_reason(cell.bitwise);
      if (!bits.empty()) reason += (reason.empty() ? "" : "; ") + bits;
    }
    for (const auto& p : problems) reason += (reason.empty() ? "" : "; ") + p;
    cell.reason = reason;
  }
  return cell;
}

Result<CellInputs> generated_inputs(const RunContext& run, FixtureGenerator& generator,
                                    const FixtureSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  auto fixture = generator.generate(spec);
  if (!fixture) return fixture.error();
  if (Status st = verify_fixture(*run.lock, *fixture); !st) return st.error();
  CellInputs in;
  in.generate_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  in.fixture_id = fixture->id;
  in.hash = fixture_hash(*fixture);
  in.hashed_id = fixture->id;
  in.seed = fixture->seed;
  in.tier = std::string(tier_name(spec.tier));
  in.tensors = std::move(fixture->tensors);
  return in;
}

Result<Cell> run_accuracy_cell(const RunContext& run, FixtureGenerator& generator,
                               Backend& backend, const Op& op, Judgment judgment,
                               const FixtureSpec& spec) {
  auto in = generated_inputs(run, generator, spec);
  if (!in) return in.error();
  return run_accuracy_cell_on(run, backend, op, judgment, *in);
}

// ---- the tensors an op takes ----

namespace {

// Inputs an op accepts beyond what its fixtures hold (lib/ops/<op>.cpp says what they mean),
// with their shape derived from a fixture's tensors.
struct ExtraInput {
  std::string_view op, name;
  DType dtype;
  std::string_view note;
  Shape (*shape)(const FixtureSpec&);
};

Shape key_mask_shape(const FixtureSpec& f) {
  const TensorSpec* q = f.tensor("q");
  const TensorSpec* k = f.tensor("k");
  if (q == nullptr || k == nullptr || q->shape.size() != 4 || k->shape.size() != 4) return {};
  return {q->shape[0], k->shape[2]};
}

constexpr ExtraInput kExtraInputs[] = {
    {"attention", "key_mask", DType::kBool,
     "[B, Skv], true = valid key (default: all keys valid)", key_mask_shape},
};

}  // namespace

std::vector<OpInputDecl> op_input_decls(std::span<const FixtureSpec> catalogue,
                                        std::string_view op) {
  std::vector<OpInputDecl> decls;
  std::vector<const FixtureSpec*> per_tier;  // the normal fixture of each accuracy tier
  for (const FixtureSpec& f : catalogue)
    if (f.op == op && f.tier != Tier::kInvariance && f.distribution == Distribution::kNormal)
      per_tier.push_back(&f);
  if (per_tier.empty()) return decls;
  for (const TensorSpec& t : per_tier.front()->tensors)
    decls.push_back(OpInputDecl{t.name, t.dtype, t.role, false, "", {}});
  for (const ExtraInput& e : kExtraInputs)
    if (e.op == op)
      decls.push_back(OpInputDecl{std::string(e.name), e.dtype, TensorRole::kIndex, true,
                                  std::string(e.note), {}});
  for (const FixtureSpec* f : per_tier) {
    for (OpInputDecl& d : decls) {
      if (const TensorSpec* t = f->tensor(d.name)) {
        d.shapes.emplace_back(f->tier, t->shape);
        continue;
      }
      for (const ExtraInput& e : kExtraInputs)
        if (e.op == op && e.name == d.name) {
          Shape s = e.shape(*f);
          if (!s.empty()) d.shapes.emplace_back(f->tier, std::move(s));
        }
    }
  }
  return decls;
}

// ---- bring-your-own inputs ----

namespace {

const std::string* meta(const std::map<std::string, std::string>& m, std::string_view key) {
  auto it = m.find(std::string(key));
  return it == m.end() ? nullptr : &it->second;
}

std::string names_of(std::span<const OpInputDecl> decls, bool backward) {
  std::string s;
  for (const OpInputDecl& d : decls) {
    if (!backward && d.role == TensorRole::kGradSeed) continue;
    s += (s.empty() ? "" : ", ") + d.name + (d.optional ? " (optional)" : "");
  }
  return s;
}

}  // namespace

Result<CellInputs> user_inputs(std::span<const OpInputDecl> decls, std::string_view op,
                               bool backward, const std::string& file,
                               const std::map<std::string, std::string>& metadata,
                               std::span<const NamedTensor> tensors) {
  const std::string name = std::filesystem::path(file).filename().string();
  const std::string hint = fmt::format("see `ws1check ops --op {}`", op);

  // A dump contributes its in.* tensors; anything else in it is the cell's results.
  std::string prefix;
  if (const std::string* format = meta(metadata, kMetaDumpFormat)) {
    if (*format != kDumpFormat)
      return bad_input(file, "__metadata__." + std::string(kMetaDumpFormat),
                       fmt::format("'{}': this build reads {} dumps", *format, kDumpFormat));
    if (const std::string* dumped = meta(metadata, kMetaOp); dumped != nullptr && *dumped != op)
      return bad_input(file, "__metadata__." + std::string(kMetaOp),
                       fmt::format("a dump of op {}, not of {}", *dumped, op));
    prefix = "in.";
  }
  std::vector<const NamedTensor*> given;
  for (const NamedTensor& t : tensors) {
    if (!prefix.empty()) {
      if (t.name.rfind("cand.", 0) == 0 || t.name.rfind("ref.", 0) == 0) continue;
      if (t.name.rfind(prefix, 0) != 0)
        return bad_input(file, t.name, "not a tensor of a ws1check dump (in.*, cand.*, ref.*)");
    }
    given.push_back(&t);
  }
  const auto find = [&](const std::string& n) -> const NamedTensor* {
    for (const NamedTensor* t : given)
      if (t->name == prefix + n) return t;
    return nullptr;
  };
  std::set<std::string> known;
  for (const OpInputDecl& d : decls) known.insert(prefix + d.name);
  for (const NamedTensor* t : given)
    if (!known.contains(t->name))
      return bad_input(file, t->name,
                       fmt::format("not a tensor {} takes; it takes {} ({})", op,
                                   names_of(decls, true), hint));

  CellInputs in;
  for (const OpInputDecl& d : decls) {
    const NamedTensor* t = find(d.name);
    if (t == nullptr) {
      if (d.optional || (!backward && d.role == TensorRole::kGradSeed)) continue;
      return bad_input(file, prefix + d.name,
                       fmt::format("missing: {} {} needs it ({})", op,
                                   d.role == TensorRole::kGradSeed ? "backward" : "forward", hint));
    }
    if (t->tensor.dtype() != d.dtype)
      return bad_input(file, t->name,
                       fmt::format("is {}, {} takes {} ({})",
                                   dtype_safetensors_name(t->tensor.dtype()), op,
                                   dtype_safetensors_name(d.dtype), hint));
    in.tensors.push_back(NamedTensor{d.name, t->tensor});
  }

  in.fixture_id = "user:" + name;
  in.tier = std::string(kUserTier);
  in.source_file = file;
  in.hashed_id = in.fixture_id;
  if (const std::string* id = meta(metadata, kMetaHashedId)) {
    in.hashed_id = *id;
  } else if (const std::string* fid = meta(metadata, kMetaFixtureId)) {
    in.hashed_id = *fid;
  }
  if (const std::string* seed = meta(metadata, kMetaSeed)) {
    const char* end = seed->data() + seed->size();
    auto [p, ec] = std::from_chars(seed->data(), end, in.seed);
    if (ec != std::errc() || p != end || seed->empty())
      return bad_input(file, "__metadata__." + std::string(kMetaSeed),
                       fmt::format("'{}' is not an unsigned 64-bit integer", *seed));
  }
  in.hash = fixture_hash(in.hashed_id, in.seed, in.tensors);
  if (const std::string* recorded = meta(metadata, kMetaFixtureHash); recorded && *recorded != in.hash)
    return bad_input(file, "__metadata__." + std::string(kMetaFixtureHash),
                     fmt::format("the tensors hash to {}, not to the recorded {}: the file changed "
                                 "after ws1check wrote it (drop its __metadata__ to use it as new "
                                 "inputs)",
                                 in.hash, *recorded));
  return in;
}

// ---- dumps ----

CellDump cell_dump(const Cell& cell, const CellInputs& in, const CellTensors& computed,
                   const Contract& contract) {
  CellDump d;
  // A portable file name: '/' as "__", anything but [A-Za-z0-9._-] as '_' (a user fixture's
  // id carries "user:" and its file's name), one ".safetensors" at the end.
  constexpr std::string_view kExt = ".safetensors";
  for (char c : cell.id) {
    const bool plain = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '-' || c == '_';
    d.file_name += c == '/' ? std::string("__") : std::string(1, plain ? c : '_');
  }
  if (d.file_name.ends_with(kExt)) d.file_name.resize(d.file_name.size() - kExt.size());
  d.file_name += kExt;
  for (const NamedTensor& t : in.tensors) d.tensors.push_back({"in." + t.name, t.tensor});
  for (const NamedTensor& t : computed.candidate) d.tensors.push_back({"cand." + t.name, t.tensor});
  for (const NamedTensor& t : computed.reference) d.tensors.push_back({"ref." + t.name, t.tensor});
  d.metadata = {
      {std::string(kMetaDumpFormat), std::string(kDumpFormat)},
      {"ws1.cell_id", cell.id},
      {std::string(kMetaOp), cell.op},
      {"ws1.op_class", cell.op_class},
      {"ws1.judgment", std::string(contract_name(cell.judgment))},
      {"ws1.direction", std::string(direction_name(direction_of(cell.judgment)))},
      {"ws1.tier", cell.tier},
      {"ws1.verdict", std::string(verdict_name(cell.verdict))},
      {std::string(kMetaFixtureId), in.fixture_id},
      {std::string(kMetaFixtureHash), in.hash},
      {std::string(kMetaHashedId), in.hashed_id},
      {std::string(kMetaSeed), std::to_string(in.seed)},
      {"ws1.contract_version", contract.version},
      {"ws1.backend", cell.backend.actual},
  };
  return d;
}

}  // namespace ws1

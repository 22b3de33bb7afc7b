// Accuracy cells (spec §4.1): candidate vs FP32 reference on one fixture.
#include <fmt/format.h>

#include "ws1/judge.hpp"
#include "ws1/runner.hpp"

namespace ws1 {
namespace {

std::string cell_id(const RunContext& run, const Op& op, Judgment j, Tier tier,
                    const std::string& fixture_id) {
  // The fixture id already says op/tier/distribution; keep the tier for user fixtures.
  if (fixture_id.rfind(std::string(op.name()) + "/", 0) == 0)
    return fmt::format("{}/{}/{}", run.expected_backend, contract_name(j), fixture_id);
  return fmt::format("{}/{}/{}/{}/{}", run.expected_backend, contract_name(j), op.name(),
                     tier_name(tier), fixture_id);
}

Cell red(Cell cell, std::string reason) {
  cell.verdict = Verdict::kRed;
  cell.reason = std::move(reason);
  return cell;
}

}  // namespace

Result<Cell> run_accuracy_cell_on(const RunContext& run, Backend& backend, const Op& op,
                                  Judgment judgment, const std::string& fixture_id,
                                  const std::string& fixture_hash, std::uint64_t seed,
                                  Tier tier, const Tensors& inputs, Tensors* dump_candidate,
                                  Tensors* dump_reference) {
  const Contract& contract = *run.contract;
  const bool backward = judgment == Judgment::kGradientAccuracy;
  const OpClass cls = op_class_for(run, op);

  Cell cell;
  cell.id = cell_id(run, op, judgment, tier, fixture_id);
  cell.op = std::string(op.name());
  cell.op_class = std::string(contract_name(cls));
  cell.judgment = judgment;
  cell.tier = std::string(tier_name(tier));
  cell.transform = "none";
  cell.backend = {run.expected_backend, backend.name()};
  cell.kernel_id = backend.kernel_id(op, backward ? Direction::kBackward : Direction::kForward);
  FixtureRef ref{fixture_id, fixture_hash, seed, {}};
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

  // The reference first: a reference that fails or has the wrong dtype is our error, not the
  // candidate's (spec §9.3: provenance is checked on every path).
  auto reference = backward ? op.reference_backward(inputs, run.op_context)
                            : op.reference_forward(inputs, run.op_context);
  if (!reference) return reference.error();
  auto candidate = backward ? backend.backward(op, inputs, run.op_context)
                            : backend.forward(op, inputs, run.op_context);
  if (!candidate)
    return red(std::move(cell), "candidate failed: " + candidate.error().message());
  if (dump_candidate != nullptr) *dump_candidate = *candidate;
  if (dump_reference != nullptr) *dump_reference = *reference;

  std::vector<std::string> problems;
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
    AccuracyTensor t = std::move(judged).value();
    // Output dtype policy (spec §2.1, §9.5): the candidate must produce the declared dtype
    // (logprob outputs FP32); a value that passes in the wrong dtype is still red.
    if (c->dtype() != d.candidate_dtype) {
      t.comparable = false;
      t.notes.push_back(fmt::format("candidate dtype {} but the policy requires {}",
                                    dtype_contract_name(c->dtype()),
                                    dtype_contract_name(d.candidate_dtype)));
    }
    cell.accuracy.push_back(std::move(t));
  }
  const bool bits_ok = bitwise_verdict(cell.bitwise) == Verdict::kGreen || cell.bitwise.empty();
  const bool values_ok = accuracy_verdict(cell.accuracy) == Verdict::kGreen ||
                         (cell.accuracy.empty() && !cell.bitwise.empty());
  cell.verdict = problems.empty() && bits_ok && values_ok ? Verdict::kGreen : Verdict::kRed;
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

Result<Cell> run_accuracy_cell(const RunContext& run, FixtureGenerator& generator,
                               Backend& backend, const Op& op, Judgment judgment,
                               const FixtureSpec& spec) {
  auto fixture = generator.generate(spec);
  if (!fixture) return fixture.error();
  if (Status st = verify_fixture(*run.lock, *fixture); !st) return st.error();
  return run_accuracy_cell_on(run, backend, op, judgment, fixture->id, fixture_hash(*fixture),
                              fixture->seed, spec.tier, fixture->tensors);
}

}  // namespace ws1

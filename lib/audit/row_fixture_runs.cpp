// The rows that run ops on the tiny workload's short fixtures: gold provenance (the FP32
// references' output dtypes) and logprob output dtypes (the candidates' on every backend).
#include <fmt/format.h>

#include "audit_support.hpp"
#include "ws1/judge.hpp"

namespace ws1 {
namespace {

const FixtureSpec* short_fixture(std::span<const FixtureSpec> catalogue, std::string_view op) {
  for (const auto& f : catalogue)
    if (f.op == op && f.tier == Tier::kShort) return &f;
  return nullptr;
}

// Checks each declared tensor of `got` with `check`; records "name dtype" in `seen`.
template <class Check>
void check_tensors(const Result<Tensors>& got, const std::vector<TensorDecl>& decls,
                   std::string_view what, std::vector<std::string>& problems,
                   std::vector<std::string>& seen, std::int64_t& count, Check check) {
  if (!got) {
    problems.push_back(fmt::format("{} failed: {}", what, got.error().message()));
    return;
  }
  for (const TensorDecl& d : decls) {
    const Tensor* t = find_tensor(*got, d.name);
    if (t == nullptr) {
      problems.push_back(fmt::format("{}: no output {}", what, d.name));
      continue;
    }
    ++count;
    seen.push_back(fmt::format("{} {}", d.name, dtype_contract_name(t->dtype())));
    if (std::string p = check(d, *t); !p.empty()) problems.push_back(fmt::format("{}: {}", what, p));
  }
}

}  // namespace

Result<AuditRow> audit_gold_provenance(const RunContext& run,
                                       std::span<const FixtureSpec> catalogue,
                                       std::span<const Op* const> ops, ReferenceEngine& reference) {
  AuditRow row = audit_detail::make_row(kRowGoldProvenance);
  const Contract& contract = *run.contract;
  std::vector<std::string> problems, not_run;
  if (contract.policy.reference_dtype != ContractDType::kFloat32)
    problems.push_back(fmt::format("{}: policy.reference_dtype is {}; spec §3.1 condition 4 requires "
                                   "float32",
                                   contract.file, contract_name(contract.policy.reference_dtype)));
  FixtureGenerator generator({run.op_context.threads});
  std::int64_t tensors = 0, integer_tensors = 0;
  std::size_t ops_run = 0;
  for (const Op* op : ops) {
    const FixtureSpec* spec = short_fixture(catalogue, op->name());
    if (spec == nullptr) {
      not_run.push_back(fmt::format("{}: no short fixture in {}", op->name(), run.manifest->file));
      continue;
    }
    auto inputs = generated_inputs(run, generator, *spec);
    if (!inputs) return inputs.error();
    std::vector<std::string> op_problems, seen;
    auto check = [&](const TensorDecl& d, const Tensor& t) -> std::string {
      // Integer outputs (pack's cu_seqlens) have one right answer: their reference gives the
      // declared integer dtype (FP32 provenance is about floats; as the accuracy runner).
      if (!dtype_is_float(d.candidate_dtype))
        return t.dtype() == d.candidate_dtype
                   ? std::string()
                   : fmt::format("op {} reference '{}' has dtype {}, the op declares the integer "
                                 "dtype {}",
                                 op->name(), d.name, dtype_contract_name(t.dtype()),
                                 dtype_contract_name(d.candidate_dtype));
      const Status st = check_reference_dtype(contract, t, op->name(), d.name);
      return st ? std::string() : st.error().problem;
    };
    const std::vector<TensorDecl> outputs = op->outputs();
    const std::vector<TensorDecl> gradients = op->gradients();
    const auto tensors_of = [](Result<ReferenceResult> r) -> Result<Tensors> {
      if (!r) return r.error();
      return std::move(r->tensors);
    };
    check_tensors(tensors_of(reference.forward(*op, inputs->tensors, run.op_context)), outputs,
                  fmt::format("{} reference forward", op->name()), op_problems, seen, tensors, check);
    if (!gradients.empty())
      check_tensors(tensors_of(reference.backward(*op, inputs->tensors, run.op_context)), gradients,
                    fmt::format("{} reference backward", op->name()), op_problems, seen, tensors,
                    check);
    ++ops_run;
    for (const auto* decls : {&outputs, &gradients})
      for (const TensorDecl& d : *decls) integer_tensors += dtype_is_float(d.candidate_dtype) ? 0 : 1;
    row.details.push_back(fmt::format("{} on {} ({}): {}{}", op->name(), spec->id,
                                      inputs->hash.substr(0, 12), fmt::join(seen, ", "),
                                      op_problems.empty() ? "" : " -- " + fmt::format("{}", fmt::join(op_problems, "; "))));
    for (auto& p : op_problems) problems.push_back(std::move(p));
  }
  for (const auto& n : not_run) row.details.push_back(n);
  const std::string ran = fmt::format(
      "FP32 references of {} ops run forward and backward on the {} short fixtures: {} float "
      "tensors checked against reference_dtype {} (check_reference_dtype), {} integer tensors "
      "against their declared dtype",
      ops_run, run.manifest->workload_id, tensors - integer_tensors,
      contract_name(contract.policy.reference_dtype), integer_tensors);
  if (!problems.empty()) {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("{}; {} problem(s), first: {}", ran, problems.size(), problems.front());
  } else if (!not_run.empty() || ops_run == 0) {
    row.status = AuditStatus::kNotChecked;
    row.basis = fmt::format("{}; not run: {}", ran, fmt::join(not_run, "; "));
  } else {
    row.status = AuditStatus::kConformant;
    row.basis = ran + ": all as required (float32)";
  }
  return row;
}

Result<AuditRow> audit_logprob_dtype(const RunContext& run, std::span<const FixtureSpec> catalogue,
                                     std::span<const AuditBackend> backends,
                                     std::span<const Op* const> ops) {
  AuditRow row = audit_detail::make_row(kRowLogprobDtype);
  const Contract& contract = *run.contract;
  std::vector<std::string> problems, not_run;
  if (contract.policy.logprob_aggregates_dtype != ContractDType::kFloat32)
    problems.push_back(fmt::format("{}: policy.logprob_aggregates_dtype is {}; spec §2.1 requires float32",
                                   contract.file, contract_name(contract.policy.logprob_aggregates_dtype)));
  if (const auto& od = contract.declarations.output_dtypes)
    if (auto it = od->find(OpClass::kLogprob); it != od->end() && it->second != ContractDType::kFloat32)
      problems.push_back(fmt::format("{}: ws1check_declarations.output_dtypes.logprob is {}; spec §2.1 "
                                     "requires float32",
                                     contract.file, contract_name(it->second)));
  FixtureGenerator generator({run.op_context.threads});
  std::vector<std::string> op_names, present, absent, unserved;
  for (const auto& b : backends) (b.backend ? present : absent).push_back(b.name);
  std::int64_t tensors = 0;
  for (const Op* op : ops) {
    if (op_class_for(run, *op) != OpClass::kLogprob) continue;
    op_names.emplace_back(op->name());
    const FixtureSpec* spec = short_fixture(catalogue, op->name());
    if (spec == nullptr) {
      not_run.push_back(fmt::format("{}: no short fixture in {}", op->name(), run.manifest->file));
      continue;
    }
    auto inputs = generated_inputs(run, generator, *spec);
    if (!inputs) return inputs.error();
    for (const auto& b : backends) {
      if (b.backend == nullptr) continue;
      if (!b.backend->serves(*op, Direction::kForward)) {  // an external worker serving other ops
        unserved.push_back(fmt::format("{} serves no {} forward", b.name, op->name()));
        row.details.push_back(fmt::format("{} {}: not run: {}", b.name, op->name(), unserved.back()));
        continue;
      }
      std::vector<std::string> op_problems, seen;
      check_tensors(b.backend->forward(*op, inputs->tensors, run.op_context), op->outputs(),
                    fmt::format("{} {} forward", b.name, op->name()), op_problems, seen, tensors,
                    [](const TensorDecl&, const Tensor& t) -> std::string {
                      if (t.dtype() == DType::kF32) return {};
                      return fmt::format("output dtype {}, the policy requires float32",
                                         dtype_contract_name(t.dtype()));
                    });
      row.details.push_back(fmt::format("{} {} on {}: {}{}", b.name, op->name(), spec->id,
                                        fmt::join(seen, ", "),
                                        op_problems.empty() ? "" : " -- " + fmt::format("{}", fmt::join(op_problems, "; "))));
      for (auto& p : op_problems) problems.push_back(std::move(p));
    }
  }
  for (const auto& b : backends)
    if (b.backend == nullptr) row.details.push_back(fmt::format("{}: not present ({})", b.name, b.absent));
  for (const auto& n : not_run) row.details.push_back(n);
  const std::string ran = fmt::format(
      "{} run forward on the {} short fixtures on {}{}{}: {} outputs checked for float32",
      fmt::join(op_names, ", "), run.manifest->workload_id, fmt::join(present, ", "),
      absent.empty() ? "" : fmt::format(" ({} not present)", fmt::join(absent, ", ")),
      unserved.empty() ? "" : fmt::format(" ({}: not run)", fmt::join(unserved, "; ")), tensors);
  if (!problems.empty()) {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("{}; {} problem(s), first: {}", ran, problems.size(), problems.front());
  } else if (!not_run.empty() || op_names.empty() || present.empty() || tensors == 0) {
    row.status = AuditStatus::kNotChecked;
    row.basis = fmt::format("{}; not run: {}", ran,
                            not_run.empty() ? std::string("no logprob op or no backend") : fmt::format("{}", fmt::join(not_run, "; ")));
  } else {
    row.status = AuditStatus::kConformant;
    row.basis = ran + ": all float32; contract logprob_aggregates_dtype float32";
  }
  return row;
}

}  // namespace ws1

// The evidence cells of one decode-vs-prefill case (ws1/kv_consistency.hpp): the attention rows
// judged by the contract's attention forward_accuracy row through the accuracy judge, the KV
// cache read-back and (reported, or gated under --strict) the bitwise comparison of the rows;
// the probe's logps judged by parity_cell(), the chain aggregates as chain parity judges them.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ws1/judge.hpp"
#include "ws1/kv_consistency.hpp"
#include "ws1/numeric.hpp"

namespace ws1 {
namespace {

constexpr std::string_view kTier = "kv_consistency";
constexpr std::string_view kTransform = "prefill_vs_direct_decode";
constexpr std::string_view kRows = "o: direct decode vs prefill";

// The prefill rows as the judge's FP32 reference: widening bf16 is exact.
Tensor widened(const Tensor& bf16_rows) {
  Tensor out(DType::kF32, bf16_rows.shape());
  const auto* src = bf16_rows.data<std::uint16_t>();
  for (std::int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] = from_bf16(bf16{src[i]});
  return out;
}

// "s1 position 3 head 5 element 17" for index [row, head, element] of the rows.
std::string row_name(const KvCaseInputs& in, const Dims& index) {
  std::int64_t row = index.at(0);
  for (std::size_t i = 0; i < in.kv_case.lengths.size(); ++i) {
    if (row < in.kv_case.lengths[i])
      return fmt::format("{} position {} head {} element {}", in.sequences[i].id, row, index.at(1), index.at(2));
    row -= in.kv_case.lengths[i];
  }
  return "row " + std::to_string(index.at(0));
}

std::string bitwise_summary(const KvCaseInputs& in, const BitwiseTensor& bits) {
  const std::int64_t n = numel(bits.lhs_shape);
  if (bits.mismatches == 0 && bits.equal_bits) return fmt::format("bitwise: decode == prefill at all {} elements", n);
  if (bits.first_mismatches.empty()) return fmt::format("bitwise: not compared ({})", fmt::join(bits.notes, "; "));
  const BitMismatch& m = bits.first_mismatches.front();
  return fmt::format("bitwise: decode differs from prefill at {} of {} elements; first at {}: decode {:#06x} ({:.8g}) "
                     "against prefill {:#06x} ({:.8g})",
                     bits.mismatches, n, row_name(in, m.index), m.lhs_bits, m.lhs, m.rhs_bits, m.rhs);
}

FixtureRef fixture_ref(const KvCaseInputs& in) {
  FixtureRef f;
  f.id = fmt::format("chain/kv_consistency/{}/{}", in.kv_case.name, in.shape_label());
  f.hash = in.hash();
  f.seed = in.seed;
  for (const NamedTensor& t : in.tensors()) f.tensors.push_back({t.name, t.tensor.dtype(), t.tensor.shape()});
  return f;
}

Result<Cell> attention_cell(const KvCellInputs& ci, const KvCaseInputs& in, const KvCaseRun& run, const Cell& common) {
  const RunContext& rc = *ci.run;
  const Contract& contract = *rc.contract;
  const Op* op = find_op_impl("attention");
  if (op == nullptr) return environment_error("attention", "no implementation of the op in this build");
  Cell cell = common;
  cell.id = fmt::format("chain/kv_consistency/{}/decode_vs_prefill/{}/{}", in.kv_case.name, in.shape_label(),
                        rc.expected_backend);
  cell.op = "attention";
  const OpClass cls = op_class_for(rc, *op);
  cell.op_class = std::string(contract_name(cls));
  cell.judgment = Judgment::kForwardAccuracy;
  cell.kernel_id = ci.attention_kernel_id;
  cell.dtypes = {DType::kBF16, DType::kBF16};  // decode rows against prefill rows
  // The row accuracy cells of attention are judged by (accuracy.cpp): the execution dtype's.
  auto row = contract.threshold(Judgment::kForwardAccuracy, cls, contract.policy.execution_dtype, rc.arch);
  if (!row) return row.error();
  auto threshold = cell_threshold(*row, contract.file);
  if (!threshold) return threshold.error();
  cell.threshold = *threshold;
  if (run.candidate_failure) {
    cell.verdict = Verdict::kRed;
    cell.reason = "candidate failed: " + run.candidate_failure->message();
    return cell;
  }
  AccuracyTensor acc = judge_accuracy(std::string(kRows), run.decode, widened(run.prefill), *row->tolerance);
  BitwiseTensor rows = judge_bitwise("o bits: direct decode vs prefill", run.decode, run.prefill, NanPolicy::kFail);
  const std::string summary = bitwise_summary(in, rows);
  acc.notes.push_back(summary);
  cell.accuracy.push_back(std::move(acc));
  // C7 (torch.equal): the cache hands back exactly the bits written.
  cell.bitwise.push_back(judge_bitwise("kv_cache.k: read back vs written", run.read_k, run.written_k, NanPolicy::kFail));
  cell.bitwise.push_back(judge_bitwise("kv_cache.v: read back vs written", run.read_v, run.written_v, NanPolicy::kFail));
  if (ci.strict) cell.bitwise.push_back(rows);
  const std::int64_t elements = run.decode.numel();
  cell.metrics.push_back({"query_rows", static_cast<double>(in.rows()), std::nullopt, ""});
  cell.metrics.push_back({"bitwise_equal_elements", static_cast<double>(elements - rows.mismatches), std::nullopt, ""});
  cell.metrics.push_back({"bitwise_differing_elements", static_cast<double>(rows.mismatches), std::nullopt, ""});
  const Verdict values = accuracy_verdict(cell.accuracy);
  const bool ok = values != Verdict::kRed && bitwise_verdict(cell.bitwise) == Verdict::kGreen;
  cell.verdict = !ok ? Verdict::kRed : values;
  if (cell.verdict == Verdict::kVacuous) cell.reason = vacuity_reason(cell.accuracy);
  if (!ok) {
    std::string reason = accuracy_reason(cell.accuracy);
    const std::string bits = bitwise_reason(cell.bitwise);
    if (!bits.empty()) reason += (reason.empty() ? "" : "; ") + bits;
    cell.reason = reason;
  } else if (rows.mismatches > 0) {  // within the tolerance, not the same bits: said, not gated
    cell.reason += (cell.reason.empty() ? "" : "; ") + summary + " (within the contract's tolerance)";
  }
  return cell;
}

// The probe through parity_cell: its weights identity is the case's fixture (probe head, q, k, v).
Result<Cell> probe_cell(const KvCellInputs& ci, const KvCaseInputs& in, const KvCaseRun& run, const Cell& common) {
  const RunContext& rc = *ci.run;
  ModelWeights head;
  head.label = "probe_head";
  head.hash = common.fixture->hash;
  ParityRun probe = run.probe;
  probe.strict = ci.strict;
  probe.candidate_failure = run.candidate_failure;
  auto cell = parity_cell({rc.contract, &head, &run.probe_fixture, &probe, common.backend, ci.probe_kernel_id});
  if (!cell) return cell.error();
  cell->id = fmt::format("chain/kv_consistency/{}/logprob_probe/{}/{}", in.kv_case.name, in.shape_label(),
                         rc.expected_backend);
  cell->op = "attention_logprob_probe";
  cell->tier = common.tier;
  cell->transform = common.transform;
  cell->fixture = common.fixture;
  return cell;
}

}  // namespace

Result<std::vector<Cell>> kv_case_cells(const KvCellInputs& ci, const KvCaseInputs& in, const KvCaseRun& run) {
  Cell common;
  common.tier = std::string(kTier);
  common.transform = std::string(kTransform);
  common.backend = {ci.run->expected_backend, ci.backend};
  common.fixture = fixture_ref(in);
  common.readback = ci.readback;
  auto attention = attention_cell(ci, in, run, common);
  if (!attention) return attention.error();
  auto probe = probe_cell(ci, in, run, common);
  if (!probe) return probe.error();
  return std::vector<Cell>{std::move(attention).value(), std::move(probe).value()};
}

}  // namespace ws1

// The artifact as JSON. nlohmann's ordered_json keeps keys in the order written here, which
// is the order of contracts/evidence.schema.json. Doubles go through num(): nlohmann prints a
// finite double in its shortest round-trip form but writes NaN and infinities as null, which
// would lose them, so those become the strings "nan", "inf", "-inf".
#include <cmath>
#include <exception>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ws1/evidence.hpp"

namespace ws1 {
namespace {

using json = nlohmann::ordered_json;

json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json opt_num(const std::optional<double>& v) { return v ? num(*v) : json(nullptr); }

json dims(const Dims& d) {
  json a = json::array();
  for (std::int64_t x : d) a.push_back(x);
  return a;
}

std::string dtype_name(DType t) { return std::string(dtype_contract_name(t)); }

// Raw bits in hex, as wide as the dtype: bf16 0x3f80, f32 0x3f800000.
std::string bits_hex(std::uint64_t bits, DType t) {
  return fmt::format("0x{:0{}x}", bits, static_cast<int>(dtype_size(t) * 2));
}

json stats(const ErrorStats& s) {
  return json{{"max", num(s.max)}, {"mean", num(s.mean)}, {"p99", num(s.p99)},
              {"p999", num(s.p999)}};
}

json accuracy_json(const AccuracyTensor& t) {
  json j;
  j["comparison"] = "accuracy";
  j["name"] = t.name;
  j["shape"] = dims(t.shape);
  j["dtype"] = dtype_name(t.dtype);
  j["numel"] = t.numel;
  j["violations"] = t.violations;
  j["abs_error"] = stats(t.abs_error);
  j["rel_error"] = stats(t.rel_error);
  j["ulp_distance"] = stats(t.ulp_distance);
  if (t.worst) {
    j["worst"] = json{{"index", dims(t.worst->index)},
                      {"candidate", num(t.worst->candidate)},
                      {"reference", num(t.worst->reference)},
                      {"allowed", num(t.worst->allowed)},
                      {"margin", num(t.worst->margin)},
                      {"violates", t.worst->violates}};
  } else {
    j["worst"] = nullptr;
  }
  j["comparable"] = t.comparable;
  j["nan_elements"] = t.nan_elements;
  j["passed"] = passed(t);  // computed, so it cannot disagree with the counts
  j["notes"] = t.notes;
  j["statistics_engine"] = t.engine;
  j["floor_violations"] = t.floor_violations ? json(*t.floor_violations) : json(nullptr);
  j["reference_max_abs"] = t.reference_max_abs ? num(*t.reference_max_abs) : json(nullptr);
  j["zeros_pass"] = t.zeros_pass ? json(*t.zeros_pass) : json(nullptr);
  j["bias_ulp"] = t.bias_ulp ? num(*t.bias_ulp) : json(nullptr);
  if (t.rule)  // only under a contract with judgment_rules: v2 artifacts keep their keys
    j["rule"] = json{{"source", t.rule->source}, {"atol", num(t.rule->atol)}, {"rtol", num(t.rule->rtol)}};
  if (t.relative)  // the same: only under a contract with judgment_rules.relative_to_naive
    j["relative"] = json{{"naive_max_abs", num(t.relative->naive_max_abs)}, {"factor", num(t.relative->factor)},
                         {"floor", num(t.relative->floor)}, {"bound", num(t.relative->bound)},
                         {"passed", t.relative->passed}};
  if (t.bias) {  // the same: only under a contract with judgment_rules.bias
    const SignCounts& k = t.bias->counts;
    j["bias"] = json{{"finite", k.finite},
                     {"above", k.above},
                     {"below", k.below},
                     {"away", k.away},
                     {"toward", k.toward},
                     {"drift", num(t.bias->drift)},
                     {"growth", num(t.bias->growth)},
                     {"max_mean", num(t.bias->max_mean)},
                     {"z", num(t.bias->z)},
                     {"drift_bound", num(t.bias->drift_bound)},
                     {"growth_bound", num(t.bias->growth_bound)},
                     {"passed", t.bias->passed}};
  }
  return j;
}

json bitwise_json(const BitwiseTensor& t) {
  json j;
  j["comparison"] = "bitwise";
  j["name"] = t.name;
  j["lhs_shape"] = dims(t.lhs_shape);
  j["rhs_shape"] = dims(t.rhs_shape);
  j["lhs_dtype"] = dtype_name(t.lhs_dtype);
  j["rhs_dtype"] = dtype_name(t.rhs_dtype);
  j["shapes_equal"] = t.lhs_shape == t.rhs_shape;
  j["dtypes_equal"] = t.lhs_dtype == t.rhs_dtype;
  j["equal_bits"] = t.equal_bits;
  j["mismatches"] = t.mismatches;
  const auto listed = [&t](const std::vector<BitMismatch>& ms) {
    json a = json::array();
    for (const BitMismatch& m : ms)
      a.push_back(json{{"index", dims(m.index)},
                       {"lhs_bits", bits_hex(m.lhs_bits, t.lhs_dtype)},
                       {"rhs_bits", bits_hex(m.rhs_bits, t.rhs_dtype)},
                       {"lhs", num(m.lhs)},
                       {"rhs", num(m.rhs)}});
    return a;
  };
  j["first_mismatches"] = listed(t.first_mismatches);
  j["lhs_nans"] = t.lhs_nans;
  j["rhs_nans"] = t.rhs_nans;
  j["signed_zero_mismatches"] = t.signed_zero_mismatches;
  j["notes"] = t.notes;
  j["nan_policy"] = contract_name(t.nan_policy);
  j["first_nans"] = listed(t.first_nans);
  j["passed"] = passed(t);  // computed: equal bits, and no NaN under nan_policy fail
  return j;
}

json metric_json(const MetricResult& m) {
  json j;
  j["name"] = m.name;
  j["value"] = num(m.value);
  j["threshold"] = opt_num(m.threshold);
  // Computed, so it cannot disagree with value and threshold. NaN never passes.
  j["passed"] = m.threshold ? json(m.value <= *m.threshold) : json(nullptr);
  j["source"] = m.source.empty() ? json(nullptr) : json(m.source);
  return j;
}

json cell_json(const Cell& c) {
  json j;
  j["id"] = c.id;
  j["op"] = c.op;
  j["op_class"] = c.op_class;
  j["judgment"] = judgment_name(c.judgment);
  j["direction"] = direction_name(direction_of(c.judgment));
  j["tier"] = c.tier;
  j["transform"] = c.transform;
  j["backend"] = json{{"expected", c.backend.expected}, {"actual", c.backend.actual}};
  j["kernel_id"] = c.kernel_id;
  if (c.fixture) {
    json tensors = json::array();
    for (const FixtureTensor& t : c.fixture->tensors)
      tensors.push_back(json{{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", dims(t.shape)}});
    j["fixture"] = json{{"id", c.fixture->id},
                        {"hash", c.fixture->hash},
                        {"seed", c.fixture->seed},
                        {"tensors", std::move(tensors)}};
  } else {
    j["fixture"] = nullptr;
  }
  j["dtypes"] = json{{"candidate", dtype_name(c.dtypes.candidate)},
                     {"reference", dtype_name(c.dtypes.reference)}};
  j["readback"] = json{
      {"tf32", c.readback.tf32_enabled ? json(*c.readback.tf32_enabled) : json(nullptr)},
      {"cublas_math_mode",
       c.readback.cublas_math_mode ? json(*c.readback.cublas_math_mode) : json(nullptr)},
      {"autocast", c.readback.autocast}};
  j["reference"] = c.reference ? json{{"engine", c.reference->engine},
                                      {"math_mode", c.reference->math_mode ? json(*c.reference->math_mode)
                                                                           : json(nullptr)}}
                              : json(nullptr);
  if (c.threshold) {
    j["threshold"] = json{{"mode", threshold_mode_name(c.threshold->mode)},
                          {"atol", opt_num(c.threshold->atol)},
                          {"rtol", opt_num(c.threshold->rtol)},
                          {"source", c.threshold->source}};
  } else {
    j["threshold"] = nullptr;
  }
  j["verdict"] = verdict_name(c.verdict);
  j["reason"] = c.reason.empty() ? json(nullptr) : json(c.reason);
  json tensors = json::array();
  for (const AccuracyTensor& t : c.accuracy) tensors.push_back(accuracy_json(t));
  for (const BitwiseTensor& t : c.bitwise) tensors.push_back(bitwise_json(t));
  j["tensors"] = std::move(tensors);
  json metrics = json::array();
  for (const MetricResult& m : c.metrics) metrics.push_back(metric_json(m));
  j["metrics"] = std::move(metrics);
  json timing = json::array();
  for (const StageTime& t : c.timing) timing.push_back(json{{"stage", t.stage}, {"seconds", t.seconds}});
  j["timing"] = std::move(timing);
  return j;
}

json environment_json(const Environment& env) {
  json j;
  const HostInfo& h = env.host;
  j["host"] = json{{"hostname", h.hostname},   {"os", h.os},
                   {"kernel", h.kernel},       {"arch", h.arch},
                   {"cpu_model", h.cpu_model}, {"logical_cores", h.logical_cores},
                   {"memory_total_bytes", h.memory_total_bytes}};
  j["build"] = json{{"compiler", env.compiler},
                    {"build_type", env.build_type},
                    {"cuda", env.built_with_cuda}};
  j["backend"] = env.backend;
  if (env.gpu) {
    const GpuEnvironment& g = *env.gpu;
    j["gpu"] = json{{"name", g.name},
                    {"compute_capability", g.compute_capability},
                    {"sm_count", g.sm_count},
                    {"memory_bytes", g.memory_bytes},
                    {"l2_cache_bytes", g.l2_cache_bytes},
                    {"driver_version", g.driver_version},
                    {"cuda_runtime_version", g.cuda_runtime_version},
                    {"cublas_version", g.cublas_version},
                    {"cublas_math_mode", g.cublas_math_mode},
                    {"tf32_enabled", g.tf32_enabled}};
    j["gpu_absent_reason"] = nullptr;
  } else {
    j["gpu"] = nullptr;
    j["gpu_absent_reason"] = env.gpu_absent_reason;
  }
  j["autocast"] = env.autocast;
  j["captured_at"] = env.captured_at;
  return j;
}

json evidence_to_json(const Evidence& e) {
  json j;
  j["schema_version"] = e.schema_version;
  j["tool"] = json{{"name", e.tool.name},
                   {"version", e.tool.version},
                   {"source_commit", e.tool.source_commit},
                   {"source_dirty", e.tool.source_dirty ? json(*e.tool.source_dirty) : json(nullptr)}};
  j["checkout"] = e.checkout ? json{{"commit", e.checkout->commit}, {"dirty", e.checkout->dirty}}
                             : json(nullptr);
  j["command"] = e.command;
  j["started"] = e.started;
  j["finished"] = e.finished;
  j["contract"] = json{{"path", e.contract.path},
                       {"version", e.contract.version},
                       {"sha256", e.contract.sha256}};
  j["workload"] = json{{"path", e.workload.path},
                       {"workload_id", e.workload.workload_id},
                       {"manifest_version", e.workload.manifest_version},
                       {"identity_sha256", e.workload.identity_sha256}};
  j["environment"] = environment_json(e.environment);
  json cells = json::array();
  for (const Cell& c : e.cells) cells.push_back(cell_json(c));
  j["cells"] = std::move(cells);
  const Summary s = summarize(e.cells);
  j["summary"] = json{{"green", s.green}, {"red", s.red}, {"na", s.na}, {"vacuous", s.vacuous}, {"total", s.total}};
  j["verdict"] = verdict_name(overall_verdict(s));
  return j;
}

}  // namespace

std::string evidence_context_json(const Evidence& e) {
  json j = evidence_to_json(e);
  for (const char* key : {"started", "finished", "cells", "summary", "verdict"}) j.erase(key);
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<std::string> evidence_json(const Evidence& e, const std::string& file) {
  if (Status st = validate(e, file); !st) return st.error();
  try {
    // Invalid UTF-8 (a hostname, an argv byte) is replaced rather than thrown on.
    return evidence_to_json(e).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  } catch (const std::exception& ex) {
    return bad_input(file, "", std::string("cannot serialize the evidence: ") + ex.what());
  }
}

}  // namespace ws1

#include <fmt/format.h>

#include "ws1/runner.hpp"

namespace ws1 {

std::optional<double> NaiveErrorMemo::find(const std::string& key) const {
  std::lock_guard lock(mutex_);
  const auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

void NaiveErrorMemo::put(const std::string& key, double max_abs) {
  std::lock_guard lock(mutex_);
  values_.emplace(key, max_abs);
}

RunContext make_run_context(const Contract& contract, const Manifest& manifest,
                            const FixtureLock& lock, std::string expected_backend,
                            unsigned threads) {
  RunContext run;
  run.contract = &contract;
  run.manifest = &manifest;
  run.lock = &lock;
  run.expected_backend = std::move(expected_backend);
  run.naive_errors = std::make_shared<NaiveErrorMemo>();
  OpContext& c = run.op_context;
  const ModelConfig& m = manifest.model.config;
  c.rms_norm_eps = m.rms_norm_eps;
  c.rope_theta = m.rope_theta;
  c.num_attention_heads = m.num_attention_heads;
  c.num_key_value_heads = m.num_key_value_heads;
  c.head_dim = m.head_dim;
  c.threads = threads;
  const Declarations& d = contract.declarations;
  if (d.rms_norm_rounding) {
    c.rms_norm_order = d.rms_norm_rounding->order;
  } else {
    c.rms_norm_order = RmsNormOrder::kKernel;
    run.assumptions.push_back(
        "ws1check_declarations.rms_norm_rounding: undeclared; using kernel order (upstream "
        "NativeRMSNormOp, spec §9.6)");
  }
  if (d.det_gemm_k_split) {
    c.k_shards = d.det_gemm_k_split->shards;
  } else {
    c.k_shards = 1;
    run.assumptions.push_back(
        "ws1check_declarations.det_gemm_k_split: undeclared; det_gemm's forward sums K in one "
        "FP32 pass (no K split), so the tp transforms have no declared split to check");
  }
  return run;
}

OpClass op_class_for(const RunContext& run, const Op& op) {
  if (auto c = run.contract->op_class(op.name())) return *c;
  // spec §2.3: every catalogue op has a class there.
  return *spec_op_class(op.name());
}

}  // namespace ws1

// --model: see parity_model.hpp.
#include "parity_model.hpp"

#include <fmt/core.h>
#include <spdlog/spdlog.h>

namespace ws1cli {

ws1::Result<ws1::ModelConfig> snapshot_config(const std::string& model, const ws1::Manifest& m, bool unpinned) {
  auto config = ws1::read_hf_config(model);
  if (!config) return config.error();
  if (unpinned) return config;
  if (auto diff = ws1::config_difference(*config, m.model.config))
    return ws1::bad_input(model + "/config.json", "",
                          fmt::format("is not the manifest's model ({}): {} (exit_forbids_architecture_shrink)",
                                      m.model.model_id, *diff));
  return config;
}

ws1::Result<ws1::ModelWeights> open_model(const std::string& model, const ws1::Manifest& m, unsigned threads,
                                          bool unpinned) {
  if (model.empty()) return ws1::bad_input("--model", "", "required: synthetic:tiny, synthetic:qwen3-8b or a snapshot directory");
  if (unpinned) {
    spdlog::warn("{}: weights not pinned by the manifest: not the WS1 chain gate (hashes computed and recorded)", model);
    return ws1::load_hf_checkpoint_unpinned(model);
  }
  if (model.starts_with(kSyntheticPrefix)) {
    const std::string name = model.substr(kSyntheticPrefix.size());
    auto config = ws1::synthetic_config(name);
    if (!config) return config.error();
    return ws1::synthetic_weights(*config, name, {static_cast<std::uint64_t>(m.seed), threads});
  }
  auto config = snapshot_config(model, m);
  if (!config) return config.error();
  spdlog::info("verifying {} against the manifest's pinned shard hashes", model);
  return ws1::load_hf_checkpoint(model, m.model.weights);
}

std::string chain_kernel_id(ws1::Backend& b) {
  std::string id;
  for (std::string_view op : {"embedding", "rms_norm", "det_gemm", "qk_norm", "rope", "attention", "swiglu", "linear_logp"})
    id += (id.empty() ? "" : " ") + b.kernel_id(*ws1::find_op_impl(op), ws1::Direction::kForward);
  return id;
}

}  // namespace ws1cli

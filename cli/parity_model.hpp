// What the commands that run the chain (parity, gate) share: --model (synthetic weights or a
// Hugging Face snapshot verified against the manifest) and the chain's kernel id.
#pragma once

#include <string>
#include <string_view>

#include "ws1/backend.hpp"
#include "ws1/manifest.hpp"
#include "ws1/model.hpp"

namespace ws1cli {

inline constexpr std::string_view kSyntheticPrefix = "synthetic:";

// A snapshot's config.json, which must be the manifest's model (no shrunk architecture, NOTES §e)
// unless `unpinned` (then any Qwen3 dense config the chain runs).
ws1::Result<ws1::ModelConfig> snapshot_config(const std::string& model, const ws1::Manifest& m,
                                              bool unpinned = false);

// synthetic:<config> weights from the manifest seed, or a snapshot verified against the
// manifest's pins (exit 2 naming the file and shard or tensor otherwise), or with `unpinned`
// (parity --unpinned) any Qwen3 dense snapshot, its hashes recorded and the run labelled as
// not the WS1 chain gate.
ws1::Result<ws1::ModelWeights> open_model(const std::string& model, const ws1::Manifest& m, unsigned threads,
                                          bool unpinned = false);

// The kernel ids of the chain's ops on `b` (a parity cell's kernel id).
std::string chain_kernel_id(ws1::Backend& b);

}  // namespace ws1cli

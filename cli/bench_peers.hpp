// `ws1check bench --peers FILE`: the kernels a user would otherwise pick (cuDNN and flash SDPA,
// the flash_attn package, ...), timed by tools/bench/peers.py in the same device call and
// written as a ws1-peers-v1 file, matched here to the bench's rows. Nothing in here needs CUDA,
// so the parsing and the matching are tested on the CPU (test/cli/bench_peers_test.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ws1/error.hpp"
#include "ws1/op.hpp"

namespace ws1cli {

inline constexpr std::string_view kPeersSchema = "ws1-peers-v1";

// One row of the peers file: a peer's median on one (op, variant, direction).
struct PeerTiming {
  std::string op, variant, direction, peer;
  double median_ms = 0;  // > 0 unless `error`
  double tflops = 0;
  std::string error;  // non-empty: the peer raised (or was not run) on this row, and has no time
};

struct PeersFile {
  std::string path;
  nlohmann::json environment;  // the file's environment block as written (torch, cuDNN, GPU, ...)
  std::vector<PeerTiming> rows;
};

// Reads and checks a ws1-peers-v1 file. Errors name the file and the field (`FILE: rows[2].
// median_ms: ...`): unreadable, not JSON, another schema, a row without op / variant /
// direction / peer, a direction other than fwd, bwd, fwd+bwd, a row without an error whose
// median_ms is missing or not positive (or tflops missing or negative), a repeated row.
ws1::Result<PeersFile> read_peers_file(const std::filesystem::path& path);

// The shapes at which the bench times attention beside the op's default row, and peers.py its
// peers: Qwen3-8B's 32 query / 8 kv heads of 128, layout [B, H, S, D], causal, no key_mask.
struct AttentionPeerShape {
  std::int64_t b, sq, skv;
  bool backward;  // decode is timed forward only
};
inline constexpr std::int64_t kPeerHq = 32, kPeerHkv = 8, kPeerHeadDim = 128;
inline constexpr AttentionPeerShape kAttentionPeerShapes[] = {
    {1, 8192, 8192, true}, {1, 4096, 4096, true}, {32, 1, 4096, false}};

// The peers-file variant that attention inputs `in` are: "causal S=<S>" for one sequence of S
// queries and S keys, "decode B=<B> Skv=<Skv>" for B sequences of one query; "" (no peer
// matches) for any other shape, other head counts or head_dim, or with a key_mask. The bench
// names its attention rows with it, and matches the op's default row by it, so a row is only
// compared with a peer that ran the same shapes.
std::string attention_peer_variant(const ws1::Tensors& in);

// A peer's time beside ours.
struct PeerRatio {
  std::string peer;
  double median_ms = 0;  // the peer's
  double x_peer = 0;     // the peer's median / ours: above 1, ours is faster
  std::string error;     // the peer failed on this row: no time, no ratio
};

// The peers timed on (op, variant, direction), in file order, against our median `our_ms`. An
// empty variant matches nothing.
std::vector<PeerRatio> compare_to_peers(const PeersFile& peers, std::string_view op, std::string_view variant,
                                        std::string_view direction, double our_ms);

// A bench row as the matching sees it: `variant` is the row's own ("" for the op's default
// row), `peer_variant` the peers-file variant it stands for ("" for none).
struct TimedRow {
  std::string op, variant, peer_variant, direction;
  double median_ms = 0;
};

// Our forward plus our backward of one variant against the peers' single fwd+bwd call.
struct CombinedRow {
  std::string op, variant, peer_variant;
  double fwd_ms = 0, bwd_ms = 0;
  std::vector<PeerRatio> peers;
};

// One CombinedRow per (op, variant) that has both a fwd and a bwd row standing for the same
// peer variant, and fwd+bwd peers to compare with.
std::vector<CombinedRow> combine_fwd_bwd(const PeersFile& peers, std::span<const TimedRow> rows);

// The artifact's pieces: a row's "peers" array, a "combined" entry, the "peers_file" block.
nlohmann::json peers_json(std::span<const PeerRatio> peers);
nlohmann::json combined_json(const CombinedRow& c);
nlohmann::json peers_file_json(const PeersFile& peers);

// The line printed under a bench row for one peer: "x cudnn_sdpa 0.85 (4.8123 ms)", or
// "cudnn_sdpa failed: <the error's first line>".
std::string describe(const PeerRatio& p);

}  // namespace ws1cli

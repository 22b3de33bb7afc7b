#include "bench_peers.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "json_node.hpp"

namespace ws1cli {
namespace {

using ws1::json::Node;

constexpr std::uintmax_t kMaxPeersBytes = 16u << 20;

std::string first_line(std::string_view s) {
  const auto end = s.find('\n');
  return std::string(s.substr(0, end));
}

PeersFile parse(const Node& root, std::string path) {
  PeersFile f;
  f.path = std::move(path);
  const Node schema = root.at("schema");
  if (schema.string() != kPeersSchema)
    schema.fail(fmt::format("expected \"{}\", got \"{}\"", kPeersSchema, schema.string()));
  const Node env = root.at("environment");
  if (env.type_name() != "object") env.fail("must be an object, got " + std::string(env.type_name()));
  f.environment = nlohmann::json::parse(simdjson::minify(env.element()));
  std::map<std::tuple<std::string, std::string, std::string, std::string>, std::string> seen;
  for (const Node& n : root.at("rows").items()) {
    PeerTiming t;
    t.op = n.at("op").nonempty_string();
    t.variant = n.at("variant").nonempty_string();
    const Node dir = n.at("direction");
    t.direction = dir.string();
    if (t.direction != "fwd" && t.direction != "bwd" && t.direction != "fwd+bwd")
      dir.fail(fmt::format("unknown direction \"{}\" (known: fwd, bwd, fwd+bwd)", t.direction));
    t.peer = n.at("peer").nonempty_string();
    if (auto e = n.find("error")) {
      // A peer that raised has no time; its row stays so the bench can say why.
      t.error = e->nonempty_string();
    } else {
      const Node ms = n.at("median_ms");
      t.median_ms = ms.number();
      if (t.median_ms <= 0) ms.fail("must be positive, got " + ws1::json::format_number(t.median_ms));
      t.tflops = n.at("tflops").nonnegative();
    }
    auto [it, fresh] = seen.emplace(std::tuple{t.op, t.variant, t.direction, t.peer}, n.path());
    if (!fresh)
      n.fail(fmt::format("repeats the row (op {}, variant {}, direction {}, peer {}) of {}", t.op, t.variant,
                         t.direction, t.peer, it->second));
    f.rows.push_back(std::move(t));
  }
  return f;
}

}  // namespace

ws1::Result<PeersFile> read_peers_file(const std::filesystem::path& path) {
  const std::string file = path.string();
  auto text = ws1::json::read_text_file(path, kMaxPeersBytes);
  if (!text) return text.error();
  try {
    simdjson::dom::parser parser;
    return parse(ws1::json::parse_document(parser, *text, file), file);
  } catch (const ws1::json::Failure& f) {
    return f.error;
  } catch (const std::exception& e) {
    return ws1::bad_input(file, "$", std::string("cannot parse: ") + e.what());
  }
}

std::string attention_peer_variant(const ws1::Tensors& in) {
  const ws1::Tensor* q = ws1::find_tensor(in, "q");
  const ws1::Tensor* k = ws1::find_tensor(in, "k");
  const ws1::Tensor* v = ws1::find_tensor(in, "v");
  if (q == nullptr || k == nullptr || v == nullptr || ws1::find_tensor(in, "key_mask") != nullptr) return "";
  if (q->dim() != 4 || k->dim() != 4 || v->shape() != k->shape()) return "";
  const ws1::Shape& qs = q->shape();
  const ws1::Shape& ks = k->shape();
  if (qs[0] != ks[0] || qs[1] != kPeerHq || ks[1] != kPeerHkv || qs[3] != kPeerHeadDim || ks[3] != kPeerHeadDim)
    return "";
  if (qs[0] == 1 && qs[2] == ks[2]) return fmt::format("causal S={}", qs[2]);
  if (qs[2] == 1) return fmt::format("decode B={} Skv={}", qs[0], ks[2]);
  return "";
}

std::vector<PeerRatio> compare_to_peers(const PeersFile& peers, std::string_view op, std::string_view variant,
                                        std::string_view direction, double our_ms) {
  std::vector<PeerRatio> out;
  if (variant.empty()) return out;
  for (const PeerTiming& t : peers.rows) {
    if (t.op != op || t.variant != variant || t.direction != direction) continue;
    if (!t.error.empty())
      out.push_back({t.peer, 0.0, 0.0, t.error});
    else
      out.push_back({t.peer, t.median_ms, t.median_ms / our_ms, ""});
  }
  return out;
}

std::vector<CombinedRow> combine_fwd_bwd(const PeersFile& peers, std::span<const TimedRow> rows) {
  std::vector<CombinedRow> out;
  for (const TimedRow& f : rows) {
    if (f.direction != "fwd" || f.peer_variant.empty()) continue;
    const auto b = std::find_if(rows.begin(), rows.end(), [&](const TimedRow& r) {
      return r.direction == "bwd" && r.op == f.op && r.variant == f.variant && r.peer_variant == f.peer_variant;
    });
    if (b == rows.end()) continue;
    CombinedRow c{f.op, f.variant, f.peer_variant, f.median_ms, b->median_ms, {}};
    c.peers = compare_to_peers(peers, f.op, f.peer_variant, "fwd+bwd", f.median_ms + b->median_ms);
    if (!c.peers.empty()) out.push_back(std::move(c));
  }
  return out;
}

nlohmann::json peers_json(std::span<const PeerRatio> peers) {
  nlohmann::json a = nlohmann::json::array();
  for (const PeerRatio& p : peers) {
    if (!p.error.empty())
      a.push_back({{"peer", p.peer}, {"error", p.error}});
    else
      a.push_back({{"peer", p.peer}, {"median_ms", p.median_ms}, {"x_peer", p.x_peer}});
  }
  return a;
}

nlohmann::json combined_json(const CombinedRow& c) {
  return {{"op", c.op},
          {"variant", c.variant.empty() ? "default" : c.variant},
          {"peer_variant", c.peer_variant},
          {"direction", "fwd+bwd"},
          {"fwd_ms", c.fwd_ms},
          {"bwd_ms", c.bwd_ms},
          {"median_ms", c.fwd_ms + c.bwd_ms},
          {"peers", peers_json(c.peers)}};
}

nlohmann::json peers_file_json(const PeersFile& peers) {
  return {{"path", peers.path}, {"environment", peers.environment}};
}

std::string describe(const PeerRatio& p) {
  if (!p.error.empty()) return fmt::format("{} failed: {}", p.peer, first_line(p.error));
  return fmt::format("x {} {:.2f} ({:.4f} ms)", p.peer, p.x_peer, p.median_ms);
}

}  // namespace ws1cli

// A local Hugging Face Qwen3 snapshot: config.json, model.safetensors.index.json and the shards
// it names. Nothing is read from a shard before the index and every shard are verified against
// the manifest's pins (weight_snapshot: index_sha256, shards[].{filename, size_bytes, sha256}).
// Then each tensor the chain needs is looked up in the index, checked (bf16, the config's
// shape) and read; projections are transposed once into det_gemm's [in, out].
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "json_node.hpp"
#include "weight_layout.hpp"
#include "ws1/hash.hpp"
#include "ws1/safetensors.hpp"

namespace ws1 {
namespace fs = std::filesystem;
using json::Node;
using model_detail::WeightEntry;
using model_detail::WeightKind;

namespace {

constexpr std::string_view kDefaultIndex = "model.safetensors.index.json";

std::int64_t positive(const Node& n) {
  const std::int64_t v = n.integer();
  if (v < 1) n.fail(fmt::format("must be a positive integer, got {}", v));
  return v;
}

bool flag_or(const Node& root, std::string_view key, bool absent) {
  auto n = root.find(key);
  return n ? n->boolean() : absent;
}

ModelConfig parse_config(const Node& root) {
  const std::string_view type = root.at("model_type").string();
  if (type != "qwen3") root.fail_at("model_type", fmt::format("'{}' (the chain is Qwen3 dense: qwen3)", type));
  if (auto arch = root.find("architectures")) {
    const auto names = arch->str_list();
    if (std::find(names.begin(), names.end(), "Qwen3ForCausalLM") == names.end())
      arch->fail("does not list Qwen3ForCausalLM");
  }
  ModelConfig c;
  c.num_hidden_layers = positive(root.at("num_hidden_layers"));
  c.hidden_size = positive(root.at("hidden_size"));
  c.intermediate_size = positive(root.at("intermediate_size"));
  c.num_attention_heads = positive(root.at("num_attention_heads"));
  c.num_key_value_heads = positive(root.at("num_key_value_heads"));
  c.head_dim = positive(root.at("head_dim"));
  c.vocab_size = positive(root.at("vocab_size"));
  c.max_position_embeddings = positive(root.at("max_position_embeddings"));
  c.rope_theta = root.at("rope_theta").number();
  c.rms_norm_eps = root.at("rms_norm_eps").number();
  c.hidden_act = std::string(root.at("hidden_act").string());
  auto scaling = root.find("rope_scaling");
  c.rope_scaling_null = !scaling || scaling->element().is_null();
  // Qwen3Config's defaults for the flags a config.json may leave out.
  c.tie_word_embeddings = flag_or(root, "tie_word_embeddings", false);
  c.attention_bias = flag_or(root, "attention_bias", false);
  c.qk_norm = true;  // Qwen3 always norms q and k per head (not a config.json field)
  return c;
}

struct Index {
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
};

Index parse_index(const Node& root) {
  Index x;
  for (const auto& [name, file] : root.at("weight_map").fields()) {
    const std::string f(file.nonempty_string());
    if (f.find('/') != std::string::npos || f == "." || f == "..")
      file.fail("'" + f + "' is not a file name in the snapshot directory");
    x.weight_map[name] = f;
  }
  return x;
}

// `parse` on the JSON `text` of `path`; json::Failure becomes the Error it carries.
template <class F>
auto parse_json(const std::string& text, const fs::path& path, F parse)
    -> Result<decltype(parse(std::declval<const Node&>()))> {
  const std::string file = path.string();
  try {
    simdjson::dom::parser parser;
    return parse(json::parse_document(parser, text, file));
  } catch (const json::Failure& f) {
    return f.error;
  }
}

Result<std::string> file_sha256(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad_input(path.string(), "", "cannot open");
  Sha256Hasher h;
  std::vector<char> buf(std::size_t{16} << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got > 0) h.update(std::as_bytes(std::span(buf.data(), got)));
  }
  if (in.bad()) return bad_input(path.string(), "", "read error");
  return h.hex();
}

// The index's shards are exactly the pinned ones; each has its pinned size and SHA-256.
Status verify_shards(const fs::path& dir, const Index& index, const WeightSnapshot& pins) {
  std::set<std::string> named;
  for (const auto& [tensor, file] : index.weight_map) named.insert(file);
  std::set<std::string> pinned;
  for (const WeightShard& s : pins.shards) pinned.insert(s.filename);
  for (const std::string& f : named)
    if (!pinned.count(f))
      return bad_input((dir / f).string(), "",
                       "not one of the manifest's pinned shards (model_identity.weight_snapshot.shards)");
  for (std::size_t i = 0; i < pins.shards.size(); ++i) {
    const WeightShard& s = pins.shards[i];
    const fs::path path = dir / s.filename;
    const std::string where = fmt::format("model_identity.weight_snapshot.shards[{}]", i);
    if (!named.count(s.filename))
      return bad_input(path.string(), "", "pinned shard (" + where + ") that the index does not name");
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) return bad_input(path.string(), "", "pinned shard missing or unreadable: " + ec.message());
    if (size != s.size_bytes)
      return bad_input(path.string(), "size",
                       fmt::format("{} bytes, the manifest pins {} ({}.size_bytes)", size, s.size_bytes, where));
    auto sha = file_sha256(path);
    if (!sha) return sha.error();
    if (*sha != s.sha256)
      return bad_input(path.string(), "sha256",
                       fmt::format("{}, the manifest pins {} ({}.sha256): refused", *sha, s.sha256, where));
  }
  return {};
}

Tensor transposed(const Tensor& t) { return t.transpose(0, 1).contiguous(); }

// Reads the entry's tensor from its shard and checks dtype and shape.
Result<Tensor> read_entry(const fs::path& dir, const fs::path& index_path, const Index& index,
                          std::map<std::string, SafetensorsIndex>& headers, const WeightEntry& e) {
  auto it = index.weight_map.find(e.name);
  if (it == index.weight_map.end())
    return bad_input(index_path.string(), e.name, "missing from weight_map");
  const fs::path shard = dir / it->second;
  auto h = headers.find(it->second);
  if (h == headers.end()) {
    auto header = read_safetensors_header(shard);
    if (!header) return header.error();
    h = headers.emplace(it->second, std::move(header).value()).first;
  }
  const SafetensorsEntry* entry = h->second.find(e.name);
  if (entry == nullptr)
    return bad_input(shard.string(), e.name, "missing from the shard the index maps it to");
  if (entry->dtype != DType::kBF16)
    return bad_input(shard.string(), e.name,
                     fmt::format("dtype {} (expected BF16)", dtype_safetensors_name(entry->dtype)));
  if (entry->shape != e.hf_shape)
    return bad_input(shard.string(), e.name,
                     fmt::format("shape {} (expected {} from config.json)", shape_string(entry->shape),
                                 shape_string(e.hf_shape)));
  return read_safetensors_tensor(shard, h->second, e.name);
}

}  // namespace

Result<ModelConfig> read_hf_config(const fs::path& dir) {
  const fs::path path = dir / "config.json";
  auto text = json::read_text_file(path, std::uintmax_t{1} << 30);
  if (!text) return text.error();
  auto c = parse_json(*text, path, parse_config);
  if (!c) return c.error();
  if (Status s = check_config(*c, path.string()); !s) return s.error();
  return c;
}

namespace {

// Every tensor the chain needs, from the verified (or recorded) index.
Result<ModelWeights> read_weights(const fs::path& dir, const fs::path& index_path, const Index& index,
                                  ModelWeights w) {
  std::map<std::string, SafetensorsIndex> headers;
  for (const WeightEntry& e : model_detail::weight_entries(w)) {
    auto t = read_entry(dir, index_path, index, headers, e);
    if (!t) return t.error();
    *e.slot = e.kind == WeightKind::kProjection ? transposed(*t) : *t;
  }
  return w;
}

}  // namespace

Result<ModelWeights> load_hf_checkpoint(const fs::path& dir, const WeightSnapshot& pins) {
  auto config = read_hf_config(dir);
  if (!config) return config.error();
  const fs::path index_path = dir / (pins.index_file.empty() ? std::string(kDefaultIndex) : pins.index_file);
  auto index_text = json::read_text_file(index_path, std::uintmax_t{1} << 30);
  if (!index_text) return index_text.error();
  if (const std::string sha = sha256_hex(*index_text); sha != pins.index_sha256)
    return bad_input(index_path.string(), "sha256",
                     fmt::format("{}, the manifest pins {} (model_identity.weight_snapshot.index_sha256): refused",
                                 sha, pins.index_sha256));
  auto index = parse_json(*index_text, index_path, parse_index);
  if (!index) return index.error();
  if (Status s = verify_shards(dir, *index, pins); !s) return s.error();

  ModelWeights w;
  w.config = *config;
  w.label = "hf:" + dir.string();
  w.synthetic = false;
  w.pinned = true;
  w.snapshot = pins;
  w.hash = pins.content_hash_algorithm + ":" + pins.content_hash;
  return read_weights(dir, index_path, *index, std::move(w));
}

Result<ModelWeights> load_hf_checkpoint_unpinned(const fs::path& dir) {
  auto config = read_hf_config(dir);
  if (!config) return config.error();
  const fs::path index_path = dir / kDefaultIndex;
  auto index_text = json::read_text_file(index_path, std::uintmax_t{1} << 30);
  if (!index_text) return index_text.error();
  auto index = parse_json(*index_text, index_path, parse_index);
  if (!index) return index.error();

  ModelWeights w;
  w.config = *config;
  w.label = "hf-unpinned:" + dir.string();
  w.synthetic = false;
  w.pinned = false;
  WeightSnapshot& s = w.snapshot;
  s.pin_method = "unpinned: computed from the files read";
  s.index_file = std::string(kDefaultIndex);
  s.index_sha256 = sha256_hex(*index_text);
  s.content_hash_algorithm = std::string(kShardRecordsHash);
  std::set<std::string> files;
  for (const auto& [tensor, file] : index->weight_map) files.insert(file);
  for (const std::string& f : files) {
    const fs::path path = dir / f;
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec) return bad_input(path.string(), "", "shard named by the index is missing or unreadable: " + ec.message());
    auto sha = file_sha256(path);
    if (!sha) return sha.error();
    s.shards.push_back({f, *sha, size});
  }
  s.content_hash = shard_records_sha256(s.shards);
  w.hash = s.content_hash_algorithm + ":" + s.content_hash;
  return read_weights(dir, index_path, *index, std::move(w));
}

std::string not_gate_note(const ModelWeights& w) {
  if (w.synthetic) return "synthetic weights: not the WS1 chain gate";
  if (!w.pinned) return "weights not pinned by the manifest: not the WS1 chain gate";
  return "";
}

std::string snapshot_record(const WeightSnapshot& s) {
  std::string r = fmt::format("index {} sha256 {}", s.index_file, s.index_sha256);
  for (const WeightShard& sh : s.shards) r += fmt::format("; {} sha256 {} ({} bytes)", sh.filename, sh.sha256, sh.size_bytes);
  return r;
}

}  // namespace ws1

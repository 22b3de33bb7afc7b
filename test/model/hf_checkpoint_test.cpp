// The Hugging Face checkpoint loader on a tiny sharded checkpoint written by numpy
// (write_tiny_checkpoint.py): it loads and runs; a shard or index whose hash differs from the pin,
// a shard that is not pinned, and a missing, mis-shaped or non-bf16 tensor are refused (exit 2)
// naming the file and the tensor or shard.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "model_test_support.hpp"
#include "temp_dir.hpp"
#include "ws1/hash.hpp"
#include "ws1/safetensors.hpp"

using namespace ws1;
namespace fs = std::filesystem;

namespace {

constexpr const char* kShard1 = "model-00001-of-00002.safetensors";
constexpr const char* kShard2 = "model-00002-of-00002.safetensors";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

using test::TempDir;

// Writes the tiny checkpoint into `dir` with the script's extra arguments (test/model/meson.build
// names the interpreter with numpy and the script).
void write_checkpoint(const fs::path& dir, const std::string& extra = "") {
  const char* py = std::getenv("WS1_PYTHON");
  const char* script = std::getenv("WS1_TINY_CHECKPOINT_SCRIPT");
  if (py == nullptr || script == nullptr || *py == '\0')
    FAIL("WS1_PYTHON / WS1_TINY_CHECKPOINT_SCRIPT not set: run through meson test (needs python3-numpy)");
  const std::string cmd = fmt::format("'{}' '{}' '{}' {}", py, script, dir.string(), extra);
  REQUIRE(std::system(cmd.c_str()) == 0);
}

// Pins made from the files as they are (what a manifest would pin for this checkpoint).
WeightSnapshot pins_of(const fs::path& dir) {
  WeightSnapshot p;
  p.index_file = "model.safetensors.index.json";
  p.index_sha256 = sha256_hex(slurp(dir / p.index_file));
  p.content_hash_algorithm = "sha256-of-sorted-shard-records-v1";
  std::string records;
  for (const char* f : {kShard1, kShard2}) {
    const std::string bytes = slurp(dir / f);
    p.shards.push_back({f, sha256_hex(bytes), bytes.size()});
    records += fmt::format("{}\t{}\t{}\n", f, p.shards.back().sha256, bytes.size());
  }
  p.content_hash = sha256_hex(records);
  return p;
}

}  // namespace

TEST_CASE("a tiny Hugging Face checkpoint loads, verified, and runs the parity protocol", "[model][hf]") {
  TempDir d("ws1-hf");
  write_checkpoint(d.path);
  const WeightSnapshot pins = pins_of(d.path);
  auto w = load_hf_checkpoint(d.path, pins);
  if (!w) FAIL(w.error().message());
  CHECK_FALSE(w->synthetic);
  CHECK(w->label == "hf:" + d.path.string());
  CHECK(w->hash == "sha256-of-sorted-shard-records-v1:" + pins.content_hash);
  auto tiny = synthetic_config("tiny");
  REQUIRE(tiny.ok());
  CHECK_FALSE(config_difference(w->config, *tiny).has_value());
  // Projections are det_gemm's b = the Hugging Face [out, in] weight transposed.
  auto shard = read_safetensors(d.path / kShard1);
  REQUIRE(shard.ok());
  const Tensor* q = shard->find("model.layers.0.self_attn.q_proj.weight");
  REQUIRE(q != nullptr);
  const auto* file_bits = q->data<std::uint16_t>();
  const auto* chain_bits = w->layers[0].q.data<std::uint16_t>();
  bool same = true;
  for (std::int64_t o = 0; o < 64; ++o)
    for (std::int64_t i = 0; i < 64; ++i) same = same && file_bits[o * 64 + i] == chain_bits[i * 64 + o];
  CHECK(same);
  auto backend = make_cpu_bf16_backend();
  test::ParityOutcome o = test::manifest_parity(*backend, true, &*w);
  INFO(o.cell.reason);
  CHECK(o.cell.verdict == Verdict::kGreen);
  CHECK(test::metric(o.cell, "max_abs_dlogp").value == 0.0);
  CHECK(o.cell.fixture->id.find("#sha256-of-sorted-shard-records-v1:") != std::string::npos);
}

TEST_CASE("unpinned, any layout loads with its hashes computed as a manifest would pin them", "[model][hf]") {
  TempDir d("ws1-hf-unpinned");
  write_checkpoint(d.path, "--layers 3 --kv-heads 1");
  auto w = load_hf_checkpoint_unpinned(d.path);
  if (!w) FAIL(w.error().message());
  CHECK_FALSE(w->synthetic);
  CHECK_FALSE(w->pinned);
  CHECK(w->label == "hf-unpinned:" + d.path.string());
  CHECK(w->config.num_hidden_layers == 3);
  CHECK(w->config.num_key_value_heads == 1);
  CHECK(w->layers.size() == 3);
  const WeightSnapshot pins = pins_of(d.path);  // computed here independently
  CHECK(w->snapshot.index_sha256 == pins.index_sha256);
  REQUIRE(w->snapshot.shards.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(w->snapshot.shards[i].filename == pins.shards[i].filename);
    CHECK(w->snapshot.shards[i].sha256 == pins.shards[i].sha256);
    CHECK(w->snapshot.shards[i].size_bytes == pins.shards[i].size_bytes);
  }
  CHECK(w->hash == "sha256-of-sorted-shard-records-v1:" + pins.content_hash);
  CHECK(not_gate_note(*w) == "weights not pinned by the manifest: not the WS1 chain gate");
  // The same files pinned: the pinned load agrees and is the gate's.
  auto pinned = load_hf_checkpoint(d.path, pins);
  REQUIRE(pinned.ok());
  CHECK(pinned->pinned);
  CHECK(not_gate_note(*pinned).empty());
  CHECK(pinned->hash == w->hash);
  // Unpinned is no looser about the files: a missing shard or tensor is still refused.
  fs::remove(d.path / kShard2);
  auto missing = load_hf_checkpoint_unpinned(d.path);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ExitCode::kBadInput);
  CHECK_THAT(missing.error().message(), Catch::Contains(kShard2));
}

TEST_CASE("a shard whose hash differs from its pin is refused, naming the shard", "[model][hf]") {
  TempDir d("ws1-hf");
  write_checkpoint(d.path);
  const WeightSnapshot pins = pins_of(d.path);
  {  // one byte of the last tensor's data changes: same size, another hash
    std::fstream f(d.path / kShard2, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  auto w = load_hf_checkpoint(d.path, pins);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code == ExitCode::kBadInput);
  const std::string m = w.error().message();
  CHECK(m.rfind((d.path / kShard2).string() + ": sha256: ", 0) == 0);
  CHECK(m.find("the manifest pins " + pins.shards[1].sha256 +
               " (model_identity.weight_snapshot.shards[1].sha256): refused") != std::string::npos);
}

TEST_CASE("the index, an unpinned shard and the manifest's own pins are checked before any tensor", "[model][hf]") {
  TempDir d("ws1-hf");
  write_checkpoint(d.path);
  WeightSnapshot pins = pins_of(d.path);
  WeightSnapshot bad_index = pins;
  bad_index.index_sha256 = std::string(64, '0');
  auto w = load_hf_checkpoint(d.path, bad_index);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message().rfind((d.path / "model.safetensors.index.json").string() + ": sha256: ", 0) == 0);

  WeightSnapshot one_shard = pins;
  one_shard.shards.pop_back();
  w = load_hf_checkpoint(d.path, one_shard);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message() == (d.path / kShard2).string() +
                                   ": not one of the manifest's pinned shards (model_identity.weight_snapshot.shards)");

  WeightSnapshot wrong_size = pins;
  wrong_size.shards[0].size_bytes += 1;
  w = load_hf_checkpoint(d.path, wrong_size);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().message().rfind((d.path / kShard1).string() + ": size: ", 0) == 0);

  // The shipped manifest pins Qwen3-8B's index and five shards: this checkpoint is not it.
  w = load_hf_checkpoint(d.path, test::model_setup().manifest.model.weights);
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code == ExitCode::kBadInput);
  CHECK(w.error().message().find("model.safetensors.index.json: sha256:") != std::string::npos);
}

TEST_CASE("a missing, mis-shaped or non-bf16 tensor is refused, naming the file and the tensor", "[model][hf]") {
  struct Case {
    std::string args, file, message;
  };
  const std::vector<Case> cases = {
      {"--omit model.layers.1.mlp.up_proj.weight", "model.safetensors.index.json",
       "model.layers.1.mlp.up_proj.weight: missing from weight_map"},
      {"--reshape model.layers.0.self_attn.k_proj.weight", kShard1,
       "model.layers.0.self_attn.k_proj.weight: shape [31, 64] (expected [32, 64] from config.json)"},
      {"--f32 model.norm.weight", kShard2, "model.norm.weight: dtype F32 (expected BF16)"},
  };
  for (const Case& c : cases) {
    TempDir d("ws1-hf");
    write_checkpoint(d.path, c.args);
    auto w = load_hf_checkpoint(d.path, pins_of(d.path));  // pinned as written: hashes match
    REQUIRE_FALSE(w.ok());
    CHECK(w.error().code == ExitCode::kBadInput);
    CHECK(w.error().message() == (d.path / c.file).string() + ": " + c.message);
  }
}

TEST_CASE("config.json must describe a Qwen3 dense decoder the chain runs", "[model][hf]") {
  TempDir d("ws1-hf");
  write_checkpoint(d.path);
  std::string text = slurp(d.path / "config.json");
  text.replace(text.find("\"tie_word_embeddings\": false"), 28, "\"tie_word_embeddings\": true");
  std::ofstream(d.path / "config.json") << text;
  auto c = read_hf_config(d.path);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message() == (d.path / "config.json").string() +
                                   ": tie_word_embeddings: true (the chain needs an untied lm_head)");
}

// `bench --peers FILE` without a GPU: reading a ws1-peers-v1 file, the attention rows' variant
// names, matching rows to peers, the fwd+bwd combination, the artifact's pieces, and each bad
// file refused with one line naming the file and the field.
#include <fmt/core.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <functional>

#include "bench_peers.hpp"
#include "temp_dir.hpp"

namespace ws1cli {
namespace {

nlohmann::json row(std::string variant, std::string direction, std::string peer, double ms) {
  return {{"op", "attention"}, {"variant", std::move(variant)}, {"direction", std::move(direction)},
          {"peer", std::move(peer)}, {"median_ms", ms}, {"tflops", 100.0}, {"max_abs_err", 0.004}};
}

// A small file as peers.py writes it: two peers on the 8192 prefill, a failed one, decode.
nlohmann::json sample() {
  nlohmann::json rows = nlohmann::json::array();
  rows.push_back(row("causal S=8192", "fwd", "cudnn_sdpa", 4.0));
  rows.push_back(row("causal S=8192", "fwd", "flash_sdpa", 5.0));
  rows.push_back(row("causal S=8192", "bwd", "cudnn_sdpa", 12.0));
  rows.push_back(row("causal S=8192", "fwd+bwd", "cudnn_sdpa", 15.0));
  rows.push_back({{"op", "attention"}, {"variant", "causal S=8192"}, {"direction", "fwd+bwd"},
                  {"peer", "flash_attn"}, {"error", "not run: ModuleNotFoundError: No module named 'flash_attn'\nmore"}});
  rows.push_back(row("decode B=32 Skv=4096", "fwd", "flash_sdpa", 0.05));
  return {{"schema", "ws1-peers-v1"},
          {"environment", {{"torch", "2.9.0"}, {"cuda", "13.0"}, {"cudnn", 91300}, {"gpu", "NVIDIA H200"}}},
          {"rows", rows}};
}

std::string write(const ws1::test::TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  return path;
}

ws1::Tensors attention_inputs(std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t sq, std::int64_t skv,
                              std::int64_t d = 128) {
  // Only the shapes are read: no values needed.
  return {{"q", ws1::Tensor::uninitialized(ws1::DType::kBF16, {b, hq, sq, d})},
          {"k", ws1::Tensor::uninitialized(ws1::DType::kBF16, {b, hkv, skv, d})},
          {"v", ws1::Tensor::uninitialized(ws1::DType::kBF16, {b, hkv, skv, d})}};
}

TEST_CASE("bench peers: a ws1-peers-v1 file reads, its environment kept as written", "[bench_peers]") {
  ws1::test::TempDir dir;
  const std::string path = write(dir, "peers.json", sample().dump(1));
  auto f = read_peers_file(path);
  REQUIRE(f.ok());
  CHECK(f->path == path);
  CHECK(f->environment == sample()["environment"]);
  REQUIRE(f->rows.size() == 6);
  CHECK(f->rows[0].peer == "cudnn_sdpa");
  CHECK(f->rows[0].median_ms == 4.0);
  CHECK(f->rows[0].tflops == 100.0);
  CHECK(f->rows[4].error.rfind("not run: ModuleNotFoundError", 0) == 0);
  CHECK(f->rows[4].median_ms == 0.0);
  CHECK(peers_file_json(*f) == nlohmann::json{{"path", path}, {"environment", sample()["environment"]}});
}

TEST_CASE("bench peers: attention rows are named by their shapes, exactly as peers.py names them", "[bench_peers]") {
  std::vector<std::string> names;
  for (const AttentionPeerShape& s : kAttentionPeerShapes)
    names.push_back(attention_peer_variant(attention_inputs(s.b, kPeerHq, kPeerHkv, s.sq, s.skv)));
  CHECK(names == std::vector<std::string>{"causal S=8192", "causal S=4096", "decode B=32 Skv=4096"});
  // The bench-8k workload's default attention fixture: one sequence of 8192, Qwen3-8B's heads.
  CHECK(attention_peer_variant(attention_inputs(1, 32, 8, 8192, 8192)) == "causal S=8192");
  ws1::Tensors masked = attention_inputs(1, 32, 8, 8192, 8192);
  masked.push_back({"key_mask", ws1::Tensor::uninitialized(ws1::DType::kBool, {1, 8192})});
  CHECK(attention_peer_variant(masked).empty());
  CHECK(attention_peer_variant(attention_inputs(4, 32, 8, 19, 19)).empty());      // the 19-token primary
  CHECK(attention_peer_variant(attention_inputs(1, 32, 4, 8192, 8192)).empty());  // other kv heads
  CHECK(attention_peer_variant(attention_inputs(1, 32, 8, 8192, 8192, 64)).empty());
  CHECK(attention_peer_variant(attention_inputs(1, 32, 8, 4096, 8192)).empty());  // chunked prefill
  CHECK(attention_peer_variant(attention_inputs(1, 32, 8, 1, 8192)) == "decode B=1 Skv=8192");
  CHECK(attention_peer_variant({}).empty());
}

TEST_CASE("bench peers: a row meets the peers of its (op, variant, direction)", "[bench_peers]") {
  ws1::test::TempDir dir;
  auto f = read_peers_file(write(dir, "peers.json", sample().dump()));
  REQUIRE(f.ok());
  const auto fwd = compare_to_peers(*f, "attention", "causal S=8192", "fwd", 2.0);
  REQUIRE(fwd.size() == 2);
  CHECK(fwd[0].peer == "cudnn_sdpa");
  CHECK(fwd[0].median_ms == 4.0);
  CHECK(fwd[0].x_peer == 2.0);
  CHECK(fwd[1].peer == "flash_sdpa");
  CHECK(fwd[1].x_peer == 2.5);
  CHECK(compare_to_peers(*f, "attention", "causal S=8192", "bwd", 10.0).size() == 1);
  CHECK(compare_to_peers(*f, "attention", "causal S=4096", "fwd", 1.0).empty());
  CHECK(compare_to_peers(*f, "attention", "", "fwd", 1.0).empty());  // a default row not shown to match
  CHECK(compare_to_peers(*f, "det_gemm", "causal S=8192", "fwd", 1.0).empty());
  CHECK(compare_to_peers(*f, "attention", "decode B=32 Skv=4096", "bwd", 1.0).empty());

  CHECK(describe(fwd[0]) == "x cudnn_sdpa 2.00 (4.0000 ms)");
  CHECK(peers_json(fwd) == nlohmann::json::parse(R"([{"peer": "cudnn_sdpa", "median_ms": 4.0, "x_peer": 2.0},
                                                     {"peer": "flash_sdpa", "median_ms": 5.0, "x_peer": 2.5}])"));
  const auto failed = compare_to_peers(*f, "attention", "causal S=8192", "fwd+bwd", 20.0);
  REQUIRE(failed.size() == 2);
  CHECK(failed[1].peer == "flash_attn");
  CHECK(describe(failed[1]) == "flash_attn failed: not run: ModuleNotFoundError: No module named 'flash_attn'");
  CHECK(peers_json({&failed[1], 1})[0] ==
        nlohmann::json{{"peer", "flash_attn"}, {"error", "not run: ModuleNotFoundError: No module named 'flash_attn'\nmore"}});
}

TEST_CASE("bench peers: fwd + bwd of a variant against the peers' fwd+bwd", "[bench_peers]") {
  ws1::test::TempDir dir;
  auto f = read_peers_file(write(dir, "peers.json", sample().dump()));
  REQUIRE(f.ok());
  const std::vector<TimedRow> rows = {
      {"attention", "", "causal S=8192", "fwd", 3.0},  // the default row, shown to be S = 8192
      {"attention", "", "causal S=8192", "bwd", 9.0},
      {"attention", "causal S=8192", "causal S=8192", "fwd", 4.0},
      {"attention", "causal S=8192", "causal S=8192", "bwd", 11.0},
      {"attention", "causal S=4096", "causal S=4096", "fwd", 1.0},  // no bwd row: nothing to add
      {"attention", "decode B=32 Skv=4096", "decode B=32 Skv=4096", "fwd", 0.04},
      {"rms_norm", "", "", "fwd", 0.05},
      {"rms_norm", "", "", "bwd", 0.1},  // no peer variant: no peers
  };
  const std::vector<CombinedRow> c = combine_fwd_bwd(*f, rows);
  REQUIRE(c.size() == 2);
  CHECK(c[0].variant.empty());
  CHECK(c[0].peer_variant == "causal S=8192");
  CHECK(c[0].fwd_ms == 3.0);
  CHECK(c[0].bwd_ms == 9.0);
  REQUIRE(c[0].peers.size() == 2);
  CHECK(c[0].peers[0].peer == "cudnn_sdpa");
  CHECK(c[0].peers[0].x_peer == 15.0 / 12.0);
  CHECK(c[0].peers[1].error.size() > 0);
  CHECK(c[1].variant == "causal S=8192");
  CHECK(c[1].peers[0].x_peer == 1.0);
  const nlohmann::json j = combined_json(c[0]);
  CHECK(j["op"] == "attention");
  CHECK(j["variant"] == "default");
  CHECK(j["peer_variant"] == "causal S=8192");
  CHECK(j["direction"] == "fwd+bwd");
  CHECK(j["fwd_ms"] == 3.0);
  CHECK(j["bwd_ms"] == 9.0);
  CHECK(j["median_ms"] == 12.0);
  CHECK(j["peers"][0] == nlohmann::json{{"peer", "cudnn_sdpa"}, {"median_ms", 15.0}, {"x_peer", 1.25}});

  // A file without fwd+bwd rows: nothing combined.
  nlohmann::json only_fwd = sample();
  only_fwd["rows"] = nlohmann::json::array({row("causal S=8192", "fwd", "cudnn_sdpa", 4.0)});
  auto g = read_peers_file(write(dir, "fwd.json", only_fwd.dump()));
  REQUIRE(g.ok());
  CHECK(combine_fwd_bwd(*g, rows).empty());
}

// The one-line error for `text` (exit 2), which must name the file.
std::string refusal(const ws1::test::TempDir& dir, const std::string& text) {
  const std::string path = write(dir, "bad.json", text);
  auto f = read_peers_file(path);
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().code == ws1::ExitCode::kBadInput);
  const std::string m = f.error().message();
  CHECK(m.rfind(path + ": ", 0) == 0);
  CHECK(m.find('\n') == std::string::npos);
  return m.substr(path.size() + 2);
}

std::string refusal(const ws1::test::TempDir& dir, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = sample();
  edit(j);
  return refusal(dir, j.dump());
}

TEST_CASE("bench peers: a bad file is refused with the file and the field", "[bench_peers]") {
  ws1::test::TempDir dir;
  SECTION("unreadable") {
    const std::string path = dir.file("absent.json");
    auto f = read_peers_file(path);
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().code == ws1::ExitCode::kBadInput);
    CHECK(f.error().message() == path + ": cannot open: No such file or directory");
    auto d = read_peers_file(dir.path);
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().message() == dir.path.string() + ": not a regular file");
  }
  SECTION("not JSON") {
    CHECK(refusal(dir, "{\"schema\": ").rfind("$: not valid JSON", 0) == 0);
    CHECK(refusal(dir, "").rfind("$: not valid JSON", 0) == 0);
  }
  SECTION("schema") {
    CHECK(refusal(dir, [](auto& j) { j["schema"] = "ws1-gemm-peers-v1"; }) ==
          "schema: expected \"ws1-peers-v1\", got \"ws1-gemm-peers-v1\"");
    CHECK(refusal(dir, [](auto& j) { j.erase("schema"); }) == "schema: missing required key");
    CHECK(refusal(dir, [](auto& j) { j["schema"] = 1; }) == "schema: must be a string, got number");
    CHECK(refusal(dir, "[]") == "$: must be an object, got array");
  }
  SECTION("environment and rows") {
    CHECK(refusal(dir, [](auto& j) { j.erase("environment"); }) == "environment: missing required key");
    CHECK(refusal(dir, [](auto& j) { j["environment"] = "H200"; }) == "environment: must be an object, got string");
    CHECK(refusal(dir, [](auto& j) { j.erase("rows"); }) == "rows: missing required key");
    CHECK(refusal(dir, [](auto& j) { j["rows"] = nlohmann::json::object(); }) == "rows: must be an array, got object");
  }
  SECTION("a row missing a field") {
    for (const char* key : {"op", "variant", "direction", "peer", "median_ms", "tflops"}) {
      CAPTURE(key);
      CHECK(refusal(dir, [&](auto& j) { j["rows"][2].erase(key); }) ==
            fmt::format("rows[2].{}: missing required key", key));
    }
    CHECK(refusal(dir, [](auto& j) { j["rows"][1]["peer"] = ""; }) == "rows[1].peer: must be a non-empty string");
    CHECK(refusal(dir, [](auto& j) { j["rows"][4]["error"] = ""; }) == "rows[4].error: must be a non-empty string");
  }
  SECTION("a non-positive or non-numeric median") {
    CHECK(refusal(dir, [](auto& j) { j["rows"][0]["median_ms"] = 0; }) == "rows[0].median_ms: must be positive, got 0");
    CHECK(refusal(dir, [](auto& j) { j["rows"][5]["median_ms"] = -0.5; }) ==
          "rows[5].median_ms: must be positive, got -0.5");
    CHECK(refusal(dir, [](auto& j) { j["rows"][0]["median_ms"] = "4.0"; }) ==
          "rows[0].median_ms: must be a number, got string");
    CHECK(refusal(dir, [](auto& j) { j["rows"][0]["median_ms"] = nullptr; }) ==
          "rows[0].median_ms: must be a number, got null");
    CHECK(refusal(dir, [](auto& j) { j["rows"][0]["tflops"] = -1; }) == "rows[0].tflops: must be >= 0, got -1");
  }
  SECTION("a direction, a repeated row") {
    CHECK(refusal(dir, [](auto& j) { j["rows"][0]["direction"] = "forward"; }) ==
          "rows[0].direction: unknown direction \"forward\" (known: fwd, bwd, fwd+bwd)");
    CHECK(refusal(dir, [](auto& j) { j["rows"][1]["peer"] = "cudnn_sdpa"; }) ==
          "rows[1]: repeats the row (op attention, variant causal S=8192, direction fwd, peer cudnn_sdpa) of rows[0]");
  }
}

}  // namespace
}  // namespace ws1cli

// The C8 shape: our rows against upstream's H20 file (same keys, same order), the row rules
// (planted red, untested, N/A, pack), the JSON layout, reading and comparing.
#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "report_test_support.hpp"
#include "test_paths.hpp"
#include "ws1/report.hpp"

namespace ws1 {
namespace {

using test::accuracy_cell;
using test::catalogue_op_names;
using test::full_green_evidence;
using test::invariance_cell;

const std::filesystem::path kH20 = test::upstream_data() / "ws1-c8-execute.h20.json";

C8Matrix h20() {
  auto m = read_c8(kH20);
  REQUIRE(m.ok());
  return std::move(m).value();
}

using RowKey = std::tuple<std::string, std::string, std::string>;
std::vector<RowKey> keys(const C8Matrix& m, const std::string& profile) {
  std::vector<RowKey> out;
  for (const auto& c : m.cells)
    if (c.profile == profile) out.emplace_back(c.op_name, c.judgment, c.tier);
  return out;
}

const C8Cell& row(const C8Matrix& m, const std::string& op, const std::string& j, const std::string& tier) {
  for (const auto& c : m.cells)
    if (c.op_name == op && c.judgment == j && c.tier == tier) return c;
  FAIL("no row " << op << " " << j << " " << tier);
  throw 0;
}

std::string file_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::int64_t count(const C8Matrix& m, const std::string& status) {
  for (const auto& [k, n] : c8_counts(m))
    if (k == status) return n;
  return 0;
}

TEST_CASE("c8: the H20 file reads: 192 rows, 176 green, 16 N/A", "[c8]") {
  const C8Matrix m = h20();
  CHECK(m.cells.size() == 192);
  CHECK(count(m, "green") == 176);
  CHECK(count(m, "N/A") == 16);
  CHECK(m.workload_id == "ws1-qwen3-8b-dense-primary-v6");
}

TEST_CASE("c8: our rows have the H20 file's keys, in its order, for each profile", "[c8]") {
  const C8Matrix theirs = h20();
  for (const std::string profile : {"cuda_bf16", "cpu_bf16"}) {
    const Evidence e = full_green_evidence({profile});
    const C8Matrix ours = c8_matrix(e, std::vector{profile}, catalogue_op_names());
    CHECK(ours.cells.size() == 96);  // 12 required ops x 4 judgments x 2 tiers; linear_logp left out
    CHECK(keys(ours, profile) == keys(theirs, "cuda_bf16"));
    CHECK(keys(ours, profile) == keys(theirs, "triton_cuda_bf16"));
    CHECK(count(ours, "green") == 88);
    CHECK(count(ours, "N/A") == 8);
    // All green but pack: nothing differs from the H20 run, whichever profile it is held against.
    CHECK(compare_c8(ours, theirs).empty());
  }
}

TEST_CASE("c8: one red fixture cell turns exactly its row red and the comparison shows it", "[c8]") {
  Evidence e = full_green_evidence({"cuda_bf16"});
  e.cells.push_back(accuracy_cell("cuda_bf16", "rms_norm", Judgment::kForwardAccuracy, "primary", "outlier_channel", 3.5));
  const C8Matrix ours = c8_matrix(e, std::vector<std::string>{"cuda_bf16"}, catalogue_op_names());
  CHECK(count(ours, "red") == 1);
  const C8Cell& r = row(ours, "rms_norm", "forward_accuracy", "primary");
  CHECK(r.status == "red");
  CHECK_THAT(r.detail, Catch::Contains("1 of 3 cells red"));
  CHECK_THAT(r.detail, Catch::Contains("rms_norm/primary/outlier_channel"));
  CHECK_THAT(r.detail, Catch::Contains("[3, 17]"));  // the worst element's index
  CHECK(row(ours, "rms_norm", "forward_accuracy", "short").status == "green");

  const auto diffs = compare_c8(ours, h20());
  REQUIRE(diffs.size() == 1);  // same profile name: compared with cuda_bf16 only
  CHECK(diffs[0].theirs_profile == "cuda_bf16");
  CHECK(diffs[0].op_name == "rms_norm");
  CHECK(diffs[0].judgment == "forward_accuracy");
  CHECK(diffs[0].tier == "primary");
  CHECK(diffs[0].ours == std::optional<std::string>("red"));
  CHECK(diffs[0].theirs == std::optional<std::string>("green"));
}

TEST_CASE("c8: a profile the other file lacks is compared with each of its profiles", "[c8]") {
  Evidence e = full_green_evidence({"cpu_bf16"});
  e.cells.push_back(accuracy_cell("cpu_bf16", "silu", Judgment::kGradientAccuracy, "short", "near_zero", 1.5));
  const C8Matrix ours = c8_matrix(e, std::vector<std::string>{"cpu_bf16"}, catalogue_op_names());
  const auto diffs = compare_c8(ours, h20());
  REQUIRE(diffs.size() == 2);
  CHECK(diffs[0].theirs_profile == "cuda_bf16");
  CHECK(diffs[1].theirs_profile == "triton_cuda_bf16");
  for (const auto& d : diffs) CHECK((d.op_name == "silu" && d.tier == "short" && d.ours == "red"));
}

TEST_CASE("c8: rows only one side has are differences", "[c8]") {
  const Evidence e = full_green_evidence({"cuda_bf16"});
  const C8Matrix ours = c8_matrix(e, std::vector<std::string>{"cuda_bf16"}, std::vector<std::string>{"rms_norm"});
  CHECK(ours.cells.size() == 8);
  const auto diffs = compare_c8(ours, h20());
  CHECK(diffs.size() == 88);  // the other 11 ops' rows, theirs only
  for (const auto& d : diffs) CHECK((!d.ours && d.theirs));
  C8Matrix none;
  CHECK(compare_c8(ours, none).size() == 8);  // ours only
}

TEST_CASE("c8: a tier without fixture cells is red: required untested", "[c8]") {
  Evidence e = full_green_evidence({"cuda_bf16"});
  std::erase_if(e.cells, [](const Cell& c) {
    return c.op == "swiglu" && c.judgment == Judgment::kGradientAccuracy && c.tier == "short";
  });
  const C8Matrix m = c8_matrix(e, std::vector<std::string>{"cuda_bf16"}, catalogue_op_names());
  const C8Cell& r = row(m, "swiglu", "gradient_accuracy", "short");
  CHECK(r.status == "red");
  CHECK_THAT(r.detail, Catch::StartsWith("required untested"));
  CHECK(!r.case_id);
  CHECK(count(m, "red") == 1);
}

TEST_CASE("c8: invariance rows cover every transform and are the same for both tiers", "[c8]") {
  Evidence e = full_green_evidence({"cuda_bf16"});
  for (auto& c : e.cells)
    if (c.op == "attention" && c.judgment == Judgment::kGradientInvariance && c.transform == "B1/full")
      c = invariance_cell("cuda_bf16", "attention", c.judgment, "B1/full", Verdict::kRed);
  const C8Matrix m = c8_matrix(e, std::vector<std::string>{"cuda_bf16"}, catalogue_op_names());
  for (const char* tier : {"short", "primary"}) {
    const C8Cell& r = row(m, "attention", "gradient_invariance", tier);
    CHECK(r.status == "red");
    CHECK_THAT(r.detail, Catch::Contains("B1/full"));
    CHECK_THAT(r.detail, Catch::Contains("0x3f81"));  // the first mismatch's bits
    CHECK(r.evidence_kind == "logical_config_invariance");
    CHECK(row(m, "attention", "forward_invariance", tier).status == "green");
  }
  CHECK(count(m, "red") == 2);
  // Green rows name the transforms that were bit-identical and the N/A ones.
  CHECK_THAT(row(m, "rope", "forward_invariance", "short").detail, Catch::Contains("BN/chunked, B1/full"));
  CHECK_THAT(row(m, "rope", "forward_invariance", "short").detail, Catch::Contains("N/A: tp2"));
}

TEST_CASE("c8: only N/A cells give an N/A row with their reason; pack is N/A whatever ran", "[c8]") {
  Evidence e = full_green_evidence({"cuda_bf16"});
  std::erase_if(e.cells, [](const Cell& c) {
    return c.op == "lm_head" && c.judgment == Judgment::kForwardInvariance && c.verdict == Verdict::kGreen;
  });
  e.cells.push_back(accuracy_cell("cuda_bf16", "pack", Judgment::kForwardAccuracy, "short", "outlier_channel", 9));
  const C8Matrix m = c8_matrix(e, std::vector<std::string>{"cuda_bf16"}, catalogue_op_names());
  const C8Cell& r = row(m, "lm_head", "forward_invariance", "primary");
  CHECK(r.status == "N/A");
  CHECK(r.detail == "no K to split");
  const C8Cell& p = row(m, "pack", "forward_accuracy", "short");
  CHECK(p.status == "N/A");
  CHECK_THAT(p.detail, Catch::Contains("profile-independent layout helper"));
  CHECK_THAT(p.detail, Catch::Contains("2 green, 1 red"));
}

TEST_CASE("c8: JSON has upstream's keys in its order and reads back", "[c8]") {
  const Evidence e = full_green_evidence({"cpu_bf16"});
  const C8Matrix ours = c8_matrix(e, std::vector<std::string>{"cpu_bf16"}, catalogue_op_names());
  const std::string text = c8_json(ours);
  const auto j = nlohmann::ordered_json::parse(text);
  const auto u = nlohmann::ordered_json::parse(file_text(kH20));
  const auto key_list = [](const nlohmann::ordered_json& o) {
    std::vector<std::string> k;
    for (const auto& it : o.items()) k.push_back(it.key());
    return k;
  };
  CHECK(key_list(j) == key_list(u));
  CHECK(key_list(j["git"]) == key_list(u["git"]));
  CHECK(key_list(j["environment"]) == key_list(u["environment"]));
  CHECK(key_list(j["workload"]) == key_list(u["workload"]));
  CHECK(key_list(j["cells"][0]) == key_list(u["cells"][0]));
  CHECK(j["counts"] == nlohmann::ordered_json({{"green", 88}, {"N/A", 8}}));
  CHECK(j["environment"]["pytorch"].is_null());

  test::TempDir dir;
  const auto path = dir.path() / "c8.json";
  REQUIRE(write_file_atomic(path, text).ok());
  auto back = read_c8(path);
  REQUIRE(back.ok());
  REQUIRE(back->cells.size() == ours.cells.size());
  for (std::size_t i = 0; i < ours.cells.size(); ++i) {
    CHECK(back->cells[i].status == ours.cells[i].status);
    CHECK(back->cells[i].detail == ours.cells[i].detail);
    CHECK(back->cells[i].case_id == ours.cells[i].case_id);
  }
  CHECK(compare_c8(*back, ours).empty());
}

TEST_CASE("c8: read_c8 refuses what is not a C8 file, naming the file and path", "[c8]") {
  test::TempDir dir;
  const auto write = [&](const std::string& name, const std::string& text) {
    const auto p = dir.path() / name;
    REQUIRE(write_file_atomic(p, text).ok());
    return p;
  };
  const std::string cell = R"({"profile":"p","op_name":"silu","judgment":"forward_accuracy","tier":"short","status":"green"})";
  auto good = read_c8(write("good.json", R"({"schema_version":"ws1-c8-execute-v2","cells":[)" + cell + "]}"));
  CHECK(good.ok());

  auto version = read_c8(write("v.json", R"({"schema_version":"ws1-c8-execute-v1","cells":[]})"));
  REQUIRE(!version.ok());
  CHECK_THAT(version.error().message(), Catch::Contains("v.json") && Catch::Contains("schema_version"));

  auto dup = read_c8(write("dup.json", R"({"schema_version":"ws1-c8-execute-v2","cells":[)" + cell + "," + cell + "]}"));
  REQUIRE(!dup.ok());
  CHECK_THAT(dup.error().message(), Catch::Contains("cells[1]") && Catch::Contains("repeats"));

  auto missing = read_c8(write("m.json", R"({"schema_version":"ws1-c8-execute-v2","cells":[{"profile":"p"}]})"));
  REQUIRE(!missing.ok());
  CHECK_THAT(missing.error().message(), Catch::Contains("cells[0]") && Catch::Contains("op_name"));

  auto junk = read_c8(write("junk.json", "{\"schema_version\": "));
  CHECK(!junk.ok());
  CHECK(!read_c8(dir.path() / "absent.json").ok());
}

}  // namespace
}  // namespace ws1

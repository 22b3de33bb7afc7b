// diff_contract_files: our contract against edited copies of itself. Edited values are derived
// from the file (no tolerance literals), and the expected text of a value is nlohmann's
// spelling of it, an independent shortest round-trip writer.
#include <catch2/catch.hpp>

#include "contract_test_support.hpp"
#include "ws1/contract_diff.hpp"

namespace {

using ws1::test::ojson;
using Ptr = ojson::json_pointer;

const ojson& pristine() {
  static const ojson doc = ws1::test::read_json(ws1::test::our_contract());
  return doc;
}

std::vector<ws1::ContractRowDiff> diff_ok(const std::filesystem::path& base,
                                          const std::filesystem::path& other) {
  auto rows = ws1::diff_contract_files(base, other);
  INFO((rows.ok() ? std::string("ok") : rows.error().message()));
  REQUIRE(rows.ok());
  return std::move(rows).value();
}

const std::string kBf16Kl =
    "/chain_logprob_aggregates/metrics/approx_kl0/by_execution_dtype/bfloat16/threshold";
const std::string kFp32Kl =
    "/chain_logprob_aggregates/metrics/approx_kl0/by_execution_dtype/float32/threshold";

}  // namespace

TEST_CASE("a contract against itself or a byte copy has no differences", "[contract][diff]") {
  const auto ours = ws1::test::our_contract();
  CHECK(diff_ok(ours, ours).empty());
  const auto copy = ws1::test::write_scratch("diff_copy", ws1::test::read_text(ours));
  CHECK(diff_ok(ours, copy).empty());
  // Re-serialized (other layout, same values): still no row.
  CHECK(diff_ok(ours, ws1::test::write_scratch("diff_reserialized", pristine().dump(4))).empty());
}

TEST_CASE("one changed threshold is exactly one row with both values", "[contract][diff]") {
  ojson doc = pristine();
  const double was = doc[Ptr(kBf16Kl)].get<double>();
  doc[Ptr(kBf16Kl)] = was / 2;
  const auto p = ws1::test::write_scratch("diff_one_threshold", doc.dump(2));
  const auto rows = diff_ok(ws1::test::our_contract(), p);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].path ==
        "chain_logprob_aggregates.metrics.approx_kl0.by_execution_dtype.bfloat16.threshold");
  CHECK(rows[0].base == ojson(was).dump());
  CHECK(rows[0].other == ojson(was / 2).dump());
  // And the other way round.
  const auto back = diff_ok(p, ws1::test::our_contract());
  REQUIRE(back.size() == 1);
  CHECK(back[0].base == rows[0].other);
  CHECK(back[0].other == rows[0].base);
}

TEST_CASE("small numbers stay readable; arrays are one leaf; rows sorted", "[contract][diff]") {
  ojson doc = pristine();
  const double fp32 = doc[Ptr(kFp32Kl)].get<double>();
  doc[Ptr(kFp32Kl)] = fp32 * 2;
  ojson& clip = doc["chain_logprob_aggregates"]["default_clip_interval"];
  const std::string clip_was = clip.dump();
  // The interval widened at both ends: one row for the whole array.
  clip[0] = clip[0].get<double>() / 2;
  clip[1] = clip[1].get<double>() * 2;
  const auto p = ws1::test::write_scratch("diff_small_and_array", doc.dump(2));
  const auto ok = diff_ok(ws1::test::our_contract(), p);
  REQUIRE(ok.size() == 2);
  CHECK(ok[0].path == "chain_logprob_aggregates.default_clip_interval");
  CHECK(ok[0].base == clip_was);
  CHECK(ok[0].other == clip.dump());
  CHECK(ok[1].path ==
        "chain_logprob_aggregates.metrics.approx_kl0.by_execution_dtype.float32.threshold");
  CHECK(ok[1].base == ojson(fp32).dump());
  CHECK(ok[1].other == ojson(fp32 * 2).dump());
  CHECK(ok[1].base->find('e') != std::string::npos);  // 1e-05, not 0.000010000000000000001
}

TEST_CASE("a key added where the format allows one is a row absent from the base",
          "[contract][diff]") {
  ojson doc = pristine();
  // The top level is open to new upstream blocks.
  doc["review_notes"] = {{"reviewer", "someone"}, {"rounds", 2}, {"empty", ojson::object()}};
  const auto p = ws1::test::write_scratch("diff_added_block", doc.dump(2));
  const auto rows = diff_ok(ws1::test::our_contract(), p);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].path == "review_notes.empty");
  CHECK(rows[1].path == "review_notes.reviewer");
  CHECK(rows[2].path == "review_notes.rounds");
  for (const auto& r : rows) CHECK_FALSE(r.base);
  CHECK(rows[0].other == "{}");
  CHECK(rows[1].other == "\"someone\"");
  CHECK(rows[2].other == "2");
  // Removed again: the same rows, absent from the other side.
  const auto back = diff_ok(p, ws1::test::our_contract());
  REQUIRE(back.size() == 3);
  for (const auto& r : back) CHECK_FALSE(r.other);
}

TEST_CASE("an invalid contract on either side is the loader's error, naming the file",
          "[contract][diff]") {
  ojson doc = pristine();
  doc["version"] = "ws1-c9-v1";
  const auto bad = ws1::test::write_scratch("diff_bad_version", doc.dump(2));
  const auto ours = ws1::test::our_contract();
  for (const auto& [base, other] : {std::pair{ours, bad}, std::pair{bad, ours}}) {
    auto rows = ws1::diff_contract_files(base, other);
    REQUIRE_FALSE(rows.ok());
    CHECK(rows.error().file == bad.string());
    CHECK(rows.error().where == "version");
    CHECK(rows.error().message().rfind(bad.string() + ": version: unknown contract version", 0) == 0);
  }
  auto missing = ws1::diff_contract_files(ours, ws1::test::scratch_dir() / "no_such.json");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().file == (ws1::test::scratch_dir() / "no_such.json").string());
}

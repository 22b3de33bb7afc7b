// contracts/contract.schema.json and the loader describe the same format: the schema's required
// keys and closed vocabularies equal the loader's. (Validation of the contract files against
// the schema runs in validate_schema.py where python3-jsonschema is installed.)
#include <catch2/catch.hpp>

#include "contract_test_support.hpp"
#include "ws1/contract.hpp"

namespace {

using ws1::test::ojson;

template <class E>
std::vector<std::string> names(std::span<const E> values) {
  std::vector<std::string> out;
  for (auto v : values) out.emplace_back(ws1::contract_name(v));
  return out;
}

std::vector<std::string> strings(const ojson& array) {
  return array.get<std::vector<std::string>>();
}

}  // namespace

TEST_CASE("contract schema parses and matches the loader's vocabulary", "[contract][schema]") {
  const ojson schema = ws1::test::read_json(ws1::test::contract_schema());
  CHECK(schema["$schema"] == "https://json-schema.org/draft/2020-12/schema");

  std::vector<std::string> required;
  for (auto k : ws1::contract_required_top_level_keys()) required.emplace_back(k);
  CHECK(strings(schema["required"]) == required);
  std::vector<std::string> versions;
  for (auto v : ws1::contract_known_versions()) versions.emplace_back(v);
  CHECK(strings(schema["properties"]["version"]["enum"]) == versions);

  const ojson& defs = schema["$defs"];
  CHECK(strings(defs["judgment_name"]["enum"]) == names(ws1::all_judgments()));
  CHECK(strings(schema["properties"]["judgments"]["required"]) == names(ws1::all_judgments()));
  CHECK(strings(defs["op_class"]["enum"]) == names(ws1::all_op_classes()));
  CHECK(strings(defs["dtype"]["enum"]) == names(ws1::all_contract_dtypes()));
  CHECK(strings(defs["chain_metric"]["enum"]) == names(ws1::all_chain_metrics()));

  std::vector<std::string> statuses, modes;
  for (auto s :
       {ws1::RowStatus::kApplicable, ws1::RowStatus::kOptional, ws1::RowStatus::kOutOfScope})
    statuses.emplace_back(ws1::contract_name(s));
  for (auto m : {ws1::CompareMode::kTolerance, ws1::CompareMode::kBitwise})
    modes.emplace_back(ws1::contract_name(m));
  CHECK(strings(defs["status"]["enum"]) == statuses);
  CHECK(strings(defs["mode"]["enum"]) == modes);

  std::vector<std::string> ops;
  for (const auto& e : ws1::spec_op_classes()) ops.emplace_back(e.op);
  CHECK(strings(defs["op"]["enum"]) == ops);

  // The declarations block: key, format, and its closed vocabularies.
  CHECK(schema["properties"].contains(std::string(ws1::kDeclarationsKey)));
  const ojson& decl = defs["declarations"]["properties"];
  CHECK(decl["format"]["const"] == std::string(ws1::kDeclarationsFormat));
  CHECK(strings(decl["rms_norm_rounding"]["properties"]["order"]["enum"]) ==
        std::vector<std::string>{std::string(ws1::contract_name(ws1::RmsNormOrder::kKernel)),
                                 std::string(ws1::contract_name(ws1::RmsNormOrder::kHf))});
  CHECK(strings(decl["invariance"]["properties"]["nan_policy"]["enum"]) ==
        std::vector<std::string>{std::string(ws1::contract_name(ws1::NanPolicy::kFail)),
                                 std::string(ws1::contract_name(ws1::NanPolicy::kCompareBits))});
  CHECK(strings(decl["tf32"]["properties"]["cublas_math_mode"]["enum"]) ==
        std::vector<std::string>{
            std::string(ws1::contract_name(ws1::CublasMathMode::kPedantic)),
            std::string(ws1::contract_name(ws1::CublasMathMode::kDefaultTf32Off))});
}

// contracts/evidence.schema.json against what the writer emits. Python's jsonschema need not be
// installed, so a small walker checks the subset of draft 2020-12 the schema uses:
// $ref (local), type, const, enum, oneOf, allOf, if/then/else, required, properties,
// additionalProperties: false, items, minimum, minLength, pattern. It is shown to fail on planted
// defects. (test/evidence/validate_committed.py checks the kept artifacts with jsonschema.)
#include <regex>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "evidence_test_support.hpp"
#include "test_paths.hpp"

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

class SchemaWalker {
 public:
  explicit SchemaWalker(element root) : root_(root) {}

  std::vector<std::string> check(element instance) {
    std::vector<std::string> errors;
    walk(root_, instance, "$", errors);
    return errors;
  }

 private:
  element resolve(std::string_view ref) {
    REQUIRE(ref.substr(0, 8) == "#/$defs/");
    element target;
    REQUIRE(root_["$defs"][ref.substr(8)].get(target) == simdjson::SUCCESS);
    return target;
  }

  static bool has_type(element v, std::string_view t) {
    switch (v.type()) {
      case element_type::NULL_VALUE: return t == "null";
      case element_type::BOOL: return t == "boolean";
      case element_type::STRING: return t == "string";
      case element_type::ARRAY: return t == "array";
      case element_type::OBJECT: return t == "object";
      case element_type::INT64:
      case element_type::UINT64: return t == "integer" || t == "number";
      case element_type::DOUBLE: return t == "number";
    }
    return false;
  }

  void walk(element s, element v, const std::string& path, std::vector<std::string>& errors) {
    object so;
    REQUIRE(s.get_object().get(so) == simdjson::SUCCESS);
    for (auto [key, sub] : so) {
      if (key == "$ref") {
        walk(resolve(std::string_view(sub)), v, path, errors);
      } else if (key == "type") {
        bool ok = false;
        if (sub.is_string()) ok = has_type(v, std::string_view(sub));
        else
          for (element t : sub.get_array()) ok = ok || has_type(v, std::string_view(t));
        if (!ok) errors.push_back(path + ": wrong type");
      } else if (key == "const") {
        if (!v.is_string() || std::string_view(v) != std::string_view(sub))
          errors.push_back(path + ": not the constant " + std::string(std::string_view(sub)));
      } else if (key == "enum") {
        bool ok = false;
        for (element option : sub.get_array())
          ok = ok || (v.is_string() && std::string_view(v) == std::string_view(option));
        if (!ok) errors.push_back(path + ": not in the enum");
      } else if (key == "allOf") {
        for (element branch : sub.get_array()) walk(branch, v, path, errors);
      } else if (key == "if") {
        // The version conditionals (D23): `then` applies where `if` holds, `else` elsewhere.
        std::vector<std::string> if_errors;
        walk(sub, v, path, if_errors);
        element branch;
        if (s[if_errors.empty() ? "then" : "else"].get(branch) == simdjson::SUCCESS)
          walk(branch, v, path, errors);
      } else if (key == "oneOf") {
        int matches = 0;
        for (element branch : sub.get_array()) {
          std::vector<std::string> branch_errors;
          walk(branch, v, path, branch_errors);
          matches += branch_errors.empty();
        }
        if (matches != 1) errors.push_back(path + ": matches " + std::to_string(matches) + " oneOf branches");
      } else if (key == "required" && v.is_object()) {
        for (element name : sub.get_array()) {
          element ignored;
          if (v[std::string_view(name)].get(ignored) != simdjson::SUCCESS)
            errors.push_back(path + ": missing required " + std::string(std::string_view(name)));
        }
      } else if (key == "properties" && v.is_object()) {
        for (auto [name, value] : v.get_object()) {
          element ps;
          if (sub[name].get(ps) == simdjson::SUCCESS) walk(ps, value, path + "." + std::string(name), errors);
        }
      } else if (key == "additionalProperties" && v.is_object()) {
        REQUIRE(sub.is_bool());
        REQUIRE_FALSE(bool(sub));
        element props = s["properties"];
        for (auto field : v.get_object()) {
          element ignored;
          if (props[field.key].get(ignored) != simdjson::SUCCESS)
            errors.push_back(path + ": undeclared key " + std::string(field.key));
        }
      } else if (key == "items" && v.is_array()) {
        std::size_t i = 0;
        for (element item : v.get_array()) walk(sub, item, path + "[" + std::to_string(i++) + "]", errors);
      } else if (key == "minimum" && (v.is_int64() || v.is_uint64())) {
        if (v.is_int64() && int64_t(v) < int64_t(sub)) errors.push_back(path + ": below minimum");
      } else if (key == "minLength" && v.is_string()) {
        if (std::string_view(v).size() < uint64_t(sub)) errors.push_back(path + ": too short");
      } else if (key == "pattern" && v.is_string()) {
        if (!std::regex_search(std::string(std::string_view(v)), std::regex(std::string(std::string_view(sub)))))
          errors.push_back(path + ": does not match " + std::string(std::string_view(sub)));
      }
    }
  }

  element root_;
};

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + "\n";
  return out;
}

// Keys that a later format version added: required by the top-level allOf for that version on,
// not by their object's own `required` (older artifacts lack them). The planted defects below
// show the conditional requires them of what this build writes.
const std::set<std::pair<std::string, std::string>> kVersionedKeys = {
    {"#/$defs/cell", "reference"}, {"#/$defs/accuracy_tensor", "statistics_engine"}, {"#/$defs/cell", "timing"},
    {"#/$defs/accuracy_tensor", "floor_violations"}, {"#/$defs/accuracy_tensor", "reference_max_abs"},
    {"#/$defs/accuracy_tensor", "zeros_pass"},       {"#/$defs/accuracy_tensor", "bias_ulp"},
    {"#/properties/summary", "vacuous"}};

// Keys written only where they apply to the run, never as null: a tensor's `rule` exists only
// under a contract with judgment_rules (ws1-c1-v3), so that v2 artifacts keep their keys.
const std::set<std::pair<std::string, std::string>> kConditionalKeys = {{"#/$defs/accuracy_tensor", "rule"},
                                                                      {"#/$defs/accuracy_tensor", "relative"},
                                                                      {"#/$defs/accuracy_tensor", "bias"}};

// Every object schema with properties requires all of them: the writer always emits every
// key (absent values are explicit nulls), so optional keys would hide a writer bug.
void check_required_equals_properties(element s, const std::string& path) {
  if (s.is_array()) {
    for (element x : s.get_array()) check_required_equals_properties(x, path);
    return;
  }
  if (!s.is_object()) return;
  element props, required;
  if (s["properties"].get(props) == simdjson::SUCCESS) {
    std::set<std::string> declared, req;
    for (auto f : props.get_object()) declared.emplace(f.key);
    REQUIRE(s["required"].get(required) == simdjson::SUCCESS);
    for (element r : required.get_array()) req.emplace(std::string_view(r));
    for (const auto& [at, key] : kVersionedKeys)
      if (at == path) req.emplace(key);
    for (const auto& [at, key] : kConditionalKeys)
      if (at == path) declared.erase(key);
    INFO(path);
    CHECK(declared == req);
    element ap;
    CHECK(s["additionalProperties"].get(ap) == simdjson::SUCCESS);
  }
  for (auto [key, sub] : s.get_object()) {
    // The version conditionals are partial schemas over the shapes checked here.
    if (key == "allOf" && path == "#") continue;
    check_required_equals_properties(sub, path + "/" + std::string(key));
  }
}


}  // namespace

TEST_CASE("schema: parses, is draft 2020-12, and requires every declared key", "[evidence]") {
  simdjson::dom::parser parser;
  element schema;
  const auto path = ws1::test::source_root() / "contracts" / "evidence.schema.json";
  REQUIRE(parser.load(path.string()).get(schema) == simdjson::SUCCESS);
  CHECK(std::string_view(schema["$schema"]) == "https://json-schema.org/draft/2020-12/schema");
  // Every version stays valid (old artifacts); the newest is the one this build writes.
  std::vector<std::string_view> versions;
  for (element v : schema["properties"]["schema_version"]["enum"].get_array())
    versions.push_back(std::string_view(v));
  CHECK(versions == std::vector<std::string_view>{"ws1check-evidence-v1", "ws1check-evidence-v2",
                                                   "ws1check-evidence-v3", "ws1check-evidence-v4",
                                                   "ws1check-evidence-v5", "ws1check-evidence-v6"});
  CHECK(versions.back() == ws1::kEvidenceSchemaVersion);
  check_required_equals_properties(schema, "#");
}

TEST_CASE("schema: the written artifact conforms", "[evidence]") {
  simdjson::dom::parser sp, dp;
  element schema, doc;
  REQUIRE(sp.load((ws1::test::source_root() / "contracts" / "evidence.schema.json").string())
              .get(schema) == simdjson::SUCCESS);
  SchemaWalker walker(schema);

  ws1::Evidence e = ws1::test::sample_evidence();
  SECTION("with a GPU") {}
  SECTION("without a GPU, outside a checkout") {
    e.environment = ws1::read_environment();
    e.checkout.reset();
    e.tool.source_dirty.reset();
  }
  SECTION("with non-finite values") {
    ws1::AccuracyTensor& t = e.cells[2].accuracy.emplace_back();
    t.name = "nonfinite";
    t.shape = {0};
    t.abs_error = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity(), -0.0};
    e.cells[2].metrics.push_back({"nan_metric", std::numeric_limits<double>::quiet_NaN(), 1.0, "x"});
  }
  SECTION("with a tensor judged by a v3 rule") {
    e.cells[0].accuracy.front().rule = ws1::AppliedRule{"judgment_rules.gradient_scale_free", 0.11328125, 0.02};
    e.cells[0].accuracy.front().relative = ws1::RelativeCheck{0.015625, 2, 0.0078125, 0.0390625, true};
    ws1::BiasCheck b;
    b.counts = {512, 3, 5, 4, 4, 250, 262};
    b.drift = -2.0 / 512;
    b.max_mean = 0.1;
    b.z = 6;
    b.drift_bound = b.growth_bound = 0.1;
    b.passed = true;
    e.cells[0].accuracy.front().bias = b;
  }
  auto text = ws1::evidence_json(e);
  INFO((text.ok() ? std::string() : text.error().message()));
  REQUIRE(text.ok());
  REQUIRE(dp.parse(*text).get(doc) == simdjson::SUCCESS);
  const auto errors = walker.check(doc);
  INFO(join(errors));
  CHECK(errors.empty());
}

TEST_CASE("schema: the walker catches planted defects", "[evidence]") {
  simdjson::dom::parser sp;
  element schema;
  REQUIRE(sp.load((ws1::test::source_root() / "contracts" / "evidence.schema.json").string())
              .get(schema) == simdjson::SUCCESS);
  SchemaWalker walker(schema);
  auto text = ws1::evidence_json(ws1::test::sample_evidence());
  REQUIRE(text.ok());
  const auto good = nlohmann::ordered_json::parse(*text);

  struct Plant {
    const char* what;
    void (*edit)(nlohmann::ordered_json&);
    const char* expect;
  };
  const Plant plants[] = {
      {"missing summary", [](nlohmann::ordered_json& j) { j.erase("summary"); }, "missing required summary"},
      {"extra key", [](nlohmann::ordered_json& j) { j["extra"] = 1; }, "undeclared key extra"},
      {"null float", [](nlohmann::ordered_json& j) { j["cells"][0]["tensors"][0]["abs_error"]["max"] = nullptr; },
       "$.cells[0].tensors[0]: matches 0 oneOf"},
      {"bad verdict", [](nlohmann::ordered_json& j) { j["cells"][1]["verdict"] = "amber"; }, "$.cells[1].verdict: not in the enum"},
      {"missing worst", [](nlohmann::ordered_json& j) { j["cells"][0]["tensors"][0].erase("worst"); },
       "$.cells[0].tensors[0]: matches 0 oneOf"},
      {"worst without violates", [](nlohmann::ordered_json& j) { j["cells"][0]["tensors"][0]["worst"].erase("violates"); },
       "$.cells[0].tensors[0]: matches 0 oneOf"},
      {"string count", [](nlohmann::ordered_json& j) { j["summary"]["red"] = "1"; }, "$.summary.red: wrong type"},
      {"bad commit", [](nlohmann::ordered_json& j) { j["checkout"]["commit"] = "HEAD"; }, "$.checkout: matches 0 oneOf"},
      {"bad bits", [](nlohmann::ordered_json& j) { j["cells"][1]["tensors"][0]["first_mismatches"][0]["lhs_bits"] = "0000"; },
       "$.cells[1].tensors[0]: matches 0 oneOf"},
      // The version conditionals (D23): what v2 to v6 added is required of a v6 document.
      {"v6 without zeros_pass", [](nlohmann::ordered_json& j) { j["cells"][0]["tensors"][0].erase("zeros_pass"); },
       "$.cells[0].tensors[0]: missing required zeros_pass"},
      {"v6 without bias_ulp", [](nlohmann::ordered_json& j) { j["cells"][0]["tensors"][0].erase("bias_ulp"); },
       "$.cells[0].tensors[0]: missing required bias_ulp"},
      {"v6 without the vacuous count", [](nlohmann::ordered_json& j) { j["summary"].erase("vacuous"); },
       "$.summary: missing required vacuous"},
      {"v5 without floor_violations", [](nlohmann::ordered_json& j) { j["cells"][0]["tensors"][0].erase("floor_violations"); },
       "$.cells[0].tensors[0]: missing required floor_violations"},
      {"v4 without timing", [](nlohmann::ordered_json& j) { j["cells"][1].erase("timing"); },
       "$.cells[1]: missing required timing"},
      {"v3 without statistics_engine", [](nlohmann::ordered_json& j) { j["cells"][0]["tensors"][0].erase("statistics_engine"); },
       "$.cells[0].tensors[0]: missing required statistics_engine"},
      {"v3 without a cell reference", [](nlohmann::ordered_json& j) { j["cells"][1].erase("reference"); },
       "$.cells[1]: missing required reference"},
      {"v2 without a cell reference", [](nlohmann::ordered_json& j) {
         j["schema_version"] = "ws1check-evidence-v2";
         j["cells"][1].erase("reference");
       }, "$.cells[1]: missing required reference"},
      {"unknown version", [](nlohmann::ordered_json& j) { j["schema_version"] = "ws1check-evidence-v7"; },
       "$.schema_version: not in the enum"},
  };
  simdjson::dom::parser dp;
  {
    element doc;
    REQUIRE(dp.parse(good.dump()).get(doc) == simdjson::SUCCESS);
    CHECK(walker.check(doc).empty());
  }
  for (const Plant& p : plants) {
    nlohmann::ordered_json bad = good;
    p.edit(bad);
    element doc;
    const std::string s = bad.dump();
    REQUIRE(dp.parse(s).get(doc) == simdjson::SUCCESS);
    const auto errors = walker.check(doc);
    INFO(p.what << "\n" << join(errors));
    CHECK(join(errors).find(p.expect) != std::string::npos);
  }
  // An older artifact without the later fields is valid for the version it claims.
  for (const char* version : {"ws1check-evidence-v1", "ws1check-evidence-v2"}) {
    nlohmann::ordered_json old = good;
    old["schema_version"] = version;
    for (auto& cell : old["cells"]) {
      if (std::string_view(version) == "ws1check-evidence-v1") cell.erase("reference");
      for (auto& t : cell["tensors"]) t.erase("statistics_engine");
    }
    element doc;
    const std::string s = old.dump();
    REQUIRE(dp.parse(s).get(doc) == simdjson::SUCCESS);
    const auto errors = walker.check(doc);
    INFO(version << "\n" << join(errors));
    CHECK(errors.empty());
  }
}

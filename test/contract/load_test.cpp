// The three contract files load unchanged, and every value the loader reports equals the value
// an independent JSON reader (nlohmann) finds in the file. No tolerance is written here.
#include <catch2/catch.hpp>
#include <algorithm>
#include <regex>

#include "contract_test_support.hpp"
#include "ws1/contract.hpp"
#include "ws1/hash.hpp"

namespace {

using ws1::Contract;
using ws1::test::ojson;

std::string str(const ojson& j) { return j.get<std::string>(); }

ws1::Contract load_ok(const std::filesystem::path& p) {
  auto c = ws1::load_contract(p);
  INFO((c.ok() ? std::string("ok") : c.error().message()));
  REQUIRE(c.ok());
  return std::move(c).value();
}

// Every row of every judgment table, arch overrides included, against the file.
void check_judgments(const Contract& c, const ojson& doc) {
  REQUIRE(c.judgments.size() == doc["judgments"].size());
  for (const auto& [jname, jt] : doc["judgments"].items()) {
    const auto j = ws1::judgment_from_name(jname);
    REQUIRE(j);
    const auto& table = c.judgments.at(*j);
    CHECK(ws1::contract_name(table.default_mode) == str(jt["default_mode"]));
    if (jt.contains("calibration_note"))
      CHECK(table.calibration_note == str(jt["calibration_note"]));
    if (jt.contains("scope")) CHECK(table.scope == str(jt["scope"]));

    auto check_rows = [&](const ojson& rows, const ws1::ClassRows& model, const std::string& arch) {
      std::size_t file_rows = 0, model_rows = 0;
      for (const auto& [cls, by_dtype] : model) model_rows += by_dtype.size();
      for (const auto& [cname, crows] : rows.items()) {
        const auto cls = ws1::op_class_from_name(cname);
        REQUIRE(cls);
        for (const auto& [dname, row] : crows.items()) {
          ++file_rows;
          const auto t = ws1::contract_dtype_from_name(dname);
          REQUIRE(t);
          INFO(jname << " " << arch << " " << cname << "." << dname);
          const auto th = c.threshold(*j, *cls, *t, arch);
          REQUIRE(th.ok());
          const std::string where = arch.empty() ? "by_op_class" : "arch_overrides." + arch;
          CHECK(th->source == "judgments." + jname + "." + where + "." + cname + "." + dname);
          CHECK(ws1::contract_name(th->status) == str(row["status"]));
          if (row.contains("mode")) {
            REQUIRE(th->tolerance);
            CHECK(ws1::contract_name(th->tolerance->mode) == str(row["mode"]));
            CHECK(th->tolerance->atol == row["atol"].get<double>());
            CHECK(th->tolerance->rtol == row["rtol"].get<double>());
          } else {
            CHECK_FALSE(th->tolerance);
          }
        }
      }
      CHECK(model_rows == file_rows);
    };
    check_rows(jt["by_op_class"], table.by_op_class, "");
    const ojson overrides = jt.value("arch_overrides", ojson::object());
    REQUIRE(table.arch_overrides.size() == overrides.size());
    for (const auto& [arch, rows] : overrides.items())
      check_rows(rows, table.arch_overrides.at(arch), arch);
  }
}

void check_policy_and_roles(const Contract& c, const ojson& doc) {
  const ojson& p = doc["policy"];
  CHECK(ws1::contract_name(c.policy.execution_dtype) == str(p["execution_dtype"]));
  CHECK(ws1::contract_name(c.policy.accumulation_dtype) == str(p["accumulation_dtype"]));
  CHECK(ws1::contract_name(c.policy.reference_dtype) == str(p["reference_dtype"]));
  CHECK(c.policy.output_dtype_default_spelling == str(p["output_dtype"]["default"]));
  CHECK(ws1::contract_name(c.policy.logprob_aggregates_dtype) ==
        str(p["output_dtype"]["logprob_aggregates"]));
  CHECK(c.policy.tf32_reference == str(p["tf32"]["reference"]));
  CHECK(c.policy.tf32_candidate_execution == str(p["tf32"]["candidate_execution"]));
  CHECK(c.policy.tf32_policy == str(p["tf32"]["policy"]));
  REQUIRE(c.policy.fp8_status);
  CHECK(ws1::contract_name(*c.policy.fp8_status) == str(p["fp8"]));
  REQUIRE(c.policy.fp16_status);
  CHECK(ws1::contract_name(*c.policy.fp16_status) == str(p["fp16"]["status"]));
  REQUIRE(c.policy.backend_profiles.size() == p["backend_profiles"].size());
  for (std::size_t i = 0; i < c.policy.backend_profiles.size(); ++i) {
    const std::string name = str(p["backend_profiles"][i]);
    CHECK(c.policy.backend_profiles[i].name == name);
    CHECK(c.policy.backend_profiles[i].backend_family ==
          str(p["backend_profile_contracts"][name]["backend_family"]));
  }
  CHECK(c.policy.backend_private_tolerance_relaxation ==
        p["backend_private_tolerance_relaxation"].get<bool>());

  const ojson& r = doc["comparison_roles"];
  CHECK(c.roles.allowed == r["allowed"].get<std::vector<std::string>>());
  CHECK(c.roles.forbidden == r["forbidden"].get<std::vector<std::string>>());
  REQUIRE(c.roles.by_report_kind.size() == r["by_report_kind"].size());
  for (const auto& [kind, pair] : r["by_report_kind"].items()) {
    const ws1::RolePair got = kind == "train_infer_logprob_parity"
                                  ? c.parity_roles()
                                  : c.roles_for(*ws1::judgment_from_name(kind));
    CHECK(got.lhs == str(pair["comparison_lhs_role"]));
    CHECK(got.rhs == str(pair["comparison_rhs_role"]));
  }
}

void check_chain(const Contract& c, const ojson& doc) {
  const ojson& ch = doc["chain_logprob_aggregates"];
  CHECK(ws1::contract_name(c.chain.compute_dtype) == str(ch["compute_dtype"]));
  CHECK(c.chain.require_all == ch["require_all"].get<bool>());
  CHECK(c.chain.nan_inf_policy == str(ch["nan_inf_policy"]));
  CHECK(c.chain.empty_active_token_set == str(ch["empty_active_token_set"]));
  CHECK(c.chain.dlogp_definition == str(ch["dlogp_definition"]));
  CHECK(c.chain.active_token_policy == str(ch["active_token_policy"]));
  CHECK(c.clip_interval().first == ch["default_clip_interval"][0].get<double>());
  CHECK(c.clip_interval().second == ch["default_clip_interval"][1].get<double>());
  std::vector<std::string> gated;
  for (auto m : c.chain.gated_metrics) gated.emplace_back(ws1::contract_name(m));
  CHECK(gated == ch["sole_chain_level_logprob_metrics"].get<std::vector<std::string>>());
  REQUIRE(c.chain.metrics.size() == ch["metrics"].size());
  for (const auto& [mname, metric] : ch["metrics"].items()) {
    const auto m = ws1::chain_metric_from_name(mname);
    REQUIRE(m);
    CHECK(c.chain.metrics.at(*m).formula == str(metric["formula"]));
    for (const auto& [dname, entry] : metric["by_execution_dtype"].items()) {
      INFO(mname << " " << dname);
      const auto th = c.chain_threshold(*m, *ws1::contract_dtype_from_name(dname));
      REQUIRE(th.ok());
      CHECK(*th == entry["threshold"].get<double>());
    }
  }
  // ws1-c1-v2 has no mean_abs_dlogp (spec §8.3 proposes it for v3).
  const auto missing =
      c.chain_threshold(ws1::ChainMetric::kMeanAbsDlogp, ws1::ContractDType::kBFloat16);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().file == c.file);
  CHECK(missing.error().where == "chain_logprob_aggregates.metrics.mean_abs_dlogp");
}

void check_legacy(const Contract& c, const ojson& doc) {
  REQUIRE(c.legacy.accuracy_default);
  std::size_t n = 0;
  for (const auto& [cname, rows] : doc["accuracy"]["default"].items()) {
    for (const auto& [dname, row] : rows.items()) {
      ++n;
      const auto& got = c.legacy.accuracy_default->at(*ws1::op_class_from_name(cname))
                            .at(*ws1::contract_dtype_from_name(dname));
      CHECK(got.atol == row["atol"].get<double>());
      CHECK(got.rtol == row["rtol"].get<double>());
    }
  }
  std::size_t model = 0;
  for (const auto& [cls, rows] : *c.legacy.accuracy_default) model += rows.size();
  CHECK(model == n);
  REQUIRE(c.legacy.batch_invariance);
  CHECK(c.legacy.batch_invariance->atol == doc["batch_invariance"]["atol"].get<double>());
  CHECK(c.legacy.batch_invariance->rtol == doc["batch_invariance"]["rtol"].get<double>());
}

void check_everything(const Contract& c, const std::filesystem::path& p) {
  const ojson doc = ws1::test::read_json(p);
  CHECK(c.file == p.string());
  CHECK(c.version == str(doc["version"]));
  CHECK(c.sha256 == ws1::sha256_hex(ws1::test::read_text(p)));
  check_judgments(c, doc);
  check_policy_and_roles(c, doc);
  check_chain(c, doc);
  check_legacy(c, doc);
}

// The sha256 that test/data/upstream/SOURCES.md records for a saved upstream file.
std::string recorded_sha256(const std::string& file_name) {
  std::istringstream in(ws1::test::read_text(ws1::test::upstream_data() / "SOURCES.md"));
  const std::regex hex("`([0-9a-f]{64})`");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line.rfind("| `" + file_name + "`", 0) == 0 && std::regex_search(line, m, hex)) return m[1];
  }
  return "";
}

void check_undeclared(const Contract& c) {
  CHECK_FALSE(c.declarations.block_present);
  CHECK_FALSE(c.declarations.accumulation_exceptions);
  CHECK_FALSE(c.declarations.rms_norm_rounding);
  CHECK_FALSE(c.declarations.invariance);
  CHECK_FALSE(c.declarations.tf32);
  CHECK_FALSE(c.declarations.output_dtypes);
  CHECK_FALSE(c.declarations.op_classes);
  CHECK_FALSE(c.op_class("rms_norm"));
  CHECK_FALSE(c.accumulation_exception("det_gemm"));
  CHECK(c.undeclared() == std::vector<std::string>{
                              "ws1check_declarations.accumulation_exceptions",
                              "ws1check_declarations.det_gemm_k_split",
                              "ws1check_declarations.rms_norm_rounding",
                              "ws1check_declarations.invariance",
                              "ws1check_declarations.tf32",
                              "ws1check_declarations.output_dtypes",
                              "ws1check_declarations.op_classes",
                          });
}

}  // namespace

TEST_CASE("upstream ws1-c1-v2 contract loads unchanged, values as in the file", "[contract]") {
  const auto p = ws1::test::upstream_contract();
  const Contract c = load_ok(p);
  check_everything(c, p);
  CHECK(c.sha256 == recorded_sha256("tolerance_contract.ws1-c1-v2.json"));
  CHECK(c.judgments.at(ws1::Judgment::kForwardAccuracy)
            .by_op_class.count(ws1::OpClass::kMhcController));
  check_undeclared(c);
}

TEST_CASE("upstream profile-ws1.latest loads unchanged (ascend_bf16, no mhc_controller)",
          "[contract]") {
  const auto p = ws1::test::upstream_profile();
  const Contract c = load_ok(p);
  check_everything(c, p);
  CHECK(c.sha256 == recorded_sha256("profile-ws1.latest.json"));
  bool ascend = false;
  for (const auto& b : c.policy.backend_profiles) ascend = ascend || b.name == "ascend_bf16";
  CHECK(ascend);
  const auto mhc = c.threshold(ws1::Judgment::kForwardAccuracy, ws1::OpClass::kMhcController,
                               ws1::ContractDType::kBFloat16);
  REQUIRE_FALSE(mhc.ok());
  CHECK(mhc.error().file == p.string());
  CHECK(mhc.error().where == "judgments.forward_accuracy.by_op_class.mhc_controller.bfloat16");
  check_undeclared(c);
}

TEST_CASE("our contract is upstream's plus ws1check_declarations, all declared", "[contract]") {
  const auto p = ws1::test::our_contract();
  const Contract c = load_ok(p);
  check_everything(c, p);

  ojson ours = ws1::test::read_json(p);
  const ojson decl = ours["ws1check_declarations"];
  ours.erase("ws1check_declarations");
  CHECK(ours == ws1::test::read_json(ws1::test::upstream_contract()));

  CHECK(c.declarations.block_present);
  CHECK(c.undeclared().empty());

  // Option A: an accumulation_exceptions block without det_gemm, and the declared K split.
  REQUIRE(c.declarations.accumulation_exceptions);
  CHECK(c.declarations.accumulation_exceptions->empty());
  CHECK_FALSE(c.accumulation_exception("det_gemm"));
  REQUIRE(c.declarations.det_gemm_k_split);
  const ojson& ks = decl["det_gemm_k_split"];
  CHECK(c.declarations.det_gemm_k_split->shards == ks["shards"].get<std::int64_t>());
  CHECK(c.declarations.det_gemm_k_split->rationale == str(ks["rationale"]));
  CHECK_FALSE(c.accumulation_exception("lm_head"));

  REQUIRE(c.declarations.rms_norm_rounding);
  const auto& rms = *c.declarations.rms_norm_rounding;
  CHECK(ws1::contract_name(rms.order) == str(decl["rms_norm_rounding"]["order"]));
  CHECK(rms.order == ws1::RmsNormOrder::kKernel);  // DESIGN §3.5
  REQUIRE(rms.alternatives.size() == decl["rms_norm_rounding"]["alternatives"].size());
  CHECK(rms.applies_to == decl["rms_norm_rounding"]["applies_to"].get<std::vector<std::string>>());

  REQUIRE(c.declarations.invariance);
  CHECK(ws1::contract_name(c.declarations.invariance->nan_policy) ==
        str(decl["invariance"]["nan_policy"]));
  CHECK(c.declarations.invariance->nan_policy == ws1::NanPolicy::kFail);  // DESIGN §3.3
  REQUIRE(c.declarations.tf32);
  CHECK(ws1::contract_name(c.declarations.tf32->cublas_math_mode) ==
        str(decl["tf32"]["cublas_math_mode"]));

  REQUIRE(c.declarations.output_dtypes);
  CHECK(c.declarations.output_dtypes->at(ws1::OpClass::kLogprob) == ws1::ContractDType::kFloat32);
  for (const auto& [cname, value] : decl["output_dtypes"].items()) {
    const auto cls = *ws1::op_class_from_name(cname);
    const std::string v = str(value);
    const auto expect =
        v == "execution" ? c.policy.execution_dtype : *ws1::contract_dtype_from_name(v);
    CHECK(c.declarations.output_dtypes->at(cls) == expect);
  }

  // The declared op map is the spec §2.3 partition, op for op.
  REQUIRE(c.declarations.op_classes);
  CHECK(c.declarations.op_classes->size() == ws1::spec_op_classes().size());
  for (const auto& e : ws1::spec_op_classes()) {
    INFO(e.op);
    CHECK(c.op_class(e.op) == e.op_class);
    CHECK(ws1::contract_name(e.op_class) == str(decl["op_classes"][std::string(e.op)]));
  }
  CHECK_FALSE(c.op_class("softmax"));
}

TEST_CASE("spec op partition has the 13 ops of spec §2.3", "[contract]") {
  CHECK(ws1::spec_op_classes().size() == 13);
  CHECK(ws1::spec_op_class("det_gemm") == ws1::OpClass::kReduction);
  CHECK(ws1::spec_op_class("pack") == ws1::OpClass::kElementwise);
  CHECK(ws1::spec_op_class("attention") == ws1::OpClass::kAttention);
  CHECK(ws1::spec_op_class("linear_logp") == ws1::OpClass::kLogprob);
  CHECK_FALSE(ws1::spec_op_class("mhc"));
}

TEST_CASE("lookups by ws1::DType, arch overrides, and in-memory text", "[contract]") {
  const ojson doc = ws1::test::read_json(ws1::test::our_contract());
  const Contract c = load_ok(ws1::test::our_contract());

  const auto bf16 =
      c.threshold(ws1::Judgment::kGradientAccuracy, ws1::OpClass::kReduction, ws1::DType::kBF16);
  REQUIRE(bf16.ok());
  CHECK(bf16->tolerance->atol ==
        doc["judgments"]["gradient_accuracy"]["by_op_class"]["reduction"]["bfloat16"]["atol"]
            .get<double>());
  const auto i32 =
      c.threshold(ws1::Judgment::kGradientAccuracy, ws1::OpClass::kReduction, ws1::DType::kI32);
  REQUIRE_FALSE(i32.ok());
  CHECK(i32.error().where == "judgments.gradient_accuracy");

  // An sm90 override that borrows the gradient row: it wins on sm90 only.
  ojson edited = doc;
  const ojson grad_row =
      doc["judgments"]["gradient_accuracy"]["by_op_class"]["reduction"]["bfloat16"];
  edited["judgments"]["forward_accuracy"]["arch_overrides"]["sm90"]["reduction"]["bfloat16"] =
      grad_row;
  const auto p = ws1::test::write_scratch("arch_override", edited.dump(2));
  const Contract o = load_ok(p);
  const auto on90 = o.threshold(ws1::Judgment::kForwardAccuracy, ws1::OpClass::kReduction,
                                ws1::ContractDType::kBFloat16, "sm90");
  REQUIRE(on90.ok());
  CHECK(on90->tolerance->atol == grad_row["atol"].get<double>());
  CHECK(on90->source == "judgments.forward_accuracy.arch_overrides.sm90.reduction.bfloat16");
  const ojson& base = doc["judgments"]["forward_accuracy"]["by_op_class"]["reduction"]["bfloat16"];
  for (std::string_view arch : {"", "sm100"}) {
    const auto other = o.threshold(ws1::Judgment::kForwardAccuracy, ws1::OpClass::kReduction,
                                   ws1::ContractDType::kBFloat16, arch);
    REQUIRE(other.ok());
    CHECK(other->tolerance->atol == base["atol"].get<double>());
    CHECK(other->source == "judgments.forward_accuracy.by_op_class.reduction.bfloat16");
  }

  // parse_contract: the same contract from memory, named by the caller.
  const auto mem = ws1::parse_contract(ws1::test::read_text(ws1::test::our_contract()), "<memory>");
  REQUIRE(mem.ok());
  CHECK(mem->file == "<memory>");
  CHECK(mem->sha256 == c.sha256);
}

TEST_CASE("a ws1-c1-v3 contract with mean_abs_dlogp loads", "[contract]") {
  ojson doc = ws1::test::read_json(ws1::test::upstream_contract());
  doc["version"] = "ws1-c1-v3";
  ojson& metrics = doc["chain_logprob_aggregates"]["metrics"];
  // Thresholds borrowed from max_abs_dlogp: this test is about the format, not the value.
  metrics["mean_abs_dlogp"] = {
      {"formula", "mean(abs(dlogp))"},
      {"pass_rule", "value <= threshold"},
      {"by_execution_dtype", metrics["max_abs_dlogp"]["by_execution_dtype"]}};
  doc["chain_logprob_aggregates"]["sole_chain_level_logprob_metrics"].push_back("mean_abs_dlogp");
  doc["judgment_rules"] = ws1::test::read_json(ws1::test::source_root() / "contracts" / "ws1-c1-v3.json")["judgment_rules"];
  const auto p = ws1::test::write_scratch("v3_mean_abs", doc.dump(2));
  const Contract c = load_ok(p);
  CHECK(c.version == "ws1-c1-v3");
  const auto th = c.chain_threshold(ws1::ChainMetric::kMeanAbsDlogp, ws1::ContractDType::kBFloat16);
  REQUIRE(th.ok());
  CHECK(*th ==
        metrics["max_abs_dlogp"]["by_execution_dtype"]["bfloat16"]["threshold"].get<double>());
  CHECK(c.chain.gated_metrics.back() == ws1::ChainMetric::kMeanAbsDlogp);
}

TEST_CASE("the shipped ws1-c1-v3 is ws1-c1-v2 plus the chain metrics of spec 11.2 and its judgment rules",
          "[contract]") {
  const auto v3_path = ws1::test::source_root() / "contracts" / "ws1-c1-v3.json";
  const Contract c = load_ok(v3_path);
  const ojson doc = ws1::test::read_json(v3_path);
  CHECK(c.version == "ws1-c1-v3");
  // Its rows are v2's, row for row (the tables, legacy blocks, policy and roles unchanged).
  const ojson v2 = ws1::test::read_json(ws1::test::our_contract());
  for (const char* key : {"policy", "comparison_roles", "judgments", "accuracy", "batch_invariance"}) {
    INFO(key);
    CHECK(doc[key] == v2[key]);
  }
  check_judgments(c, doc);
  // The chain metrics as the file states them, mean_abs_dlogp gated.
  for (const auto& [name, metric] : doc["chain_logprob_aggregates"]["metrics"].items()) {
    const auto m = ws1::chain_metric_from_name(name);
    REQUIRE(m);
    for (const auto& [dt, entry] : metric["by_execution_dtype"].items()) {
      const auto th = c.chain_threshold(*m, *ws1::contract_dtype_from_name(dt));
      REQUIRE(th.ok());
      CHECK(*th == entry["threshold"].get<double>());
    }
  }
  CHECK(std::find(c.chain.gated_metrics.begin(), c.chain.gated_metrics.end(), ws1::ChainMetric::kMeanAbsDlogp) !=
        c.chain.gated_metrics.end());
  // The scale-free gradient rule and its provenance.
  REQUIRE(c.rules);
  REQUIRE(c.rules->gradient_scale_free);
  const ojson& sf = doc["judgment_rules"]["gradient_scale_free"];
  CHECK(c.rules->gradient_scale_free->atol_rel_by_dtype.at(ws1::ContractDType::kBFloat16) ==
        sf["atol_rel_by_dtype"]["bfloat16"].get<double>());
  CHECK(c.rules->gradient_scale_free->provenance.mode == str(sf["provenance"]["mode"]));
  CHECK(c.rules->gradient_scale_free->provenance.command == str(sf["provenance"]["command"]));
  REQUIRE(c.rules->relative_to_naive);
  const ojson& rn = doc["judgment_rules"]["relative_to_naive"];
  for (const auto& [jname, f] : rn["factor_by_judgment"].items())
    CHECK(c.rules->relative_to_naive->factor_by_judgment.at(*ws1::judgment_from_name(jname)) == f.get<double>());
  CHECK(c.rules->relative_to_naive->floor_steps == rn["floor_steps"].get<double>());
  REQUIRE(c.rules->bias);
  const ojson& bi = doc["judgment_rules"]["bias"];
  for (const auto& [dt, m] : bi["max_mean_by_dtype"].items())
    CHECK(c.rules->bias->max_mean_by_dtype.at(*ws1::contract_dtype_from_name(dt)) == m.get<double>());
  CHECK(c.rules->bias->z == bi["z"].get<double>());
  CHECK(c.rules->bias->provenance.mode == str(bi["provenance"]["mode"]));
  // v2 has no rules.
  CHECK_FALSE(load_ok(ws1::test::our_contract()).rules);
}

TEST_CASE("vocabulary round-trips through its spellings", "[contract]") {
  for (auto j : ws1::all_judgments()) CHECK(ws1::judgment_from_name(ws1::contract_name(j)) == j);
  for (auto c : ws1::all_op_classes()) CHECK(ws1::op_class_from_name(ws1::contract_name(c)) == c);
  for (auto t : ws1::all_contract_dtypes())
    CHECK(ws1::contract_dtype_from_name(ws1::contract_name(t)) == t);
  for (auto m : ws1::all_chain_metrics())
    CHECK(ws1::chain_metric_from_name(ws1::contract_name(m)) == m);
  for (auto t : ws1::all_contract_dtypes())
    if (auto d = ws1::to_dtype(t)) CHECK(ws1::contract_dtype(*d) == t);
  CHECK_FALSE(ws1::to_dtype(ws1::ContractDType::kFloat8));
  CHECK(ws1::is_invariance(ws1::Judgment::kGradientInvariance));
  CHECK_FALSE(ws1::is_invariance(ws1::Judgment::kGradientAccuracy));
}

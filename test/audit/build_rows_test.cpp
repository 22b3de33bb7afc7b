// The live rows of the build audit: on the shipped contract each row is conformant or declared;
// on upstream's contract (no ws1check_declarations) the §9.2 and §9.6 rows are non-conformant;
// and every row goes non-conformant on a planted defect (a reference with the wrong dtype, a
// backend with FP32 merges or hf rounding, a comparator that equates ±0, a bf16 logprob, a
// tolerance literal in a test, a stale or dirty evidence artifact).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include "option_b_contract.hpp"
#include "planted_backend.hpp"
#include "gemm_cpu.hpp"
#include "test_paths.hpp"
#include "ws1/audit.hpp"
#include "ws1/backend.hpp"
#include "ws1/fixture_lock.hpp"
#include "ws1/judge.hpp"
#include "ws1/runner.hpp"

using namespace ws1;
namespace fs = std::filesystem;

namespace {

struct Setup {
  Contract contract, upstream;
  Manifest tiny, probe;
  FixtureLock tiny_lock, no_lock;
  std::vector<FixtureSpec> catalogue;
};

const Setup& setup() {
  static const Setup s = [] {
    Setup out;
    auto c = load_contract(test::source_root() / "contracts" / "ws1-c1-v2.json");
    auto u = load_contract(test::upstream_contracts() / "tolerance_contract.ws1-c1-v2.json");
    auto t = load_manifest(test::source_root() / "fixtures" / "ws1-smoke.json");
    auto l = load_fixture_lock(test::source_root() / "fixtures" / "ws1-smoke.lock.json");
    auto p = load_manifest(test::source_root() / "fixtures" / "ws1-qwen3-8b-dense.json");
    if (!c || !u || !t || !l || !p) FAIL("cannot load the shipped contracts / workloads / lock");
    out.contract = std::move(c).value();
    out.upstream = std::move(u).value();
    out.tiny = std::move(t).value();
    out.tiny_lock = std::move(l).value();
    out.probe = std::move(p).value();
    auto cat = fixture_catalogue(out.tiny);
    if (!cat) FAIL("smoke catalogue");
    out.catalogue = std::move(cat).value();
    return out;
  }();
  return s;
}

RunContext tiny_run(const Contract& c) {
  return make_run_context(c, setup().tiny, setup().tiny_lock, "cpu_bf16", 0);
}
RunContext probe_run(const Contract& c) {
  return make_run_context(c, setup().probe, setup().no_lock, "cpu_bf16", 0);
}

using Kernel = test::OpKernel;
using WrapperBackend = test::PlantedBackend;

std::vector<AuditBackend> with(Backend& b) {
  return {{"cpu_bf16", &b, ""}, {"cuda_bf16", nullptr, "not available in this build yet"}};
}

// A reference engine whose det_gemm forward gives bf16 golds (upstream's det_gemm gold, §9.3);
// every other call is the CPU engine's.
class Bf16GoldReference final : public ReferenceEngine {
 public:
  std::string name() const override { return "planted bf16 gold"; }
  Result<ReferenceResult> forward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    auto r = cpu_->forward(op, in, ctx);
    if (!r || op.name() != "det_gemm") return r;
    for (auto& t : r->tensors) t.tensor = Tensor(DType::kBF16, t.tensor.shape());
    return r;
  }
  Result<ReferenceResult> backward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return cpu_->backward(op, in, ctx);
  }

 private:
  std::unique_ptr<ReferenceEngine> cpu_ = make_cpu_reference();
};

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ws1check-audit-rows-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

bool has(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("audit gold provenance: every FP32 reference gives float32", "[audit][rows]") {
  const auto cpu = make_cpu_reference();
  const AuditRow r = audit_gold_provenance(tiny_run(setup().contract), setup().catalogue, all_ops(), *cpu).value();
  INFO(r.basis);
  CHECK(r.status == AuditStatus::kConformant);
  CHECK(r.details.size() == all_ops().size());
  CHECK(has(r.basis, "13 ops"));
  CHECK(has(r.basis, "ws1-smoke-v1"));
}

TEST_CASE("audit gold provenance planted defect: a bf16 gold is non-conformant", "[audit][rows][planted]") {
  Bf16GoldReference bad;
  const Op* ops[] = {find_op_impl("silu"), find_op_impl("det_gemm")};
  const AuditRow r = audit_gold_provenance(tiny_run(setup().contract), setup().catalogue, ops, bad).value();
  INFO(r.basis);
  CHECK(r.status == AuditStatus::kNonConformant);
  CHECK(has(r.basis, "det_gemm"));
  CHECK(has(r.basis, "bfloat16"));
  // The same two ops from the CPU engine are conformant.
  const auto cpu = make_cpu_reference();
  CHECK(audit_gold_provenance(tiny_run(setup().contract), setup().catalogue, ops, *cpu)->status ==
        AuditStatus::kConformant);
}

TEST_CASE("audit det_gemm: Option A declared (no exception, a K split) and shown by the probe", "[audit][rows]") {
  auto cpu = make_cpu_bf16_backend();
  const AuditRow r = audit_det_gemm(probe_run(setup().contract), with(*cpu));
  INFO(r.basis);
  CHECK(r.status == AuditStatus::kConformant);
  CHECK(has(r.basis, "Option A"));
  CHECK(has(r.basis, "K split into 2 FP32 shards"));
  CHECK(has(r.basis, "cpu_bf16 det_gemm: option_a"));
  CHECK(has(r.basis, "cuda_bf16 not present"));
}

TEST_CASE("audit det_gemm on upstream's contract as-is: float32 accumulation, no exception, conformant", "[audit][rows]") {
  auto cpu = make_cpu_bf16_backend();
  const AuditRow r = audit_det_gemm(probe_run(setup().upstream), with(*cpu));
  INFO(r.basis);
  CHECK(r.status == AuditStatus::kConformant);
  CHECK(has(r.basis, "no ws1check_declarations.accumulation_exceptions"));
  CHECK(has(r.basis, "cpu_bf16 det_gemm: option_a"));
}

TEST_CASE("audit det_gemm planted defect: BF16 tree nodes under Option A; a declared Option B judged as written", "[audit][rows][planted]") {
  namespace g = ops::gemm;
  const auto tree = g::bf16_tree(32);
  WrapperBackend bf16_nodes(
      "det_gemm",
      [tree](const Op&, const Tensors& in, const OpContext&) -> Result<Tensors> {
        return Tensors{{"c", g::gemm(g::matrix(*find_tensor(in, "a")), g::matrix(*find_tensor(in, "b")),
                                     DType::kBF16, tree)}};
      },
      [tree](const Op&, const Tensors& in, const OpContext&) -> Result<Tensors> {
        const auto a = g::matrix(*find_tensor(in, "a")), b = g::matrix(*find_tensor(in, "b"));
        const auto dy = g::matrix(*find_tensor(in, "dy.c"));
        return Tensors{{"da", g::gemm(dy, g::transposed(b), DType::kBF16, tree)},
                       {"db", g::gemm(g::transposed(a), dy, DType::kBF16, tree)}};
      });
  const AuditRow r = audit_det_gemm(probe_run(setup().contract), with(bf16_nodes));
  INFO(r.basis);
  CHECK(r.status == AuditStatus::kNonConformant);
  CHECK(has(r.basis, "cpu_bf16 det_gemm: neither"));
  // A user contract that declares Option B: the BF16 tree is then exactly what is declared, the
  // row says so and states what B costs; the Option A candidate is red against that declaration.
  const Contract option_b = test::with_option_b(setup().contract);
  const AuditRow declared_b = audit_det_gemm(probe_run(option_b), with(bf16_nodes));
  INFO(declared_b.basis);
  CHECK(declared_b.status == AuditStatus::kExceptionDeclared);
  CHECK(has(declared_b.basis, "what the tree costs"));
  auto cpu = make_cpu_bf16_backend();
  CHECK(audit_det_gemm(probe_run(option_b), with(*cpu)).status == AuditStatus::kNonConformant);
}

TEST_CASE("audit RMSNorm order: declared and matched; undeclared upstream; hf planted", "[audit][rows][planted]") {
  auto cpu = make_cpu_bf16_backend();
  const AuditRow r = audit_rms_norm_order(probe_run(setup().contract), with(*cpu));
  INFO(r.basis);
  CHECK(r.status == AuditStatus::kConformant);
  CHECK(has(r.basis, "cpu_bf16 rms_norm: kernel"));
  CHECK(has(r.basis, "cpu_bf16 qk_norm: kernel"));

  const AuditRow u = audit_rms_norm_order(probe_run(setup().upstream), with(*cpu));
  INFO(u.basis);
  CHECK(u.status == AuditStatus::kNonConformant);
  CHECK(has(u.basis, "rms_norm_rounding is absent"));
  CHECK(has(u.basis, "cpu_bf16 rms_norm: kernel"));

  WrapperBackend hf("rms_norm", [](const Op& o, const Tensors& in, const OpContext& ctx) {
    OpContext c = ctx;
    c.rms_norm_order = RmsNormOrder::kHf;
    return o.cpu_forward(in, c);
  });
  const AuditRow h = audit_rms_norm_order(probe_run(setup().contract), with(hf));
  INFO(h.basis);
  CHECK(h.status == AuditStatus::kNonConformant);
  CHECK(has(h.basis, "cpu_bf16 rms_norm: hf"));
}

TEST_CASE("audit invariance comparator: judge_bitwise gives the declared answers", "[audit][rows]") {
  const AuditRow r = audit_invariance_comparator(setup().contract);
  INFO(r.basis);
  CHECK(r.status == AuditStatus::kConformant);
  CHECK(has(r.basis, "nan_policy fail (ws1check_declarations.invariance.nan_policy)"));
  CHECK(r.details.size() == 11);
  const AuditRow u = audit_invariance_comparator(setup().upstream);
  CHECK(u.status == AuditStatus::kConformant);
  CHECK(has(u.basis, "DESIGN §3.3"));
  // Under compare_bits the same-payload NaN cases pass instead; judge_bitwise follows.
  Contract bits = setup().contract;
  bits.declarations.invariance->nan_policy = NanPolicy::kCompareBits;
  const AuditRow b = audit_invariance_comparator(bits);
  INFO(b.basis);
  CHECK(b.status == AuditStatus::kConformant);
  CHECK(has(b.details[4], "same NaN payload (bf16 0x7fc1): pass"));
}

TEST_CASE("audit invariance comparator planted defects: allclose-like and policy-blind comparators", "[audit][rows][planted]") {
  // upstream §9.4: compare as FP32 numbers (+0 == -0).
  const BitwiseComparator numeric = [](std::string name, const Tensor& l, const Tensor& r, NanPolicy p,
                                       std::size_t n) {
    BitwiseTensor t = judge_bitwise(std::move(name), l, r, p, n);
    if (t.signed_zero_mismatches > 0 && t.mismatches == t.signed_zero_mismatches) {
      t.equal_bits = true;
      t.mismatches = 0;
      t.signed_zero_mismatches = 0;
      t.first_mismatches.clear();
    }
    return t;
  };
  const AuditRow r = audit_invariance_comparator(setup().contract, numeric);
  INFO(r.basis);
  CHECK(r.status == AuditStatus::kNonConformant);
  CHECK(has(r.basis, "+0 vs -0 (bf16): gave pass"));
  // A comparator that always compares NaNs by their bits, whatever the contract declares.
  const BitwiseComparator blind = [](std::string name, const Tensor& l, const Tensor& r, NanPolicy,
                                     std::size_t n) {
    return judge_bitwise(std::move(name), l, r, NanPolicy::kCompareBits, n);
  };
  const AuditRow b = audit_invariance_comparator(setup().contract, blind);
  INFO(b.basis);
  CHECK(b.status == AuditStatus::kNonConformant);
  CHECK(has(b.basis, "recorded nan_policy compare_bits, asked fail"));
}

TEST_CASE("audit logprob dtype: FP32 on every backend present; a bf16 logp planted", "[audit][rows][planted]") {
  auto cpu = make_cpu_bf16_backend();
  const AuditRow r = audit_logprob_dtype(tiny_run(setup().contract), setup().catalogue, with(*cpu), all_ops()).value();
  INFO(r.basis);
  CHECK(r.status == AuditStatus::kConformant);
  CHECK(has(r.basis, "logp, batch_invariant_logp, linear_logp"));
  CHECK(has(r.basis, "cuda_bf16 not present"));

  WrapperBackend bf16_out("batch_invariant_logp", [](const Op& o, const Tensors& in, const OpContext& ctx) -> Result<Tensors> {
    auto got = o.cpu_forward(in, ctx);
    if (!got) return got;
    Tensors out;
    for (const auto& t : *got) out.push_back({t.name, Tensor(DType::kBF16, t.tensor.shape())});
    return out;
  });
  const AuditRow b = audit_logprob_dtype(tiny_run(setup().contract), setup().catalogue, with(bf16_out), all_ops()).value();
  INFO(b.basis);
  CHECK(b.status == AuditStatus::kNonConformant);
  CHECK(has(b.basis, "batch_invariant_logp forward"));
  CHECK(has(b.basis, "output dtype bfloat16"));
  // A contract whose policy lets logprobs be bf16 is non-conformant too.
  Contract c = setup().contract;
  c.policy.logprob_aggregates_dtype = ContractDType::kBFloat16;
  CHECK(audit_logprob_dtype(tiny_run(c), setup().catalogue, with(*cpu), all_ops())->status ==
        AuditStatus::kNonConformant);
}

TEST_CASE("audit tolerance convergence: the project's tests have no literals; a planted one counts 1", "[audit][rows][planted]") {
  const AuditRow r = audit_tolerance_literals(test::source_root()).value();
  INFO(r.basis);
  for (const auto& d : r.details) INFO(d);
  CHECK(r.status == AuditStatus::kConformant);
  CHECK(has(r.basis, ": 0 found"));

  const fs::path root = temp_dir("tol");
  fs::create_directories(root / "test" / "ops");
  fs::create_directories(root / "test" / "data" / "repo");
  // Planted files (from test/data: they hold tolerance literals): one literal after a comment
  // that only mentions one; and the same literal under test/data, which the scan excludes.
  const fs::path snippets = test::test_data() / "audit_snippets";
  fs::copy_file(snippets / "gemm_check.cpp", root / "test" / "ops" / "gemm_check.cpp");
  std::ofstream(root / "test" / "ops" / "gemm.py") << "x = row.atol\n";
  fs::copy_file(snippets / "test_x.py", root / "test" / "data" / "repo" / "test_x.py");
  const AuditRow p = audit_tolerance_literals(root).value();
  INFO(p.basis);
  CHECK(p.status == AuditStatus::kNonConformant);
  CHECK(has(p.basis, "1 found (atol 1, rtol 0)"));
  CHECK(has(p.basis, "test/ops/gemm_check.cpp:2"));

  fs::remove_all(root / "test");
  CHECK(audit_tolerance_literals(root)->status == AuditStatus::kNotChecked);
  fs::remove_all(root);
}

TEST_CASE("audit evidence currency: commit and clean tree", "[audit][rows][planted]") {
  BuildInfo build;
  build.source_commit = "0123456789abcdef0123456789abcdef01234567";
  build.source_state = "clean";
  CHECK(audit_evidence_currency(std::nullopt, build)->status == AuditStatus::kNotChecked);
  const fs::path dir = temp_dir("evidence");
  auto artifact = [&](std::string commit, std::string dirty) {
    const fs::path p = dir / "evidence.json";
    std::ofstream(p) << R"({"schema_version": "ws1check-evidence-v1", "tool": {"name": "ws1check", "version": "0.1.0", "source_commit": ")"
                     << commit << R"(", "source_dirty": )" << dirty << "}, \"cells\": []}";
    return p;
  };
  const AuditRow ok = audit_evidence_currency(artifact(build.source_commit, "false"), build).value();
  INFO(ok.basis);
  CHECK(ok.status == AuditStatus::kConformant);

  const std::string other = "fdf5bcc5165820abb506291a29370225306514ca";
  const AuditRow stale = audit_evidence_currency(artifact(other, "false"), build).value();
  CHECK(stale.status == AuditStatus::kNonConformant);
  CHECK(has(stale.basis, other));
  CHECK(has(stale.basis, build.source_commit));

  CHECK(audit_evidence_currency(artifact(build.source_commit, "true"), build)->status == AuditStatus::kNonConformant);
  CHECK(audit_evidence_currency(artifact(build.source_commit, "null"), build)->status == AuditStatus::kNonConformant);
  BuildInfo unknown = build;
  unknown.source_commit = "unknown";
  CHECK(audit_evidence_currency(artifact("unknown", "false"), unknown)->status == AuditStatus::kNonConformant);

  // Not an evidence artifact: one-line errors naming the file and field.
  std::ofstream(dir / "bad.json") << "{\"tool\": {\"source_commit\": 5}}";
  auto bad = audit_evidence_currency(dir / "bad.json", build);
  REQUIRE_FALSE(bad.ok());
  CHECK(has(bad.error().message(), "tool.source_commit"));
  std::ofstream(dir / "notjson.json") << "{";
  REQUIRE_FALSE(audit_evidence_currency(dir / "notjson.json", build).ok());
  REQUIRE_FALSE(audit_evidence_currency(dir / "missing.json", build).ok());
  fs::remove_all(dir);
}

TEST_CASE("audit build: the shipped contract passes, upstream's shows the §9.2 and §9.6 gaps", "[audit][rows]") {
  auto cpu = make_cpu_bf16_backend();
  auto inputs = [&](const RunContext& tiny, const RunContext& probe) {
    BuildAuditInputs in;
    in.tiny = &tiny;
    in.tiny_catalogue = setup().catalogue;
    in.probe = &probe;
    in.backends = with(*cpu);
    in.project_root = test::source_root();
    return in;
  };
  const RunContext t = tiny_run(setup().contract), p = probe_run(setup().contract);
  auto rows = audit_build(inputs(t, p));
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 8);
  for (const auto& r : *rows) {
    INFO(r.id << ": " << audit_status_name(r.status) << ": " << r.basis);
    CHECK(r.status != AuditStatus::kNonConformant);
  }
  CHECK((*rows)[1].status == AuditStatus::kConformant);  // det_gemm: Option A
  CHECK((*rows)[5].status == AuditStatus::kNotChecked);  // tf32: built without CUDA here
  CHECK((*rows)[7].status == AuditStatus::kNotChecked);  // no --evidence

  const RunContext ut = tiny_run(setup().upstream), up = probe_run(setup().upstream);
  auto urows = audit_build(inputs(ut, up));
  REQUIRE(urows.ok());
  std::vector<std::string> non_conformant;
  for (const auto& r : *urows)
    if (r.status == AuditStatus::kNonConformant) non_conformant.push_back(r.id);
  CHECK(non_conformant == std::vector<std::string>{std::string(kRowRmsNormOrder)});
}

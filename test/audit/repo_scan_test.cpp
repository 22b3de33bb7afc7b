// The static scan of a foreign tree (`ws1check audit --repo`): the planted tree
// test/data/audit_repo gives exactly the planted findings (rule, file, line) and counts, and its
// near-misses none; each rule is also shown on small texts, matching and not matching.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "source_text.hpp"
#include "test_paths.hpp"
#include "ws1/audit.hpp"

using namespace ws1;

namespace {

std::filesystem::path planted() { return test::test_data() / "audit_repo"; }

using Key = std::tuple<std::string, std::string, std::int64_t>;  // rule, file, line

std::set<Key> keys(const std::vector<RepoFinding>& v) {
  std::set<Key> s;
  for (const auto& f : v) s.insert({f.rule, f.file, f.line});
  return s;
}

std::vector<RepoFinding> py(std::string_view text, bool test_file = false) {
  return scan_source_text(text, "x.py", SourceLanguage::kPython, test_file);
}
std::vector<RepoFinding> cc(std::string_view text, bool test_file = false) {
  return scan_source_text(text, "x.cu", SourceLanguage::kCFamily, test_file);
}

std::size_t count_rule(const std::vector<RepoFinding>& v, std::string_view rule) {
  return static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [&](const RepoFinding& f) { return f.rule == rule; }));
}

}  // namespace

TEST_CASE("repo scan: the planted tree gives exactly the planted findings", "[audit][repo]") {
  auto scan = scan_repo(planted());
  REQUIRE(scan.ok());
  const std::set<Key> want = {
      {std::string(kRuleHardcodedTolerance), "tests/kernels_test.cu", 4},
      {std::string(kRuleHardcodedTolerance), "tests/kernels_test.cu", 9},
      {std::string(kRuleHardcodedTolerance), "tests/test_ops.py", 5},
      {std::string(kRuleHardcodedTolerance), "tests/test_ops.py", 9},
      {std::string(kRuleHardcodedTolerance), "tests/test_ops.py", 10},  // atol= and rtol=
      {std::string(kRuleHardcodedTolerance), "tests/test_ops.py", 17},
      {std::string(kRuleTritonDotPrecision), "rl/triton/attn.py", 7},
      {std::string(kRuleTritonDotPrecision), "rl/triton/attn.py", 8},
      {std::string(kRuleTritonDotPrecision), "rl/triton/attn.py", 15},
      {std::string(kRuleTritonDotPrecision), "rl/triton/attn.py", 19},
      {std::string(kRuleGoldLowPrecisionMatmul), "rl/gtest/operator_specs.py", 8},
      {std::string(kRuleGoldLowPrecisionMatmul), "rl/gtest/operator_specs.py", 22},
      {std::string(kRuleGoldLowPrecisionMatmul), "rl/gtest/operator_specs.py", 35},
      {std::string(kRuleLogprobOutputDtype), "rl/logp.py", 6},
      {std::string(kRuleLogprobOutputDtype), "rl/logp.py", 7},
      {std::string(kRuleLogprobOutputDtype), "rl/logp.py", 8},
      {std::string(kRuleLogprobOutputDtype), "csrc/fused_logp_kernel.cu", 4},
      {std::string(kRuleLogprobOutputDtype), "csrc/fused_logp_kernel.cu", 20},
  };
  for (const auto& f : scan->findings) INFO(f.file << ":" << f.line << ": " << f.rule << ": " << f.message);
  CHECK(keys(scan->findings) == want);
  CHECK(scan->findings.size() == 19);  // line 10 of test_ops.py holds two
  CHECK(count_rule(scan->findings, kRuleHardcodedTolerance) == 7);
  CHECK(count_rule(scan->findings, kRuleTritonDotPrecision) == 4);
  CHECK(count_rule(scan->findings, kRuleGoldLowPrecisionMatmul) == 3);
  CHECK(count_rule(scan->findings, kRuleLogprobOutputDtype) == 5);
  // Counts per file and in total; the literal outside tests and the hidden directory are not.
  CHECK(scan->tolerance_total.atol == 5);
  CHECK(scan->tolerance_total.rtol == 2);
  REQUIRE(scan->tolerance_by_file.size() == 2);
  CHECK(scan->tolerance_by_file.at("tests/test_ops.py").atol == 4);
  CHECK(scan->tolerance_by_file.at("tests/test_ops.py").rtol == 1);
  CHECK(scan->tolerance_by_file.at("tests/kernels_test.cu").atol == 1);
  CHECK(scan->tolerance_by_file.at("tests/kernels_test.cu").rtol == 1);
  CHECK(scan->files_scanned == 7);  // README.md is not a source; .hidden/ is not walked
  // Findings are ordered by file, then line; they carry the source line.
  CHECK(std::is_sorted(scan->findings.begin(), scan->findings.end(), [](const RepoFinding& a, const RepoFinding& b) {
    return std::tie(a.file, a.line) < std::tie(b.file, b.line);
  }));
  for (const auto& f : scan->findings) {
    CHECK_FALSE(f.snippet.empty());
    CHECK(f.column >= 1);
  }
}

TEST_CASE("repo scan: messages say what was found", "[audit][repo]") {
  auto scan = scan_repo(planted());
  REQUIRE(scan.ok());
  auto at = [&](std::string_view file, std::int64_t line) -> const RepoFinding& {
    auto it = std::find_if(scan->findings.begin(), scan->findings.end(),
                           [&](const RepoFinding& f) { return f.file == file && f.line == line; });
    REQUIRE(it != scan->findings.end());
    return *it;
  };
  CHECK(at("rl/triton/attn.py", 7).message.find("sets no precision") != std::string::npos);
  CHECK(at("rl/triton/attn.py", 8).message.find("input_precision=\"tf32\"") != std::string::npos);
  CHECK(at("rl/triton/attn.py", 15).message.find("allow_tf32=True") != std::string::npos);
  CHECK(at("rl/gtest/operator_specs.py", 8).message.find("NativeGemmOp.__call__") != std::string::npos);
  CHECK(at("rl/logp.py", 8).message.find("dtype=logits.dtype") != std::string::npos);
  CHECK(at("csrc/fused_logp_kernel.cu", 4).message.find("logits.options()") != std::string::npos);
  CHECK(at("csrc/fused_logp_kernel.cu", 4).message.find("fused_logp_forward") != std::string::npos);
  CHECK(at("csrc/fused_logp_kernel.cu", 20).message.find("dtype(logits.scalar_type())") != std::string::npos);
  CHECK(at("tests/test_ops.py", 17).message.find("-1e-4") != std::string::npos);
}

TEST_CASE("repo scan: hard-coded tolerance pattern", "[audit][repo]") {
  // The snippets are test inputs (tolerance literals among them), so they live in test/data:
  // counted cases, cases outside test files, and look-alikes that must not count (not a
  // literal, comparisons, comments, strings, dict keys, other names).
  std::ifstream in(test::test_data() / "audit_snippets" / "tolerance_cases.txt");
  REQUIRE(in);
  struct Case {
    std::string lang;
    bool test_file = false;
    std::size_t expected = 0;
    std::string text;
  };
  std::vector<Case> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#", 0) == 0 && cases.empty()) continue;
    if (line.rfind("=== ", 0) == 0) {
      std::istringstream head(line.substr(4));
      Case c;
      int tf = 0;
      head >> c.lang >> tf >> c.expected;
      c.test_file = tf == 1;
      cases.push_back(c);
    } else {
      REQUIRE(!cases.empty());
      cases.back().text += line + "\n";
    }
  }
  REQUIRE(cases.size() == 20);
  for (const Case& c : cases) {
    INFO(c.lang << " test_file=" << c.test_file << ":\n" << c.text);
    const auto found = c.lang == "py" ? py(c.text, c.test_file) : cc(c.text, c.test_file);
    CHECK(found.size() == c.expected);
  }
}

TEST_CASE("repo scan: Triton tl.dot precision", "[audit][repo]") {
  CHECK(py("x = tl.dot(a, b)\n").size() == 1);
  CHECK(py("x = tl.dot(a, b, input_precision='tf32x3')\n").size() == 1);
  CHECK(py("x = tl.dot(a, b, input_precision=prec)\n").size() == 1);
  CHECK(py("x = tl.dot(a, b, **kw)\n").size() == 1);
  CHECK(py("x = tl.dot(a, b, out_dtype=tl.float32)\n").size() == 1);
  CHECK(py("x = tl.dot(a, b, input_precision='ieee')\n").empty());
  CHECK(py("x = tl.dot(a, b, allow_tf32 = False)\n").empty());
  CHECK(py("x = tl.dot(\n  a,\n  b,  # input_precision='tf32'\n  input_precision=\"ieee\")\n").empty());
  CHECK(py("x = my.tl.dot(a, b)\ny = xtl.dot(a, b)\nz = tl.dotted(a)\n").empty());
  // The finding is on the line where the call starts.
  const auto f = py("\n\nx = tl.dot(\n a, b)\n");
  REQUIRE(f.size() == 1);
  CHECK(f[0].line == 3);
  CHECK(f[0].column == 5);
}

TEST_CASE("repo scan: gold matmul on low-precision inputs", "[audit][repo]") {
  CHECK(py("def gold(a, b):\n    return torch.matmul(a, b)\n").size() == 1);
  CHECK(py("class RefGemm:\n    def run(self, a, b):\n        return torch.mm(a, b)\n").size() == 1);
  CHECK(py("def oracle_attention(q, k):\n    s = torch.bmm(q, k.transpose(1, 2))\n").size() == 1);
  // Operands upcast (in the call, or assigned earlier in the same def): not reported.
  CHECK(py("def gold(a, b):\n    return torch.matmul(a.double(), b.double())\n").empty());
  CHECK(py("def gold(a, b):\n    x, y = a.float(), b.float()\n    return torch.matmul(x, y)\n").empty());
  CHECK(py("def gold(a, b):\n    x: torch.Tensor = a.to(torch.float64)\n    return torch.matmul(x, b.double())\n").empty());
  // An upcast in another def does not count; a call with the name as an argument is no assignment.
  CHECK(py("def prep(a):\n    x = a.float()\n\ndef gold(x, b):\n    return torch.matmul(x, b)\n").size() == 1);
  CHECK(py("def gold(a, b):\n    f(a, dtype=torch.float32)\n    return torch.matmul(a, b)\n").size() == 1);
  // Not a reference path: names split into words (prefix, refresh and preferred are not "ref").
  CHECK(py("def fast_gemm(a, b):\n    return torch.matmul(a, b)\n").empty());
  CHECK(py("def prefix_refresh(a, b):\n    return torch.matmul(a, b)\n").empty());
  CHECK(py("class Oracle:\n    async def run(self, a, b):\n        return torch.matmul(a, b)\nasync \n").size() == 1);
  // Back at module level after the def ends.
  CHECK(py("def gold(a, b):\n    pass\n\ny = torch.matmul(a, b)\n").empty());
}

TEST_CASE("repo scan: logprob outputs allocated with the logits' dtype", "[audit][repo]") {
  CHECK(py("def f(logits):\n    logprobs = torch.zeros_like(logits)\n").size() == 1);
  CHECK(py("def f(self):\n    self.log_probs = self.logits.new_zeros(4)\n").size() == 1);
  CHECK(py("def compute_logp(logits):\n    result = torch.full_like(logits, 0.0)\n").size() == 1);
  CHECK(py("def f(logits):\n    logprobs = torch.zeros_like(logits, dtype=torch.float32)\n").empty());
  CHECK(py("def compute_logp_grad(logits):\n    out = torch.empty_like(logits)\n").empty());
  CHECK(py("def f(logits):\n    probs = torch.empty_like(logits)\n").empty());
  CHECK(py("def f(hidden):\n    logp = torch.empty_like(hidden)\n").empty());
  CHECK(py("def f(logits):\n    logp == torch.empty_like(logits)\n").empty());
  CHECK(cc("torch::Tensor logp_fwd(torch::Tensor logits) {\n  torch::Tensor out = at::empty_like(logits);\n}\n").size() == 1);
  CHECK(cc("torch::Tensor f(torch::Tensor logits) {\n  auto& logp = torch::zeros({n}, logits.options().device(dev));\n}\n").size() == 1);
  CHECK(cc("torch::Tensor f(torch::Tensor logits) {\n  auto logp = torch::empty_like(logits, logits.options().dtype(torch::kFloat32));\n}\n").empty());
  CHECK(cc("torch::Tensor logp_fwd(torch::Tensor logits) {\n  auto out = torch::empty({n}, hidden.options());\n}\n").empty());
}

TEST_CASE("repo scan: test paths, languages, word splitting, code view", "[audit][repo]") {
  CHECK(is_test_path("tests/ops/x.py"));
  CHECK(is_test_path("pkg/test/x.cu"));
  CHECK(is_test_path("pkg/test_x.py"));
  CHECK(is_test_path("pkg/x_test.cpp"));
  CHECK(is_test_path("conftest.py"));
  CHECK_FALSE(is_test_path("pkg/testing_utils.py"));
  CHECK_FALSE(is_test_path("pkg/contest/x.py"));
  CHECK(source_language("a/b.py") == SourceLanguage::kPython);
  CHECK(source_language("a/b.cuh") == SourceLanguage::kCFamily);
  CHECK_FALSE(source_language("a/b.json"));
  using audit_detail::identifier_words;
  CHECK(identifier_words("NativeGemmOp") == std::vector<std::string>{"native", "gemm", "op"});
  CHECK(identifier_words("kAtol") == std::vector<std::string>{"k", "atol"});
  CHECK(identifier_words("BF16_ATOL") == std::vector<std::string>{"bf16", "atol"});
  CHECK(identifier_words("HTTPServer_ref") == std::vector<std::string>{"http", "server", "ref"});
  const std::string text = "a = 'x#y' # c\nb = \"\"\"q\n'r'\"\"\"\n";
  const std::string view = audit_detail::code_view(text, SourceLanguage::kPython);
  CHECK(view.size() == text.size());
  CHECK(view == "a = '   '    \nb = \"\"\" \n   \"\"\"\n");
  const std::string c = "x = \"//\"; // c\ny = '\\''; /* z\n */ w";
  CHECK(audit_detail::code_view(c, SourceLanguage::kCFamily) == "x = \"  \";     \ny = '  ';     \n    w");
}

TEST_CASE("repo scan: a path that is not a directory is bad input", "[audit][repo]") {
  auto r = scan_repo(planted() / "README.md");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("not a directory") != std::string::npos);
  CHECK(r.error().code == ExitCode::kBadInput);
}

TEST_CASE("repo scan: SARIF carries the driver, rules and located results", "[audit][repo][sarif]") {
  auto scan = scan_repo(planted());
  REQUIRE(scan.ok());
  const auto doc = nlohmann::json::parse(sarif_json(*scan, "9.9.9"));
  CHECK(doc.at("version") == "2.1.0");
  const auto& run = doc.at("runs").at(0);
  CHECK(run.at("tool").at("driver").at("name") == "ws1check");
  CHECK(run.at("tool").at("driver").at("version") == "9.9.9");
  const auto& rules = run.at("tool").at("driver").at("rules");
  REQUIRE(rules.size() == repo_rules().size());
  const auto& results = run.at("results");
  REQUIRE(results.size() == scan->findings.size());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const RepoFinding& f = scan->findings[i];
    CHECK(r.at("ruleId") == f.rule);
    CHECK(rules.at(r.at("ruleIndex").get<std::size_t>()).at("id") == f.rule);
    const auto& loc = r.at("locations").at(0).at("physicalLocation");
    CHECK(loc.at("artifactLocation").at("uri") == f.file);
    CHECK(loc.at("region").at("startLine") == f.line);
  }
}

// JUnit XML: counts per suite and overall, one testcase per cell, failures carry the worst
// element, N/A cells are skipped with their reason, text is escaped into valid XML.
#include <catch2/catch.hpp>
#include <regex>

#include "report_test_support.hpp"
#include "ws1/report.hpp"

namespace ws1 {
namespace {

using test::accuracy_cell;
using test::invariance_cell;

std::size_t occurrences(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// The value of attribute `name` on the first element whose opening tag starts with `tag_start`.
// Searching from `from`.
std::string attribute(const std::string& xml, const std::string& tag_start, const std::string& name,
                      std::size_t from = 0) {
  const auto at = xml.find(tag_start, from);
  REQUIRE(at != std::string::npos);
  const auto end = xml.find('>', at);
  const std::string tag = xml.substr(at, end - at);
  std::smatch m;
  REQUIRE(std::regex_search(tag, m, std::regex(" " + name + "=\"([^\"]*)\"")));
  return m[1];
}

Evidence two_profiles() {
  Evidence e = test::full_green_evidence({});
  for (const char* p : {"cpu_bf16", "cuda_bf16"}) {
    e.cells.push_back(accuracy_cell(p, "rms_norm", Judgment::kForwardAccuracy, "short", "normal"));
    e.cells.push_back(invariance_cell(p, "det_gemm", Judgment::kForwardInvariance, "tp2", Verdict::kGreen));
    e.cells.push_back(invariance_cell(p, "silu", Judgment::kForwardInvariance, "tp2", Verdict::kNa));
  }
  e.cells.push_back(accuracy_cell("cuda_bf16", "lm_head", Judgment::kGradientAccuracy, "primary", "normal", 4.0));
  e.cells.push_back(invariance_cell("cuda_bf16", "logp", Judgment::kGradientInvariance, "BN/permuted", Verdict::kRed));
  return e;
}

TEST_CASE("junit: one suite per backend with the evidence's counts", "[junit]") {
  const Evidence e = two_profiles();
  const std::string xml = junit_xml(e, {});
  CHECK(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites", 0) == 0);
  CHECK(occurrences(xml, "<testsuite ") == 2);
  CHECK(occurrences(xml, "<testcase ") == e.cells.size());
  CHECK(attribute(xml, "<testsuites", "tests") == "8");
  CHECK(attribute(xml, "<testsuites", "failures") == "2");
  CHECK(attribute(xml, "<testsuites", "skipped") == "2");
  CHECK(attribute(xml, "<testsuites", "errors") == "0");
  CHECK(attribute(xml, "<testsuite name=\"ws1check.cpu_bf16\"", "tests") == "3");
  CHECK(attribute(xml, "<testsuite name=\"ws1check.cpu_bf16\"", "failures") == "0");
  CHECK(attribute(xml, "<testsuite name=\"ws1check.cuda_bf16\"", "tests") == "5");
  CHECK(attribute(xml, "<testsuite name=\"ws1check.cuda_bf16\"", "failures") == "2");
  CHECK(attribute(xml, "<testsuite name=\"ws1check.cuda_bf16\"", "skipped") == "1");
  CHECK(attribute(xml, "<testsuite name=\"ws1check.cuda_bf16\"", "timestamp") == "2026-11-30T12:00:00");
  CHECK(occurrences(xml, "<failure ") == 2);
  CHECK(occurrences(xml, "<skipped message=\"no K to split\"/>") == 2);
}

TEST_CASE("junit: testcases are named by cell id with the op as classname; failures carry the worst element", "[junit]") {
  const Evidence e = two_profiles();
  JunitOptions o;
  o.seconds["cuda_bf16/gradient_accuracy/lm_head/primary/lm_head/primary/normal"] = 1.25;
  const std::string xml = junit_xml(e, o);
  const std::string tc = "<testcase classname=\"lm_head\" name=\"cuda_bf16/gradient_accuracy/lm_head/primary/lm_head/primary/normal\"";
  REQUIRE(xml.find(tc) != std::string::npos);
  CHECK(attribute(xml, tc, "time") == "1.250");
  const std::string msg = attribute(xml, "<failure", "message", xml.find(tc));
  CHECK_THAT(msg, Catch::Contains("dx [3, 17]"));
  CHECK_THAT(msg, Catch::Contains("|err|/allowed 4"));
  CHECK_THAT(msg, Catch::Contains("1 of 512 elements violate"));
  // The bitwise failure names the first mismatch with both bit patterns.
  const std::string bits = attribute(xml, "<failure message=\"y [5, 9]", "message");
  CHECK_THAT(bits, Catch::Contains("0x3f81 against 0x3f80"));
}

TEST_CASE("junit: stages form their own suite (not built: skipped, failed: failure)", "[junit]") {
  const Evidence e = two_profiles();
  JunitOptions o;
  o.stages = {{"parity", StageStatus::kNotBuilt, "parity: not built", {}},
              {"audit", StageStatus::kFailed, "1 non-conformant", {{"tf32", "non_conformant", "TF32 MMA found"}}}};
  const std::string xml = junit_xml(e, o);
  CHECK(occurrences(xml, "<testsuite ") == 3);
  CHECK(attribute(xml, "<testsuite name=\"ws1check.stages\"", "tests") == "2");
  CHECK(attribute(xml, "<testsuite name=\"ws1check.stages\"", "failures") == "1");
  CHECK(attribute(xml, "<testsuite name=\"ws1check.stages\"", "skipped") == "1");
  CHECK(attribute(xml, "<testsuites", "tests") == "10");
  CHECK(attribute(xml, "<testsuites", "failures") == "3");
  CHECK_THAT(xml, Catch::Contains("tf32: non_conformant: TF32 MMA found"));
}

TEST_CASE("junit: reasons are escaped and made valid XML 1.0", "[junit]") {
  Evidence e = test::full_green_evidence({});
  Cell c = invariance_cell("cpu_bf16", "silu", Judgment::kForwardInvariance, "layout", Verdict::kNa);
  c.reason = std::string("a<b & \"c\" 'd' \x01 bad \xff byte ]]> </skipped>");
  e.cells.push_back(c);
  const std::string xml = junit_xml(e, {});
  CHECK_THAT(xml, Catch::Contains("message=\"a&lt;b &amp; &quot;c&quot; &#39;d&#39; \xEF\xBF\xBD bad \xEF\xBF\xBD byte ]]&gt; &lt;/skipped&gt;\""));
  for (char ch : xml) {
    const auto u = static_cast<unsigned char>(ch);
    CHECK((u >= 0x20 || ch == '\n' || ch == '\t' || ch == '\r'));
  }
  // Every '&' starts one of the entities the writer uses.
  for (auto p = xml.find('&'); p != std::string::npos; p = xml.find('&', p + 1)) {
    const std::string rest = xml.substr(p, 6);
    CHECK((rest.rfind("&amp;", 0) == 0 || rest.rfind("&lt;", 0) == 0 || rest.rfind("&gt;", 0) == 0 ||
           rest.rfind("&quot;", 0) == 0 || rest.rfind("&#39;", 0) == 0));
  }
}

TEST_CASE("junit: a green cell's reason is its system-out; a green cell without one stays a bare testcase", "[junit]") {
  Evidence e = test::full_green_evidence({});
  Cell qualified = invariance_cell("cpu_bf16", "det_gemm", Judgment::kForwardInvariance, "tp2", Verdict::kGreen);
  qualified.reason = "weights not pinned by the manifest: not the WS1 chain gate (config: 3 layers)";
  e.cells.push_back(qualified);
  e.cells.push_back(invariance_cell("cpu_bf16", "silu", Judgment::kForwardInvariance, "repeat", Verdict::kGreen));
  const std::string xml = junit_xml(e, {});
  CHECK_THAT(xml, Catch::Contains("<system-out>weights not pinned by the manifest: not the WS1 chain gate (config: 3 "
                                  "layers)</system-out>"));
  CHECK(occurrences(xml, "<system-out>") == 1);
  CHECK(attribute(xml, "<testsuites", "failures") == "0");
  CHECK(attribute(xml, "<testsuites", "skipped") == "0");
}

}  // namespace
}  // namespace ws1

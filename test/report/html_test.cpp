// The HTML report: self-contained, one matrix square per cell with its verdict, red details
// open, charts mark violations, text escaped. (test/cli/gate_test.py renders a real run in
// headless Chromium.)
#include <fmt/core.h>

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

Evidence mixed() {
  Evidence e = test::full_green_evidence({"cpu_bf16"});
  e.cells.push_back(accuracy_cell("cpu_bf16", "lm_head", Judgment::kGradientAccuracy, "long", "normal", 4.0));
  e.cells.push_back(invariance_cell("cpu_bf16", "logp", Judgment::kGradientInvariance, "BN/permuted", Verdict::kRed));
  Cell p = invariance_cell("cpu_bf16", "rms_norm", Judgment::kGradientInvariance, "layout", Verdict::kGreen);
  p.id += "/parameters";
  e.cells.push_back(p);
  return e;
}

TEST_CASE("html: one square per cell, by verdict, and the counts in the header", "[html]") {
  const Evidence e = mixed();
  const Summary s = summarize(e.cells);
  const std::string html = html_report(e, {});
  CHECK(occurrences(html, "<a class=\"sq ") == e.cells.size());
  CHECK(occurrences(html, "data-v=\"green\"") == static_cast<std::size_t>(s.green));
  CHECK(occurrences(html, "data-v=\"red\"") == static_cast<std::size_t>(s.red));
  CHECK(occurrences(html, "data-v=\"na\"") == static_cast<std::size_t>(s.na));
  CHECK(s.red == 2);
  CHECK_THAT(html, Catch::Contains(fmt::format("data-green=\"{}\" data-red=\"2\" data-na=\"{}\" data-total=\"{}\"",
                                               s.green, s.na, s.total)));
  CHECK(occurrences(html, "<a class=\"sq v-green param\"") == 1);
  // Every square links to a details element that exists.
  std::regex href("<a class=\"sq [^\"]*\" data-v=\"[a-z]+\" href=\"#([^\"]+)\"");
  std::size_t linked = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), href); it != std::sregex_iterator(); ++it, ++linked)
    CHECK(html.find("id=\"" + (*it)[1].str() + "\"") != std::string::npos);
  CHECK(linked == e.cells.size());
  // The long tier gets its own column beside short and primary.
  CHECK_THAT(html, Catch::Contains("<th class=\"col\">long</th>"));
  CHECK(html.find("<th class=\"col\">primary</th>") < html.find("<th class=\"col\">long</th>"));
}

TEST_CASE("html: self-contained (no external resource) and the verdict follows the stages", "[html]") {
  const Evidence e = test::full_green_evidence({"cpu_bf16"});
  HtmlOptions o;
  o.stages = {{"parity", StageStatus::kNotBuilt, "parity: not built", {}}};
  const std::string green = html_report(e, o);
  for (const char* bad : {"http://", "https://", "src=", "<link", "@import", "url("})
    CHECK(green.find(bad) == std::string::npos);
  CHECK_THAT(green, Catch::Contains("id=\"verdict\">green<"));
  CHECK_THAT(green, Catch::Contains("<th>parity</th><td class=\"s-na\">not built</td>"));
  o.stages.push_back({"audit", StageStatus::kFailed, "1 non-conformant", {{"tf32", "non_conformant", "basis"}}});
  CHECK_THAT(html_report(e, o), Catch::Contains("id=\"verdict\">red<"));
}

TEST_CASE("html: red cells are listed and open; the chart marks a violation", "[html]") {
  const std::string html = html_report(mixed(), {});
  CHECK(occurrences(html, "<details class=\"cell v-red\"") == 2);
  CHECK(occurrences(html, "<details class=\"cell v-red\" id=") == 2);
  std::regex open_red("<details class=\"cell v-red\" id=\"[^\"]+\" open>");
  CHECK(std::distance(std::sregex_iterator(html.begin(), html.end(), open_red), std::sregex_iterator()) == 2);
  CHECK(occurrences(html, "class=\"range bad\"") == 1);    // the violating tensor's chart
  CHECK(occurrences(html, "class=\"m-max bad\"") == 1);
  CHECK(occurrences(html, "class=\"atol\"") >= 1);
  // The worst-elements table leads with the violating element.
  const auto worst = html.find("<section id=\"worst\">");
  CHECK(html.find("<tr class=\"bad\">", worst) < html.find("<tr class=\"ok\">", worst));
}

TEST_CASE("html: text from the evidence is escaped", "[html]") {
  Evidence e = test::full_green_evidence({});
  Cell c = invariance_cell("cpu_bf16", "silu", Judgment::kForwardInvariance, "tp2", Verdict::kNa);
  c.reason = "<script>alert(1)</script> & more";
  e.cells.push_back(c);
  const std::string html = html_report(e, {});
  CHECK(html.find("<script>alert") == std::string::npos);
  CHECK_THAT(html, Catch::Contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; more"));
  CHECK(occurrences(html, "<script>") == 1);  // the page's own
}

TEST_CASE("html: the C8 rows appear when given", "[html]") {
  const Evidence e = test::full_green_evidence({"cpu_bf16"});
  const C8Matrix m = c8_matrix(e, std::vector<std::string>{"cpu_bf16"}, test::catalogue_op_names());
  HtmlOptions o;
  o.c8 = &m;
  const std::string html = html_report(e, o);
  CHECK_THAT(html, Catch::Contains("<p id=\"c8-counts\">96 rows: green 88, N/A 8</p>"));
  CHECK(occurrences(html, "<td class=\"c8 s-green\"") == 88);
  CHECK(occurrences(html, "<td class=\"c8 s-na\"") == 8);
}

}  // namespace
}  // namespace ws1

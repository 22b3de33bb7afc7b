// xml_escape (UTF-8 validity, XML 1.0 characters) and the failure message of a red cell.
#include <catch2/catch.hpp>

#include "report_test_support.hpp"
#include "ws1/report.hpp"

namespace ws1 {
namespace {

const std::string kFFFD = "\xEF\xBF\xBD";

TEST_CASE("xml_escape: markup characters", "[text]") {
  CHECK(xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(xml_escape("") == "");
}

TEST_CASE("xml_escape: valid UTF-8 and allowed controls pass, the rest becomes U+FFFD", "[text]") {
  CHECK(xml_escape("\xC2\xB5m \xE2\x89\xA4 \xF0\x9F\x98\x80") == "\xC2\xB5m \xE2\x89\xA4 \xF0\x9F\x98\x80");
  CHECK(xml_escape("a\tb\nc\rd") == "a\tb\nc\rd");
  CHECK(xml_escape(std::string("x\x01y\x1Fz", 5)) == "x" + kFFFD + "y" + kFFFD + "z");
  CHECK(xml_escape(std::string("\0", 1)) == kFFFD);
  CHECK(xml_escape("\x80") == kFFFD);                  // lone continuation byte
  CHECK(xml_escape("\xC0\xAF") == kFFFD + kFFFD);      // overlong '/'
  CHECK(xml_escape("\xED\xA0\x80") == kFFFD + kFFFD + kFFFD);  // a surrogate
  CHECK(xml_escape("\xF4\x90\x80\x80") == kFFFD + kFFFD + kFFFD + kFFFD);  // above U+10FFFF
  CHECK(xml_escape("\xE2\x89") == kFFFD + kFFFD);      // truncated
  CHECK(xml_escape("\xEF\xBF\xBE") == kFFFD);          // U+FFFE is not an XML character
}

TEST_CASE("cell_failure_message: worst element, first mismatch, or the reason", "[text]") {
  const Cell acc = test::accuracy_cell("cpu_bf16", "rms_norm", Judgment::kForwardAccuracy, "short", "normal", 2.0);
  const std::string m = cell_failure_message(acc);
  CHECK_THAT(m, Catch::StartsWith("y [3, 17]: candidate 1.02, reference 1, |err| 0.02, allowed 0.01 (|err|/allowed 2)"));
  CHECK_THAT(m, Catch::EndsWith("| 1 of 512 elements outside atol + rtol*|ref|"));

  const Cell bits = test::invariance_cell("cpu_bf16", "silu", Judgment::kForwardInvariance, "BN/chunked", Verdict::kRed);
  CHECK_THAT(cell_failure_message(bits), Catch::StartsWith("y [5, 9]: bits 0x3f81 against 0x3f80 (1.008 against 1); 1 elements differ"));

  // A green cell's message is its reason (empty); a red cell without tensors gives its reason.
  const Cell green = test::accuracy_cell("cpu_bf16", "rms_norm", Judgment::kForwardAccuracy, "short", "normal");
  CHECK(cell_failure_message(green).empty());
  Cell failed = green;
  failed.verdict = Verdict::kRed;
  failed.accuracy.clear();
  failed.reason = "candidate failed: out of memory";
  CHECK(cell_failure_message(failed) == "candidate failed: out of memory");
}

}  // namespace
}  // namespace ws1

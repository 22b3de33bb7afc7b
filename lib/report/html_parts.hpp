// Internal to lib/report: the HTML page's pieces (style, script, error chart).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "ws1/evidence.hpp"

namespace ws1::report {

extern const std::string_view kHtmlStyle;   // inline <style> content
extern const std::string_view kHtmlScript;  // inline <script> content

// A small inline SVG: the tensor's mean, P99, P99.9 and max |error| as markers on a log scale
// in units of `atol` (1e-4 atol .. 100 atol; smaller values, 0 included, sit at the left
// edge), with the atol line and, where larger, the worst element's allowance
// (atol + rtol * |reference|). Without a positive atol the scale is in units of the largest
// of those values.
std::string error_chart_svg(const AccuracyTensor& t, std::optional<double> atol);

}  // namespace ws1::report

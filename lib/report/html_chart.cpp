// The per-tensor error chart of the HTML report.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "html_parts.hpp"
#include "report_text.hpp"
#include "ws1/report.hpp"

namespace ws1::report {
namespace {

constexpr double kWidth = 320, kHeight = 38, kLeft = 4, kRight = 316, kAxisY = 24;
constexpr double kLoDecade = -4, kHiDecade = 2;  // the scale, in decades of the unit

double x_of(double v, double unit) {
  if (!(v > 0) || !(unit > 0)) return kLeft;
  const double d = std::clamp(std::log10(v / unit), kLoDecade, kHiDecade);
  return kLeft + (d - kLoDecade) / (kHiDecade - kLoDecade) * (kRight - kLeft);
}

}  // namespace

std::string error_chart_svg(const AccuracyTensor& t, std::optional<double> atol) {
  const ErrorStats& e = t.abs_error;
  const double allowed = t.worst ? t.worst->allowed : 0.0;  // 0: no worst element
  double unit = atol.value_or(0);
  const bool in_atol = unit > 0;
  if (!in_atol) unit = std::max({e.max, allowed, 1e-30});
  const bool bad = !passed(t);

  std::string s = fmt::format(
      "<svg class=\"chart\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" role=\"img\"><title>{2}: |err| mean {3}, p99 {4}, p99.9 {5}, max {6}; "
      "{7}</title>",
      kWidth, kHeight, xml_escape(t.name), num(e.mean), num(e.p99), num(e.p999), num(e.max),
      in_atol ? "atol " + num(unit) : "no atol: scale in units of the largest value");
  // Axis with a tick per decade.
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" class=\"axis\"/>", kLeft, kAxisY, kRight, kAxisY);
  for (double d = kLoDecade; d <= kHiDecade; d += 1) {
    const double x = kLeft + (d - kLoDecade) / (kHiDecade - kLoDecade) * (kRight - kLeft);
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" class=\"tick\"/>", x, kAxisY, kAxisY + 3);
  }
  // The range up to max, then the markers.
  const double xm = x_of(e.max, unit);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"8\" class=\"{}\"/>", kLeft,
                   kAxisY - 12, std::max(0.0, xm - kLeft), bad ? "range bad" : "range");
  s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{}\" r=\"3\" class=\"m-mean\"><title>mean {}</title></circle>",
                   x_of(e.mean, unit), kAxisY - 8, num(e.mean));
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" class=\"m-p99\"><title>P99 {3}</title></line>",
                   x_of(e.p99, unit), kAxisY - 14, kAxisY - 2, num(e.p99));
  s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" class=\"m-p999\"><title>P99.9 {3}</title></line>",
                   x_of(e.p999, unit), kAxisY - 16, kAxisY, num(e.p999));
  s += fmt::format("<path d=\"M{0:.1f} {1} l4 -5 l-4 -5 l-4 5 z\" class=\"m-max{2}\"><title>max {3}</title></path>",
                   xm, kAxisY - 3, bad ? " bad" : "", num(e.max));
  if (in_atol) {
    const double xa = x_of(unit, unit);
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"2\" x2=\"{0:.1f}\" y2=\"{1}\" class=\"atol\"><title>atol {2}</title></line>"
                     "<text x=\"{3:.1f}\" y=\"{4}\" class=\"lbl\">atol</text>",
                     xa, kAxisY + 3, num(unit), xa - 10, kHeight - 2);
    if (allowed > unit * (1 + 1e-9)) {
      const double xw = x_of(allowed, unit);
      s += fmt::format("<line x1=\"{0:.1f}\" y1=\"2\" x2=\"{0:.1f}\" y2=\"{1}\" class=\"allowed\"><title>allowed at the worst "
                       "element (atol + rtol*|ref|) {2}</title></line>",
                       xw, kAxisY + 3, num(allowed));
    }
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"lbl\">{}</text>", kLeft, kHeight - 2,
                   in_atol ? "1e-4 atol" : "1e-4");
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"lbl end\">{}</text></svg>", kRight, kHeight - 2,
                   in_atol ? "100 atol" : "100");
  return s;
}

}  // namespace ws1::report

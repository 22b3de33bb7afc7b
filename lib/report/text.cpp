// Text helpers shared by the writers, and the two public ones (xml_escape,
// cell_failure_message).
#include <fmt/core.h>

#include <cmath>

#include "report_text.hpp"
#include "ws1/report.hpp"
#include "ws1/tensor.hpp"

namespace ws1 {
namespace report {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one (overlong forms,
// surrogates and code points above U+10FFFF are invalid).
std::size_t utf8_sequence(std::string_view s, std::size_t i, char32_t& cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = 0;
  if (c < 0x80) { cp = c; return 1; }
  if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
  else return 0;
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
  if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
  return n;
}

}  // namespace

std::string valid_xml_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    char32_t cp = 0;
    const std::size_t n = utf8_sequence(text, i, cp);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    const bool allowed_control = cp == 0x9 || cp == 0xA || cp == 0xD;
    if ((cp < 0x20 && !allowed_control) || cp == 0xFFFE || cp == 0xFFFF)
      out += kReplacement;
    else
      out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

std::string num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{:.4g}", v);
}

std::string bits_hex(std::uint64_t bits, DType t) {
  return fmt::format("0x{:0{}x}", bits, static_cast<int>(dtype_size(t) * 2));
}

const AccuracyTensor* worst_tensor(const Cell& cell) {
  const AccuracyTensor* worst = nullptr;
  const auto key = [](const AccuracyTensor& t) {
    return std::pair{!passed(t), t.worst ? t.worst->margin : 0.0};
  };
  for (const auto& t : cell.accuracy)
    if (worst == nullptr || key(t) > key(*worst)) worst = &t;
  return worst;
}

std::string worst_element_text(const AccuracyTensor& t) {
  std::string s = t.name;
  if (!t.comparable) {
    s += ": not comparable";
    for (const auto& n : t.notes) s += "; " + n;
    return s;
  }
  if (t.worst) {
    const WorstElement& w = *t.worst;
    s += fmt::format(" {}: candidate {}, reference {}, |err| {}, allowed {} (|err|/allowed {})",
                     shape_string(w.index), num(w.candidate), num(w.reference),
                     num(std::fabs(w.candidate - w.reference)), num(w.allowed), num(w.margin));
  }
  s += fmt::format("; {} of {} elements violate", t.violations, t.numel);
  if (t.nan_elements > 0) s += fmt::format(" ({} with a NaN)", t.nan_elements);
  if (t.floor_violations && *t.floor_violations > 0)
    s += fmt::format("; below the {} floor at {} (the reference rounded to {} fails there too)",
                     dtype_contract_name(t.dtype), *t.floor_violations, dtype_contract_name(t.dtype));
  return s;
}

std::string first_mismatch_text(const Cell& cell) {
  for (const auto& t : cell.bitwise) {
    if (passed(t)) continue;
    std::string s = t.name;
    if (t.lhs_shape != t.rhs_shape || t.lhs_dtype != t.rhs_dtype)
      return s + fmt::format(": {} {} against {} {}", dtype_contract_name(t.lhs_dtype),
                             shape_string(t.lhs_shape), dtype_contract_name(t.rhs_dtype),
                             shape_string(t.rhs_shape));
    if (!t.first_mismatches.empty()) {
      const BitMismatch& m = t.first_mismatches.front();
      s += fmt::format(" {}: bits {} against {} ({} against {})", shape_string(m.index),
                       bits_hex(m.lhs_bits, t.lhs_dtype), bits_hex(m.rhs_bits, t.rhs_dtype),
                       num(m.lhs), num(m.rhs));
    } else if (!t.first_nans.empty()) {
      const BitMismatch& m = t.first_nans.front();
      s += fmt::format(" {}: NaN (bits {} against {})", shape_string(m.index),
                       bits_hex(m.lhs_bits, t.lhs_dtype), bits_hex(m.rhs_bits, t.rhs_dtype));
    }
    s += fmt::format("; {} elements differ", t.mismatches);
    if (t.lhs_nans + t.rhs_nans > 0) s += fmt::format(", NaNs {} / {}", t.lhs_nans, t.rhs_nans);
    return s;
  }
  return "";
}

std::string judgment_short(Judgment j) {
  switch (j) {
    case Judgment::kForwardAccuracy: return "fwd acc";
    case Judgment::kGradientAccuracy: return "grad acc";
    case Judgment::kForwardInvariance: return "fwd inv";
    case Judgment::kGradientInvariance: return "grad inv";
    case Judgment::kChainParity: return "parity";
  }
  return "?";
}

}  // namespace report

std::string_view stage_status_name(StageStatus s) {
  switch (s) {
    case StageStatus::kPassed: return "passed";
    case StageStatus::kFailed: return "failed";
    case StageStatus::kNotBuilt: return "not built";
  }
  return "?";
}

std::string xml_escape(std::string_view text) {
  const std::string valid = report::valid_xml_text(text);
  std::string out;
  out.reserve(valid.size());
  for (char c : valid) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string cell_failure_message(const Cell& cell) {
  if (cell.verdict != Verdict::kRed) return cell.reason;
  std::string what;
  if (const AccuracyTensor* t = report::worst_tensor(cell); t != nullptr && !passed(*t))
    what = report::worst_element_text(*t);
  if (what.empty()) what = report::first_mismatch_text(cell);
  if (what.empty())
    for (const auto& m : cell.metrics)
      if (m.threshold && !(m.value <= *m.threshold)) {
        what = fmt::format("{} {} > {}", m.name, report::num(m.value), report::num(*m.threshold));
        break;
      }
  if (what.empty()) return cell.reason;
  if (cell.reason.empty() || cell.reason == what) return what;
  return what + " | " + cell.reason;
}

}  // namespace ws1

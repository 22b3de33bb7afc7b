// Internal to lib/report: formatting shared by the C8, JUnit and HTML writers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ws1/evidence.hpp"

namespace ws1::report {

// `text` with invalid UTF-8 and the control characters XML 1.0 forbids replaced by U+FFFD.
std::string valid_xml_text(std::string_view text);

// A double for people: 4 significant digits, "nan", "inf", "-inf".
std::string num(double v);

// Raw bits in hex, as wide as the dtype (bf16 0x3f80, f32 0x3f800000), as the evidence writes them.
std::string bits_hex(std::uint64_t bits, DType t);

// The tensor whose worst element uses the largest share of its allowance (failed tensors
// first), or nullptr when the cell has no accuracy tensor.
const AccuracyTensor* worst_tensor(const Cell& cell);

// The worst element of an accuracy tensor: "dx [3, 17]: candidate 1.5, reference 1.49, |err|
// 0.01, allowed 0.008 (|err|/allowed 1.25); 2 of 512 elements violate".
std::string worst_element_text(const AccuracyTensor& t);

// The first bitwise tensor that fails, described by its first mismatch (or first NaN), or "".
std::string first_mismatch_text(const Cell& cell);

// "forward_accuracy" -> "fwd acc", "gradient_invariance" -> "grad inv".
std::string judgment_short(Judgment j);

}  // namespace ws1::report

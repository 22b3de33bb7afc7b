// Internal: one parser per top-level block of the contract. Each fills its part of the model
// and throws json::Failure at the first problem. Cross-block checks run after all blocks are read.
#pragma once

#include <cctype>
#include <string>
#include <string_view>

#include "json_node.hpp"
#include "ws1/contract.hpp"

namespace ws1::contract_detail {

using json::format_number;
using json::join_names;
using json::Node;

PrecisionPolicy parse_policy(const Node& policy);
ComparisonRoles parse_roles(const Node& roles);
std::map<Judgment, JudgmentTable> parse_judgments(const Node& judgments);
ChainAggregates parse_chain(const Node& chain);
// `accuracy` and `batch_invariance`, checked against the judgments already read.
LegacyBlocks parse_legacy(const std::optional<Node>& accuracy,
                          const std::optional<Node>& batch_invariance, const Contract& contract);
// ws1check_declarations, checked against the policy already read.
Declarations parse_declarations(const Node& block, const PrecisionPolicy& policy);

// judgment_rules (ws1-c1-v3).
JudgmentRules parse_rules(const Node& block);

// The scale-free gradient rule as the contract must state it (the one ws1check implements).
inline constexpr std::string_view kScaleFreeDefinition =
    "|c - r| <= atol_rel * max(abs(r)) + rtol * |r|";

// The relative criterion as the contract must state it.
inline constexpr std::string_view kRelativeDefinition =
    "max|c - r| <= factor * max|n - r| + floor_steps * ulp_bf16(max|r|)";

// The bias rule as the contract must state it.
inline constexpr std::string_view kBiasDefinition =
    "|sum(s)| <= max(max_mean * n, z * sqrt(count(s != 0))) for s = sign(c - q) and s = sign(|c| - |q|), "
    "q = r rounded to the candidate dtype, over the n finite pairs";

// Report kinds of comparison_roles.by_report_kind: the four judgments plus the chain parity.
inline constexpr std::string_view kParityReportKind = "train_infer_logprob_parity";

// Whitespace-insensitive equality, for formulas and definitions written by hand.
inline bool same_ignoring_spaces(std::string_view a, std::string_view b) {
  auto squeeze = [](std::string_view s) {
    std::string out;
    for (unsigned char c : s)
      if (!std::isspace(c)) out += static_cast<char>(c);
    return out;
  };
  return squeeze(a) == squeeze(b);
}

}  // namespace ws1::contract_detail

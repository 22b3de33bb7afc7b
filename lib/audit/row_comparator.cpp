// Invariance comparator self-test (spec §4.2, §9.4; DESIGN §3.3): the comparator the judges use,
// on fixed cases whose answers the contract's declarations fix: +0 and -0 are different bits,
// NaN handling follows nan_policy, and dtype / shape differences fail.
#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <functional>

#include "audit_support.hpp"
#include "ws1/judge.hpp"

namespace ws1 {
namespace {

Tensor bf16_bits(std::vector<std::uint16_t> bits, Shape shape) {
  Tensor t(DType::kBF16, std::move(shape));
  std::memcpy(t.raw(), bits.data(), bits.size() * sizeof(std::uint16_t));
  return t;
}
Tensor f32_bits(std::vector<std::uint32_t> bits, Shape shape) {
  Tensor t(DType::kF32, std::move(shape));
  std::memcpy(t.raw(), bits.data(), bits.size() * sizeof(std::uint32_t));
  return t;
}

// Further requirements on a case's record (empty string: met).
using Check = std::function<std::string(const BitwiseTensor&)>;

struct Case {
  std::string name;
  Tensor lhs, rhs;
  bool pass;  // the answer the declarations require
  Check record;
};

std::string need(bool ok, std::string what) { return ok ? std::string() : std::move(what); }

std::vector<Case> cases(NanPolicy policy) {
  const bool compare_bits = policy == NanPolicy::kCompareBits;
  auto signed_zero = [](const BitwiseTensor& t) {
    return need(t.mismatches == 1 && t.signed_zero_mismatches == 1,
                fmt::format("expected 1 mismatch counted as a signed zero, got {} and {}",
                            t.mismatches, t.signed_zero_mismatches));
  };
  auto nan_listed = [](std::uint64_t payload) -> Check {
    return [payload](const BitwiseTensor& t) {
      return need(!t.first_nans.empty() && t.first_nans[0].lhs_bits == payload && t.lhs_nans == 1,
                  fmt::format("expected the NaN listed with its payload {:#x}", payload));
    };
  };
  auto mismatch_listed = [](std::uint64_t l, std::uint64_t r) -> Check {
    return [l, r](const BitwiseTensor& t) {
      return need(t.mismatches == 1 && !t.first_mismatches.empty() &&
                      t.first_mismatches[0].lhs_bits == l && t.first_mismatches[0].rhs_bits == r,
                  fmt::format("expected 1 mismatch listed with bits {:#x} / {:#x}", l, r));
    };
  };
  const Check none = [](const BitwiseTensor&) { return std::string(); };
  std::vector<Case> v;
  v.push_back({"equal bits (bf16 1.0, -2.5)", bf16_bits({0x3f80, 0xc020}, {2}),
               bf16_bits({0x3f80, 0xc020}, {2}), true,
               [](const BitwiseTensor& t) { return need(t.mismatches == 0, "expected no mismatch"); }});
  v.push_back({"+0 vs -0 (bf16)", bf16_bits({0x0000}, {1}), bf16_bits({0x8000}, {1}), false, signed_zero});
  v.push_back({"+0 vs -0 (float32)", f32_bits({0x00000000u}, {1}), f32_bits({0x80000000u}, {1}), false,
               signed_zero});
  v.push_back({"-0 vs -0 (bf16)", bf16_bits({0x8000}, {1}), bf16_bits({0x8000}, {1}), true, none});
  v.push_back({"same NaN payload (bf16 0x7fc1)", bf16_bits({0x7fc1}, {1}), bf16_bits({0x7fc1}, {1}),
               compare_bits, compare_bits ? none : nan_listed(0x7fc1)});
  v.push_back({"same NaN payload (float32 0x7fc00001)", f32_bits({0x7fc00001u}, {1}),
               f32_bits({0x7fc00001u}, {1}), compare_bits,
               compare_bits ? none : nan_listed(0x7fc00001u)});
  v.push_back({"NaN payloads differ (bf16 0x7fc1 vs 0x7fc2)", bf16_bits({0x7fc1}, {1}),
               bf16_bits({0x7fc2}, {1}), false,
               compare_bits ? mismatch_listed(0x7fc1, 0x7fc2) : nan_listed(0x7fc1)});
  v.push_back({"NaN vs 1.0 (bf16)", bf16_bits({0x7fc0}, {1}), bf16_bits({0x3f80}, {1}), false,
               compare_bits ? mismatch_listed(0x7fc0, 0x3f80) : nan_listed(0x7fc0)});
  v.push_back({"one ulp apart (bf16 1.0 vs 1.0078125)", bf16_bits({0x3f80}, {1}), bf16_bits({0x3f81}, {1}),
               false, mismatch_listed(0x3f80, 0x3f81)});
  v.push_back({"dtype differs (bf16 1.0 vs float32 1.0)", bf16_bits({0x3f80}, {1}),
               f32_bits({0x3f800000u}, {1}), false, none});
  v.push_back({"shape differs ([2] vs [1, 2])", bf16_bits({0x3f80, 0x4000}, {2}),
               bf16_bits({0x3f80, 0x4000}, {1, 2}), false, none});
  return v;
}

}  // namespace

AuditRow audit_invariance_comparator(const Contract& contract, const BitwiseComparator& compare) {
  AuditRow row = audit_detail::make_row(kRowInvarianceComparator);
  const auto& inv = contract.declarations.invariance;
  const NanPolicy policy = inv ? inv->nan_policy : NanPolicy::kFail;
  const std::string source = inv ? "ws1check_declarations.invariance.nan_policy"
                                 : "undeclared in the contract: DESIGN §3.3's default";
  std::vector<std::string> wrong;
  const auto all = cases(policy);
  for (const Case& c : all) {
    const BitwiseTensor t = compare(c.name, c.lhs, c.rhs, policy, kDefaultMaxReported);
    std::string problem;
    if (passed(t) != c.pass)
      problem = fmt::format("gave {}, the declarations require {}", passed(t) ? "pass" : "fail",
                            c.pass ? "pass" : "fail");
    else if (t.nan_policy != policy)
      problem = fmt::format("recorded nan_policy {}, asked {}", contract_name(t.nan_policy),
                            contract_name(policy));
    else
      problem = c.record(t);
    row.details.push_back(fmt::format("{}: {}{}", c.name, c.pass ? "pass" : "fail",
                                      problem.empty() ? " (as required)" : " -- " + problem));
    if (!problem.empty()) wrong.push_back(fmt::format("{}: {}", c.name, problem));
  }
  const std::string ran = fmt::format(
      "judge_bitwise on {} cases (±0 in bf16 and float32, NaN payloads, one ulp, dtype, shape) under "
      "nan_policy {} ({})",
      all.size(), contract_name(policy), source);
  if (wrong.empty()) {
    row.status = AuditStatus::kConformant;
    row.basis = ran + ": every answer as required (+0 != -0, NaN per policy, payload reported)";
  } else {
    row.status = AuditStatus::kNonConformant;
    row.basis = fmt::format("{}: {} wrong, first: {}", ran, wrong.size(), wrong.front());
  }
  return row;
}

AuditRow audit_invariance_comparator(const Contract& contract) {
  return audit_invariance_comparator(
      contract, [](std::string name, const Tensor& l, const Tensor& r, NanPolicy p, std::size_t n) {
        return judge_bitwise(std::move(name), l, r, p, n);
      });
}

}  // namespace ws1
